// A finding the principal may read or change, 404 otherwise (another organization, or an assessment the caller
// cannot read, answers exactly like a missing finding). Used by triage, fix verification and monitoring.
import { scopedTo, type Finding } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { HttpError, notFound } from '../../http/errors';
import { requireAssessmentAccess, type Access } from '../access/access.service';

export async function requireFindingAccess(deps: AppDeps, principal: Principal, id: string, need: Access): Promise<Finding> {
  const finding = await scopedTo(deps.prisma, principal).finding.findFirst({ where: { id } });
  if (!finding) throw notFound('Finding');
  try {
    await requireAssessmentAccess(deps, principal, finding.assessmentId, need);
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) throw notFound('Finding');
    throw err;
  }
  return finding;
}
