-- The payload format is fixed per delivery when it is created: every attempt (and retry) sends the same bytes,
-- whatever later PATCHes do to the subscription. Existing deliveries take their subscription's current format.
ALTER TABLE "webhook_deliveries" ADD COLUMN "payload_format" TEXT;

UPDATE "webhook_deliveries" AS d
SET "payload_format" = s."payload_format"
FROM "webhook_subscriptions" AS s
WHERE s."id" = d."subscription_id";

ALTER TABLE "webhook_deliveries" ALTER COLUMN "payload_format" SET NOT NULL;
