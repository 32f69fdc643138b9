-- Every foreign-key column indexed (issue 21): without an index on the referencing column, each deleted parent row
-- (an expired event, a deleted organization or project) makes PostgreSQL scan the whole child table for the
-- cascade. apps/api/test/foreign-key-indexes.test.ts reads pg_constraint / pg_index and fails on a new unindexed one.
-- events.created_at serves the retention purge's sweep of old events that no delivery references.
-- On a large existing database, create these first by hand with CREATE INDEX CONCURRENTLY under the same names
-- (IF NOT EXISTS below then skips them), so the tables are not locked for writes while they build.
-- CreateIndex
CREATE INDEX IF NOT EXISTS "email_tokens_user_id_idx" ON "email_tokens"("user_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "sessions_organization_id_idx" ON "sessions"("organization_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "access_grants_organization_id_idx" ON "access_grants"("organization_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "webhook_subscriptions_project_id_idx" ON "webhook_subscriptions"("project_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "webhook_subscriptions_assessment_id_idx" ON "webhook_subscriptions"("assessment_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "events_created_at_idx" ON "events"("created_at");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "webhook_deliveries_event_id_idx" ON "webhook_deliveries"("event_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "fix_verifications_organization_id_idx" ON "fix_verifications"("organization_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "pr_reviews_organization_id_idx" ON "pr_reviews"("organization_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "spend_limits_project_id_idx" ON "spend_limits"("project_id");

