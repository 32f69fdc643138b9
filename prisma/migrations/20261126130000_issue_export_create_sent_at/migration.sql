-- Exactly one tracker issue per export: the time the first create request may have reached the tracker. Once set,
-- every attempt looks for the issue carrying the export's marker before creating one.
ALTER TABLE "finding_issue_exports" ADD COLUMN "create_sent_at" TIMESTAMP(3);
