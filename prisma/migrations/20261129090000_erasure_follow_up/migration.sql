-- GDPR erasure follow-up (docs/domain.md "GDPR erasure"): some minutes after a request completes, the worker scrubs
-- the audit entries that requests already under way when it completed wrote in the organization, then sets
-- followed_up_at. The requests completed before this migration are taken as followed up.
ALTER TABLE "erasure_requests" ADD COLUMN "followed_up_at" TIMESTAMP(3);
UPDATE "erasure_requests" SET "followed_up_at" = "completed_at" WHERE "status" = 'completed';
