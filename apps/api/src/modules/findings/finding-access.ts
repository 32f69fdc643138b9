// A finding the principal may read or change, 404 otherwise (another organization, or an assessment the caller
// cannot read, answers exactly like a missing finding). Used by triage, fix verification and monitoring.
import { scopedTo, type Finding, type Scoped, type Tx } from '@svc/db';
import type { Scope } from '@svc/scopes';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { notFound, notFoundAs } from '../../http/errors';
import { requireAssessmentAccess, requireStillMayAccess, type Access } from '../access/access.service';

export async function requireFindingAccess(deps: AppDeps, principal: Principal, id: string, need: Access): Promise<Finding> {
  const finding = await scopedTo(deps.prisma, principal).finding.findFirst({ where: { id } });
  if (!finding) throw notFound('Finding');
  await notFoundAs('Finding', requireAssessmentAccess(deps, principal, finding.assessmentId, need));
  return finding;
}

/**
 * What a change to a finding needs: the route's scope, what the request is doing for the 403 ("Triaging findings"),
 * and the access to its assessment (write unless said).
 */
export type FindingChange = { scope: Scope; action: string; need?: Access };

/**
 * Inside the transaction of a change to the finding, first thing: the caller still holds the change's scope with
 * their role as committed, and `need` access to its assessment through what is left (access.service.ts
 * requireStillMayAccess; the assessment's and project's rows held before the grants, as their deletion takes them).
 * Demoted, or their grant or team taken away, while the request ran: 403, or 404 as for a finding they cannot read.
 */
export async function requireStillMayChangeFinding(tx: Scoped<Tx>, principal: Principal, finding: Pick<Finding, 'assessmentId'>, change: FindingChange): Promise<void> {
  await notFoundAs('Finding', requireStillMayAccess(tx, principal, { kind: 'assessment', id: finding.assessmentId }, { need: 'write', ...change, hold: true }));
}
