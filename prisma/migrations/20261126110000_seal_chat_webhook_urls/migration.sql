-- Chat webhook URLs (Slack/Teams notification targets) are sealed at rest in url_enc, and url keeps only the origin.
-- Existing plain rows cannot be sealed here (no node crypto, no key): the API and the worker seal them at
-- start-up (packages/db/src/chat-urls.ts, sealPlainChatUrls).
-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "url_enc" TEXT;
