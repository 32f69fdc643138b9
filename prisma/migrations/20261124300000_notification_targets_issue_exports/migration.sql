-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "email_recipients" TEXT[] DEFAULT ARRAY[]::TEXT[],
ADD COLUMN     "kind" TEXT NOT NULL DEFAULT 'webhook';

-- CreateTable
CREATE TABLE "issue_export_targets" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "base_url" TEXT NOT NULL,
    "repository" TEXT,
    "project_key" TEXT,
    "issue_type" TEXT,
    "credentials_enc" TEXT NOT NULL,
    "last_success_at" TIMESTAMP(3),
    "last_error" TEXT,
    "last_error_at" TIMESTAMP(3),
    "deleted_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "issue_export_targets_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "finding_issue_exports" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "finding_id" TEXT NOT NULL,
    "target_id" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "attempt_count" INTEGER NOT NULL DEFAULT 0,
    "external_key" TEXT,
    "external_url" TEXT,
    "last_error" TEXT,
    "next_attempt_at" TIMESTAMP(3),
    "completed_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "finding_issue_exports_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "issue_export_targets_organization_id_deleted_at_idx" ON "issue_export_targets"("organization_id", "deleted_at");

-- CreateIndex
CREATE INDEX "finding_issue_exports_organization_id_finding_id_idx" ON "finding_issue_exports"("organization_id", "finding_id");

-- CreateIndex
CREATE UNIQUE INDEX "finding_issue_exports_finding_id_target_id_key" ON "finding_issue_exports"("finding_id", "target_id");

-- CreateIndex
CREATE INDEX "webhook_subscriptions_organization_id_kind_idx" ON "webhook_subscriptions"("organization_id", "kind");

