// Governance policy: the remediation SLA per finding severity, stored on the organization. The breach scan that
// reads it runs in the worker (apps/worker/src/sla-scan.ts).
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { notFound } from '../../http/errors';
import { slaPolicyFromColumns, slaPolicyToColumns, type SlaPolicy } from '@svc/domain';

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

export async function putSlaPolicy(deps: AppDeps, principal: Principal, policy: SlaPolicy): Promise<SlaPolicy> {
  const org = await deps.prisma.organization.update({
    where: { id: principal.organizationId },
    data: slaPolicyToColumns(policy),
    select: SLA_SELECT,
  });
  return slaPolicyFromColumns(org);
}
