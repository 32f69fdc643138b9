// Who may decide where events go (DESIGN.md, trust boundaries): only events of projects they can read, and routes
// of the whole organization only with an organization-wide role (owner or admin, who read every project).
// - Where a route is configured: webhook levels (levels.ts) and notification targets call requireOrgWideRouting or
//   the project and assessment access checks.
// - Afterwards: a route (webhook subscription or notification target) remembers who last configured it. When that
//   person loses the organization-wide role (demoted below admin, or removed), their routes are disabled in the same
//   transaction as the change, and the worker skips every pending delivery of a disabled route at send time. An owner
//   or admin who re-enables or edits a route answers for it from then on.
import type { Tx } from '@svc/db';
import { roleRank } from '@svc/scopes';
import type { Principal } from '../../auth/principal';
import { forbidden } from '../../http/errors';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import { hasOrgWideWrite } from './access.service';
import { lockOwnRole } from './own-role';

import { CONFIGURER_LOST_ROLE_REASON } from '@svc/domain';

export { CONFIGURER_LOST_ROLE_REASON };

/** 403 unless the principal reads every project of the organization (what an organization-wide route delivers). */
export function requireOrgWideRouting(principal: Principal, what: string): void {
  if (!hasOrgWideWrite(principal)) {
    throw forbidden(`${what} route events of every project of the organization: they require the admin or owner role.`);
  }
}

/**
 * Inside the transaction that creates or changes a route: the principal's role as committed now, with the membership
 * row share-locked until the route is written. A demotion or removal running at the same time either waits for this
 * transaction (and then disables the route it wrote) or has committed first (and this refuses with 403), so a
 * request authenticated just before a demotion cannot leave a live route behind it.
 */
export async function confirmRoutingRole(tx: Tx, principal: Principal): Promise<void> {
  const role = await lockOwnRole(tx, principal);
  if (!role || roleRank(role) < roleRank('admin')) {
    throw forbidden('Routing events requires the admin or owner role, which you no longer hold.');
  }
}

/**
 * Disables the live routes last configured by `userId` in the principal's organization, audited as the principal's
 * act; the caller runs it in the transaction that takes the organization-wide role away.
 */
export async function disableRoutesConfiguredBy(
  tx: Tx,
  principal: Principal,
  meta: RequestMeta,
  userId: string,
  now: Date,
): Promise<number> {
  const where = {
    organizationId: principal.organizationId,
    configuredByUserId: userId,
    deletedAt: null,
    status: { not: 'disabled' as const },
  };
  const routes = await tx.webhookSubscription.findMany({
    where,
    select: { id: true, kind: true, level: true, projectId: true, assessmentId: true },
  });
  if (routes.length === 0) return 0;
  await tx.webhookSubscription.updateMany({
    where: { ...where, id: { in: routes.map((r) => r.id) } },
    data: { status: 'disabled', disabledReason: CONFIGURER_LOST_ROLE_REASON },
  });
  await recordAs(
    tx,
    principal,
    meta,
    now,
    routes.map((r) => ({
      action: 'webhook.subscription_disabled' as const,
      target: { type: r.kind === 'webhook' ? 'webhook_subscription' : 'notification_target', id: r.id },
      metadata: {
        kind: r.kind,
        level: r.level,
        project_id: r.projectId,
        assessment_id: r.assessmentId,
        disabled_reason: CONFIGURER_LOST_ROLE_REASON,
        configured_by_user_id: userId,
      },
    })),
  );
  return routes.length;
}
