-- CreateTable
CREATE TABLE "report_shares" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "report_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "email" TEXT,
    "token_hash" TEXT NOT NULL,
    "created_by_id" TEXT NOT NULL,
    "expires_at" TIMESTAMP(3),
    "revoked_at" TIMESTAMP(3),
    "revoked_by_id" TEXT,
    "last_accessed_at" TIMESTAMP(3),
    "access_count" INTEGER NOT NULL DEFAULT 0,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "report_shares_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "report_shares_token_hash_key" ON "report_shares"("token_hash");

-- CreateIndex
CREATE INDEX "report_shares_organization_id_idx" ON "report_shares"("organization_id");

-- CreateIndex
CREATE INDEX "report_shares_report_id_idx" ON "report_shares"("report_id");

-- AddForeignKey
ALTER TABLE "report_shares" ADD CONSTRAINT "report_shares_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "report_shares" ADD CONSTRAINT "report_shares_report_id_fkey" FOREIGN KEY ("report_id") REFERENCES "reports"("id") ON DELETE CASCADE ON UPDATE CASCADE;

