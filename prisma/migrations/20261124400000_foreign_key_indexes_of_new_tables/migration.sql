-- The foreign keys of tables added beside issue 21 (source archives, integrations) indexed like every other one
-- (apps/api/test/foreign-key-indexes.test.ts): deleting an archive or an organization must not scan these tables.
-- CreateIndex
CREATE INDEX IF NOT EXISTS "project_sources_archive_id_idx" ON "project_sources"("archive_id");

-- CreateIndex
CREATE INDEX IF NOT EXISTS "team_integrations_organization_id_idx" ON "team_integrations"("organization_id");
