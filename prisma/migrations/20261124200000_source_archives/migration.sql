-- CreateTable
CREATE TABLE "source_archives" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "assessment_id" TEXT NOT NULL,
    "sha256" CHAR(64) NOT NULL,
    "size_bytes" BIGINT NOT NULL,
    "file_count" INTEGER NOT NULL,
    "uncompressed_bytes" BIGINT NOT NULL,
    "storage_prefix" TEXT NOT NULL,
    "created_by_id" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "source_archives_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "source_files" (
    "archive_id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "size_bytes" BIGINT NOT NULL,
    "sha256" CHAR(64) NOT NULL,

    CONSTRAINT "source_files_pkey" PRIMARY KEY ("archive_id","path")
);

-- CreateTable
CREATE TABLE "project_sources" (
    "project_id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "repository_url" TEXT,
    "default_branch" TEXT,
    "archive_id" TEXT,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "project_sources_pkey" PRIMARY KEY ("project_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "source_archives_assessment_id_key" ON "source_archives"("assessment_id");

-- CreateIndex
CREATE INDEX "source_archives_organization_id_idx" ON "source_archives"("organization_id");

-- CreateIndex
CREATE INDEX "source_archives_project_id_idx" ON "source_archives"("project_id");

-- CreateIndex
CREATE INDEX "project_sources_organization_id_idx" ON "project_sources"("organization_id");

-- AddForeignKey
ALTER TABLE "source_archives" ADD CONSTRAINT "source_archives_assessment_id_fkey" FOREIGN KEY ("assessment_id") REFERENCES "assessments"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "source_files" ADD CONSTRAINT "source_files_archive_id_fkey" FOREIGN KEY ("archive_id") REFERENCES "source_archives"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "project_sources" ADD CONSTRAINT "project_sources_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "project_sources" ADD CONSTRAINT "project_sources_archive_id_fkey" FOREIGN KEY ("archive_id") REFERENCES "source_archives"("id") ON DELETE CASCADE ON UPDATE CASCADE;

