-- AlterTable
ALTER TABLE "erasure_requests" ADD COLUMN     "confirmed_at" TIMESTAMP(3),
ADD COLUMN     "confirmed_by_id" TEXT,
ADD COLUMN     "preview" JSONB,
ADD COLUMN     "progress" JSONB,
ADD COLUMN     "subject_email_key" TEXT,
ADD COLUMN     "subject_enc" TEXT,
ALTER COLUMN "subject_user_id" DROP NOT NULL,
ALTER COLUMN "status" SET DEFAULT 'previewing';

-- CreateIndex
CREATE INDEX "erasure_requests_organization_id_subject_email_key_idx" ON "erasure_requests"("organization_id", "subject_email_key");


-- A request names a user or an e-mail address.
ALTER TABLE "erasure_requests" ADD CONSTRAINT "erasure_requests_subject" CHECK ("subject_user_id" IS NOT NULL OR "subject_email_key" IS NOT NULL);

-- Requests filed before previews existed were never confirmed: they are previewed and wait for a confirmation.
UPDATE "erasure_requests" SET "status" = 'previewing' WHERE "status" = 'pending';
