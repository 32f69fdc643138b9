-- Delivery isolation (issue 20, DESIGN.md "Delivery isolation"): a receiver-set throttle per subscription, the
-- circuit breaker's state mirrored from the worker's Redis state for GET and the dashboard, and why a pending
-- delivery waits (a postponement is not an attempt).
ALTER TABLE "webhook_subscriptions" ADD COLUMN     "breaker_state" TEXT NOT NULL DEFAULT 'closed',
ADD COLUMN     "breaker_until" TIMESTAMP(3),
ADD COLUMN     "rate_limit" INTEGER;

ALTER TABLE "webhook_deliveries" ADD COLUMN     "wait_reason" TEXT;
