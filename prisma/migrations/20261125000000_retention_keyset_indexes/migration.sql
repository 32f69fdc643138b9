-- The retention purge resumes each batch after the last (completed_at, id) of deliveries and (created_at, id) of
-- events it saw (keyset). An index on the timestamp alone leaves rows that share it in no order by id: every batch
-- read all of them and sorted, so a purge of deliveries completed in the same instant (a bulk import's, or a
-- benchmark's) cost grew with their number. The index on both columns makes each batch a range scan of its own rows.
DROP INDEX IF EXISTS "webhook_deliveries_completed_at_idx";
CREATE INDEX IF NOT EXISTS "webhook_deliveries_completed_at_id_idx" ON "webhook_deliveries"("completed_at", "id");
DROP INDEX IF EXISTS "events_created_at_idx";
CREATE INDEX IF NOT EXISTS "events_created_at_id_idx" ON "events"("created_at", "id");
