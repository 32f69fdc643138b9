// Monitoring: after a finding was fixed, the engine keeps checking for it. A check reports `still_fixed` (nothing
// changes) or `regressed`: the finding is found again, moves fixed -> regressed through changeFindingStatus
// (`finding.status_changed`, previous_status fixed; the SLA window restarts) and `monitoring.regression` is
// published, in one transaction. Checks apply only to fixed findings: any other status is 409, and of two
// concurrent regressions of one finding the second is 409 too (changeFindingStatus's conditional update).
import { RECHECKED_TRANSACTION } from '../access/own-role';
import { scopedTo } from '@svc/db';
import { outboxDeps, withOutbox } from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, unprocessable } from '../../http/errors';
import { changeFindingStatus } from '../findings/findings.service';
import { requireFindingAccess, requireStillMayChangeFinding } from '../findings/finding-access';

export const MONITORING_RESULTS = ['still_fixed', 'regressed'] as const;

/** Engine: records one monitoring check of a fixed finding (write access to its assessment). */
export async function recordMonitoringCheck(deps: AppDeps, principal: Principal, findingId: string, input: { result: string }) {
  if (!(MONITORING_RESULTS as readonly string[]).includes(input.result)) {
    throw unprocessable(`result must be one of ${MONITORING_RESULTS.join(', ')}.`);
  }
  const finding = await requireFindingAccess(deps, principal, findingId, 'write');
  if (finding.status !== 'fixed') {
    throw conflict(`Only fixed findings are monitored; this one is ${finding.status}.`);
  }
  const now = deps.clock.now();
  const checkedAt = now.toISOString();
  if (input.result === 'still_fixed') {
    return { finding_id: finding.id, result: input.result, status: finding.status, previous_status: finding.status, checked_at: checkedAt };
  }
  const regressed = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (tx, publish) => {
      const scoped = scopedTo(tx, principal);
      await requireStillMayChangeFinding(scoped, principal, finding, { scope: 'assessments:update', action: 'Recording monitoring checks' });
      const updated = await changeFindingStatus(scoped, publish, finding, 'regressed', now);
      await publish({
        type: 'monitoring.regression',
        organizationId: updated.organizationId,
        projectId: updated.projectId,
        assessmentId: updated.assessmentId,
        data: {
          finding_id: updated.id,
          assessment_id: updated.assessmentId,
          project_id: updated.projectId,
          title: updated.title,
          severity: updated.severity,
          location: updated.location,
          previous_fixed_at: finding.fixedAt?.toISOString() ?? null,
        },
      });
      return updated;
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return { finding_id: regressed.id, result: input.result, status: regressed.status, previous_status: 'fixed', checked_at: checkedAt };
}
