-- CreateTable
CREATE TABLE "erasure_requests" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "subject_user_id" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "pseudonym_name" TEXT NOT NULL,
    "pseudonym_email" TEXT NOT NULL,
    "requested_by_id" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "error" TEXT,
    "receipt" JSONB,
    "completed_at" TIMESTAMP(3),
    "cancelled_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "erasure_requests_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "erasure_requests_organization_id_subject_user_id_idx" ON "erasure_requests"("organization_id", "subject_user_id");

-- CreateIndex
CREATE INDEX "erasure_requests_status_created_at_idx" ON "erasure_requests"("status", "created_at");

-- AddForeignKey
ALTER TABLE "erasure_requests" ADD CONSTRAINT "erasure_requests_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

