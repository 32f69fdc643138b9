-- The outbox relay pages through pending deliveries by id (status pending and id after its cursor, in id order).
-- With only (status, enqueued_at), PostgreSQL walked the primary key from the cursor and filtered out every finished
-- delivery on the way: each relay run read the whole table (229 ms at 1,000,000 finished deliveries, linear in the
-- table). On (status, id) a page is a range scan of pending rows only (0.4 ms). Nothing filters on enqueued_at, and the
-- count of pending deliveries for the metrics uses the status prefix of either index.
DROP INDEX IF EXISTS "webhook_deliveries_status_enqueued_at_idx";
CREATE INDEX IF NOT EXISTS "webhook_deliveries_status_id_idx" ON "webhook_deliveries"("status", "id");
