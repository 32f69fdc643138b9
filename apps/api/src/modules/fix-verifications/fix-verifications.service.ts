// Fix verification: the engine re-tests a finding to see whether its fix holds. A run is started on a finding
// (status `running`) and later completed with a result, `fixed` or `still_present`; completing publishes
// `fix_verify.completed`, and a `fixed` result moves the finding to `fixed` through changeFindingStatus (which
// publishes `finding.status_changed`), all in one transaction.
//
// Rules (409 otherwise):
// - a run starts only on a finding that may become fixed (open, confirmed, accepted_risk, regressed) and has no
//   run in progress (the finding row is locked, so two concurrent starts make one run);
// - a run completes once (conditional update on status `running`);
// - a `fixed` result on a finding that was meanwhile fixed, dismissed or suppressed completes the run and leaves the
//   finding's status alone.
import { RECHECKED_TRANSACTION } from '../access/own-role';
import type { FixVerification, Finding } from '@svc/db';
import { outboxDeps, withOutbox } from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, notFound, notFoundAs, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';
import { requireAssessmentAccess, type Access } from '../access/access.service';
import { changeFindingStatus } from '../findings/findings.service';
import { canChangeFindingStatus } from '@svc/domain';
import { requireFindingAccess, requireStillMayChangeFinding } from '../findings/finding-access';

export const FIX_VERIFICATION_RESULTS = ['fixed', 'still_present'] as const;
export type FixVerificationResult = (typeof FIX_VERIFICATION_RESULTS)[number];

type Row = FixVerification & { finding: Pick<Finding, 'assessmentId' | 'projectId' | 'status'> };

const withFinding = { include: { finding: { select: { assessmentId: true, projectId: true, status: true } } } } as const;

export function presentFixVerification(v: Row) {
  return {
    id: v.id,
    finding_id: v.findingId,
    assessment_id: v.finding.assessmentId,
    project_id: v.finding.projectId,
    status: v.status,
    result: v.result,
    finding_status: v.finding.status,
    created_at: v.createdAt.toISOString(),
    completed_at: v.completedAt?.toISOString() ?? null,
  };
}

/** The engine's right to run fix verifications, re-checked as each of its changes commits. */
const VERIFYING_FIXES = { scope: 'assessments:update', action: 'Verifying fixes' } as const;

/** Engine: starts a fix verification run on a finding (write access to its assessment). */
export async function startFixVerification(deps: AppDeps, principal: Principal, findingId: string) {
  const finding = await requireFindingAccess(deps, principal, findingId, 'write');
  const now = deps.clock.now();
  const created = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayChangeFinding(tx, principal, finding, VERIFYING_FIXES);
    const [row] = await tx.$queryRaw<Array<{ status: string }>>`SELECT status FROM findings WHERE id = ${finding.id} FOR UPDATE`;
    if (!row) throw notFound('Finding');
    if (!canChangeFindingStatus(row.status, 'fixed')) {
      throw conflict(`A fix cannot be verified on a finding that is ${row.status}.`);
    }
    const running = await tx.fixVerification.findFirst({ where: { findingId: finding.id, status: 'running' }, select: { id: true } });
    if (running) throw conflict(`A fix verification of this finding is already running (${running.id}).`);
    return tx.fixVerification.create({
      data: { id: newId('fxv', now.getTime()), organizationId: finding.organizationId, findingId: finding.id, status: 'running', createdAt: now },
      ...withFinding,
    });
  }, RECHECKED_TRANSACTION);
  return presentFixVerification(created);
}

/** The run when the principal has `need` access to its finding's assessment; 404 otherwise. */
async function requireFixVerification(deps: AppDeps, principal: Principal, id: string, need: Access): Promise<Row> {
  const run = await scopedTo(deps.prisma, principal).fixVerification.findFirst({ where: { id }, ...withFinding });
  if (!run) throw notFound('Fix verification');
  await notFoundAs('Fix verification', requireAssessmentAccess(deps, principal, run.finding.assessmentId, need));
  return run;
}

/** Engine: completes a run with its result; publishes fix_verify.completed (and moves the finding on `fixed`). */
export async function completeFixVerification(deps: AppDeps, principal: Principal, id: string, input: { result: string }) {
  if (!(FIX_VERIFICATION_RESULTS as readonly string[]).includes(input.result)) {
    throw unprocessable(`result must be one of ${FIX_VERIFICATION_RESULTS.join(', ')}.`);
  }
  const result = input.result as FixVerificationResult;
  const run = await requireFixVerification(deps, principal, id, 'write');
  const now = deps.clock.now();
  const completed = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await requireStillMayChangeFinding(tx, principal, run.finding, VERIFYING_FIXES);
      const done = await tx.fixVerification.updateMany({
        where: { id: run.id, status: 'running' },
        data: { status: 'completed', result, completedAt: now },
      });
      if (done.count !== 1) throw conflict('The fix verification has already completed.');
      let finding = await tx.finding.findUniqueOrThrow({ where: { id: run.findingId } });
      if (result === 'fixed' && canChangeFindingStatus(finding.status, 'fixed')) {
        finding = await changeFindingStatus(tx, publish, finding, 'fixed', now);
      }
      await publish({
        type: 'fix_verify.completed',
        organizationId: finding.organizationId,
        projectId: finding.projectId,
        assessmentId: finding.assessmentId,
        data: {
          fix_verification_id: run.id,
          finding_id: finding.id,
          assessment_id: finding.assessmentId,
          project_id: finding.projectId,
          result,
          finding_status: finding.status,
        },
      });
      return tx.fixVerification.findUniqueOrThrow({ where: { id: run.id }, ...withFinding });
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentFixVerification(completed);
}

export async function getFixVerification(deps: AppDeps, principal: Principal, id: string) {
  return presentFixVerification(await requireFixVerification(deps, principal, id, 'read'));
}

export async function listFixVerifications(deps: AppDeps, principal: Principal, findingId: string, query: PageQuery) {
  const finding = await requireFindingAccess(deps, principal, findingId, 'read');
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).fixVerification.findMany({ ...args, where: { ...args.where, findingId: finding.id }, ...withFinding });
  return toPage(rows, query, presentFixVerification);
}
