-- Renders of a report started and not finished: raised when a render starts and lowered when it ends, whatever its
-- outcome, so what stays counted are renders whose worker died during them (a report whose PDF exhausts the
-- worker's memory, say). Stall recovery moves such a job on without the job's handler and the report relay
-- enqueues the report again, so without this count one such report would kill a worker on every relay cycle
-- (apps/worker/src/reports/report-job.ts ends it `failed` instead).
ALTER TABLE "reports" ADD COLUMN "unfinished_renders" INTEGER NOT NULL DEFAULT 0;
