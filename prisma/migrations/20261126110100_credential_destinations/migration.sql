-- The destination (scheme://host:port) each stored credential was given for, enforced by the worker too.
-- Existing rows are bound at start-up by the API and the worker (packages/db stored-secrets.ts), not here:
-- the one rule that computes a destination is code (@svc/webhooks credentialDestination).
-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "credential_destination" TEXT;

-- AlterTable
ALTER TABLE "issue_export_targets" ADD COLUMN     "credential_destination" TEXT;

