-- Issue 37 part 4: how a subscription's deliveries are signed, SPEC's scheme by default.
-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "signature_scheme" TEXT NOT NULL DEFAULT 'service';
