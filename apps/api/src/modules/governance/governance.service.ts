// Governance policy: the remediation SLA per finding severity, stored on the organization. The breach scan that
// reads it runs in the worker (apps/worker/src/sla-scan.ts).
import { scopedTo } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { notFound } from '../../http/errors';
import { SLA_SEVERITIES, slaPolicyFromColumns, slaPolicyToColumns, type SlaPolicy } from '@svc/domain';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import { lockOrganization } from '../organizations/organization-lock';

const SLA_SELECT = { slaCriticalDays: true, slaHighDays: true, slaMediumDays: true, slaLowDays: true, slaInfoDays: true } as const;

/** The organization's SLA policy (its defaults until someone changes it). */
export async function loadSlaPolicy(deps: AppDeps, organizationId: string): Promise<SlaPolicy> {
  const org = await deps.prisma.organization.findUnique({ where: { id: organizationId }, select: SLA_SELECT });
  if (!org) throw notFound('Organization');
  return slaPolicyFromColumns(org);
}

export async function getSlaPolicy(deps: AppDeps, principal: Principal): Promise<SlaPolicy> {
  return loadSlaPolicy(deps, principal.organizationId);
}

const samePolicy = (a: SlaPolicy, b: SlaPolicy) => SLA_SEVERITIES.every((s) => a[s] === b[s]);

/** Replaces the policy; `governance.sla_updated` records it before and after, and a PUT of the same policy nothing. */
export async function putSlaPolicy(deps: AppDeps, principal: Principal, policy: SlaPolicy, meta: RequestMeta): Promise<SlaPolicy> {
  const now = deps.clock.now();
  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await lockOrganization(tx, principal.organizationId);
    await requireStillHolds(tx, principal, 'governance:manage', 'Changing the SLA policy');
    const where = { id: principal.organizationId };
    const before = slaPolicyFromColumns(await tx.organization.findUniqueOrThrow({ where, select: SLA_SELECT }));
    if (samePolicy(before, policy)) return before;
    const after = slaPolicyFromColumns(await tx.organization.update({ where, data: slaPolicyToColumns(policy), select: SLA_SELECT }));
    await recordAs(tx, principal, meta, now, {
      action: 'governance.sla_updated',
      target: { type: 'organization', id: principal.organizationId },
      metadata: { before, after },
    });
    return after;
  }, RECHECKED_TRANSACTION);
}
