-- AlterTable: the wait a receiver's Retry-After asked for after this attempt.
ALTER TABLE "webhook_attempts" ADD COLUMN     "retry_after_ms" INTEGER;

-- AlterTable: resend and recover create a new delivery pointing at the original, recovery marks the original once.
ALTER TABLE "webhook_deliveries" ADD COLUMN     "redelivery_of" TEXT,
ADD COLUMN     "recovered_at" TIMESTAMP(3);

-- CreateIndex
CREATE INDEX "webhook_deliveries_redelivery_of_idx" ON "webhook_deliveries"("redelivery_of");
