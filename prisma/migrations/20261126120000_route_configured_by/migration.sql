-- Who last created or changed each event route (webhook subscription or notification target): a route keeps
-- delivering only while that person holds an organization-wide role (DESIGN.md, trust boundaries). Written so that
-- the whole file can run again without harm (apps/api/test/event-routing.test.ts runs it over arranged rows).

-- AlterTable
ALTER TABLE "webhook_subscriptions" ADD COLUMN IF NOT EXISTS "configured_by_user_id" TEXT;

-- CreateIndex
CREATE INDEX IF NOT EXISTS "webhook_subscriptions_organization_id_configured_by_user_id_idx" ON "webhook_subscriptions"("organization_id", "configured_by_user_id");

-- Backfill from the audit log: the user (or the user of the API key) of the route's latest creation or change, in
-- the route's own organization. Routes whose events have been purged keep NULL (no one to answer for them).
UPDATE "webhook_subscriptions" s
SET "configured_by_user_id" = last.user_id
FROM (
  SELECT DISTINCT ON (e.organization_id, e.target_id)
         e.organization_id, e.target_id,
         CASE WHEN e.actor_type = 'user' THEN e.actor_id ELSE k.user_id END AS user_id
  FROM "audit_events" e
  LEFT JOIN "api_keys" k ON e.actor_type = 'api_key' AND k.id = e.actor_id AND k.organization_id = e.organization_id
  WHERE e.action IN ('webhook.subscription_created', 'webhook.subscription_updated',
                     'notification_target.created', 'notification_target.updated')
    AND e.actor_type IN ('user', 'api_key')
  ORDER BY e.organization_id, e.target_id, e.created_at DESC, e.id DESC
) last
WHERE s.id = last.target_id
  AND s.organization_id = last.organization_id
  AND s.configured_by_user_id IS NULL
  AND last.user_id IS NOT NULL;

-- Routes configured by someone who no longer holds an organization-wide role (a manager who configured a
-- notification target under the earlier bundle, an admin demoted or removed since) stop delivering at once.
UPDATE "webhook_subscriptions" s
SET "status" = 'disabled',
    "disabled_reason" = 'configured by someone without an organization-wide role: an owner or admin must re-enable it',
    "updated_at" = CURRENT_TIMESTAMP
WHERE s.deleted_at IS NULL
  AND s.status <> 'disabled'
  AND s.configured_by_user_id IS NOT NULL
  AND NOT EXISTS (
    SELECT 1 FROM "memberships" m
    WHERE m.organization_id = s.organization_id
      AND m.user_id = s.configured_by_user_id
      AND m.role::text IN ('owner', 'admin'));
