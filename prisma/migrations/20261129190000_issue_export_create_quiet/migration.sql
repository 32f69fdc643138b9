-- Exactly one tracker issue per export when two runs of one export overlap (a job taken over by another worker while
-- its first run still waits for the tracker): until when no other create request may be sent. Set with the claim
-- of a create request (now + the request timeout + the tracker's search lag), moved to the answer + the search lag
-- (or cleared after a 4xx) when the answer is recorded (apps/worker/src/issue-export.ts).
ALTER TABLE "finding_issue_exports" ADD COLUMN "create_quiet_until" TIMESTAMP(3);
