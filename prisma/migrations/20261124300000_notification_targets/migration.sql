-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "email_recipients" TEXT[] DEFAULT ARRAY[]::TEXT[],
ADD COLUMN     "kind" TEXT NOT NULL DEFAULT 'webhook';

-- CreateIndex
CREATE INDEX "webhook_subscriptions_organization_id_kind_idx" ON "webhook_subscriptions"("organization_id", "kind");

