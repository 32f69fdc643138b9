// Assessments inside a project. Creating one needs write access to the project (which also covers the new
// assessment, so its creator gets no grant of its own); reading one needs read access to it or its project; every
// change needs write access to it.
//
// Lifecycle (assessment-lifecycle.ts): people launch, cancel, emergency-stop, archive and delete; the engine that
// runs outside this service (an API key with assessments:update) starts, records findings, completes or fails.
// Every transition is one conditional UPDATE (`WHERE status IN (<allowed>)`), so two racing requests cannot both
// move the same assessment; the loser gets 409 naming the state it found.
import { Prisma, type Assessment, type Scoped, type Tx } from '@svc/db';
import { SEVERITIES } from '@svc/domain';
import type { Scope } from '@svc/scopes';
import { outboxDeps, withOutbox, type OutboxDeps, type Publish } from '@svc/outbox';
import { deleteStoredObjectsAfterDeletion } from '../source/stored-objects';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';
import { readableAssessmentsFilter, requireAssessmentAccess, requireProjectAccess, requireStillMayAccess } from '../access/access.service';
import { assertWithinSpendCap } from '../spend/spend-guard';
import type { Acting } from '../audit/audit.context';
import { principalAsCommitted, RECHECKED_TRANSACTION } from '../access/own-role';
import { DELETION_TRANSACTION, deleteWithSubscriptions } from '../webhooks/subscriptions.service';
import {
  ACTIVE_STATES,
  ASSESSMENT_TRANSITIONS,
  FINISHED_STATES,
  impossibleTransition,
  type AssessmentAction,
} from './assessment-lifecycle';

type JsonObject = Record<string, unknown>;

function failureReasonOf(a: Assessment): string | null {
  if (a.status !== 'failed' || a.summary === null || typeof a.summary !== 'object' || Array.isArray(a.summary)) return null;
  const reason = (a.summary as JsonObject).failure_reason;
  return typeof reason === 'string' ? reason : null;
}

export function presentAssessment(a: Assessment) {
  return {
    id: a.id,
    project_id: a.projectId,
    name: a.name,
    description: a.description,
    status: a.status,
    archived: a.archivedAt !== null,
    archived_at: a.archivedAt?.toISOString() ?? null,
    notes: a.notes,
    settings: a.settings ?? null,
    // The engine's completion summary; a failed assessment carries its reason in failure_reason instead.
    summary: a.status === 'failed' ? null : (a.summary ?? null),
    failure_reason: failureReasonOf(a),
    created_by_id: a.createdById,
    queued_at: a.queuedAt?.toISOString() ?? null,
    started_at: a.startedAt?.toISOString() ?? null,
    finished_at: a.finishedAt?.toISOString() ?? null,
    created_at: a.createdAt.toISOString(),
    updated_at: a.updatedAt.toISOString(),
  };
}

/** Prisma wants Prisma.DbNull to store SQL NULL in a Json column. */
function jsonOrNull(value: JsonObject | null): Prisma.InputJsonValue | typeof Prisma.DbNull {
  return value === null ? Prisma.DbNull : (value as Prisma.InputJsonValue);
}

export async function createAssessment(
  deps: AppDeps,
  principal: Principal,
  projectId: string,
  input: { name: string; description?: string | null; notes?: string | null; settings?: JsonObject | null },
) {
  const found = await requireProjectAccess(deps, principal, projectId, 'write');
  const assessment = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayAccess(tx, principal, { kind: 'project', id: found.id }, { scope: 'assessments:create', action: 'Creating assessments', need: 'write', hold: true });
    // Read inside the transaction, after the re-check: an archiving committed while the request ran is seen here.
    const project = await tx.project.findFirstOrThrow({ where: { id: found.id } });
    if (project.archivedAt) throw conflict('The project is archived: unarchive it to add assessments.');
    return tx.assessment.create({
      data: {
        id: newId('asm'),
        organizationId: project.organizationId,
        projectId: project.id,
        name: input.name,
        description: input.description || null,
        notes: input.notes || null,
        ...(input.settings !== undefined && input.settings !== null && { settings: input.settings as Prisma.InputJsonValue }),
        status: 'draft',
        createdById: principal.userId,
      },
    });
  }, RECHECKED_TRANSACTION);
  return presentAssessment(assessment);
}

export async function listAssessments(
  deps: AppDeps,
  principal: Principal,
  query: PageQuery & { project_id?: string; status?: string; archived?: boolean },
) {
  const args = pageArgs(query);
  const readable = await readableAssessmentsFilter(deps, principal);
  const rows = await scopedTo(deps.prisma, principal).assessment.findMany({
    ...args,
    where: {
      ...args.where,
      ...readable,
      ...(query.project_id ? { projectId: query.project_id } : {}),
      ...(query.status ? { status: query.status } : {}),
      ...(query.archived === undefined ? {} : { archivedAt: query.archived ? { not: null } : null }),
    },
  });
  return toPage(rows, query, presentAssessment);
}

export async function getAssessment(deps: AppDeps, principal: Principal, id: string) {
  return presentAssessment(await requireAssessmentAccess(deps, principal, id, 'read'));
}

/** 409 naming the state the assessment is in now (read inside the transaction that lost). */
async function refuse(tx: Tx, id: string, action: string, from: readonly string[]): Promise<never> {
  const current = await tx.assessment.findUnique({ where: { id }, select: { status: true } });
  throw conflict(impossibleTransition(action, current?.status ?? 'gone', from));
}

/**
 * Who may move an assessment along each transition (the route's scope), and what they are doing, for the 403 of a
 * caller demoted meanwhile: each transition re-checks both as it commits (requireStillMayAccess).
 */
export const TRANSITION_RIGHTS: Readonly<Record<AssessmentAction, { scope: Scope; action: string }>> = {
  launch: { scope: 'assessments:create', action: 'Launching assessments' },
  start: { scope: 'assessments:update', action: 'Starting assessments' },
  complete: { scope: 'assessments:update', action: 'Completing assessments' },
  fail: { scope: 'assessments:update', action: 'Failing assessments' },
  cancel: { scope: 'assessments:cancel', action: 'Cancelling assessments' },
  emergency_stop: { scope: 'assessments:emergency_stop', action: 'Stopping assessments' },
};

export const ARCHIVING_RIGHTS = { scope: 'assessments:archive', action: 'Archiving assessments' } as const;

/** The same scope; an unarchive refused says what it was doing. */
export const UNARCHIVING_RIGHTS = { scope: ARCHIVING_RIGHTS.scope, action: 'Unarchiving assessments' } as const;

/**
 * Moves an assessment along one transition of the table, in one transaction with whatever `then` does (events,
 * spend check). 409 when the assessment is not in a state the transition starts from.
 */
async function transition(
  deps: AppDeps,
  principal: Principal,
  id: string,
  action: AssessmentAction,
  extra: Prisma.AssessmentUpdateManyMutationInput,
  then?: (tx: Scoped<Tx>, publish: Publish, updated: Assessment, now: Date) => Promise<void>,
) {
  const current = await requireAssessmentAccess(deps, principal, id, 'write');
  const rule = ASSESSMENT_TRANSITIONS[action];
  const now = deps.clock.now();
  const updated = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await requireStillMayAccess(tx, principal, { kind: 'assessment', id: current.id }, { ...TRANSITION_RIGHTS[action], need: 'write', hold: true });
      const moved = await tx.assessment.updateMany({
        where: { id: current.id, status: { in: [...rule.from] } },
        data: { ...extra, status: rule.to, [rule.stamp]: now },
      });
      if (moved.count !== 1) await refuse(tx, current.id, action, rule.from);
      const row = await tx.assessment.findUniqueOrThrow({ where: { id: current.id } });
      if (then) await then(tx, publish, row, now);
      return row;
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentAssessment(updated);
}

/** draft -> queued. Refused with 400 when the organization's or project's spend cap is reached (spend module). */
export function launchAssessment(deps: AppDeps, principal: Principal, id: string) {
  return transition(deps, principal, id, 'launch', {}, async (tx, _publish, row) => {
    const project = await tx.project.findUniqueOrThrow({ where: { id: row.projectId }, select: { archivedAt: true } });
    if (project.archivedAt) throw conflict('The project is archived: unarchive it to launch assessments.');
    await assertWithinSpendCap(tx, row.projectId);
  });
}

/** Engine: queued -> running. */
export function startAssessment(deps: AppDeps, principal: Principal, id: string) {
  return transition(deps, principal, id, 'start', {});
}

/** The data of `assessment.completed`: public identifiers and counts only. */
export async function assessmentCompletedData(tx: Tx, a: Assessment) {
  const groups = await tx.finding.groupBy({ by: ['severity'], where: { assessmentId: a.id }, _count: { _all: true } });
  const bySeverity = Object.fromEntries(SEVERITIES.map((s) => [s, 0])) as Record<(typeof SEVERITIES)[number], number>;
  let total = 0;
  for (const g of groups) {
    total += g._count._all;
    if (g.severity in bySeverity) bySeverity[g.severity as keyof typeof bySeverity] += g._count._all;
  }
  return {
    assessment_id: a.id,
    project_id: a.projectId,
    name: a.name,
    status: a.status,
    findings_count: total,
    findings_by_severity: bySeverity,
    started_at: a.startedAt?.toISOString() ?? null,
    completed_at: a.finishedAt?.toISOString() ?? null,
  };
}

/** Engine: running -> completed with its summary; publishes `assessment.completed` in the same transaction. */
export function completeAssessment(deps: AppDeps, principal: Principal, id: string, input: { summary: string | JsonObject }) {
  return transition(deps, principal, id, 'complete', { summary: input.summary as Prisma.InputJsonValue }, async (tx, publish, row) => {
    await publish({
      type: 'assessment.completed',
      organizationId: row.organizationId,
      projectId: row.projectId,
      assessmentId: row.id,
      data: await assessmentCompletedData(tx, row),
    });
  });
}

/** Engine: running -> failed with a reason. */
export function failAssessment(deps: AppDeps, principal: Principal, id: string, input: { reason: string }) {
  return transition(deps, principal, id, 'fail', { summary: { failure_reason: input.reason } });
}

/** queued | running -> cancelled. */
export function cancelAssessment(deps: AppDeps, principal: Principal, id: string) {
  return transition(deps, principal, id, 'cancel', {});
}

/** queued | running -> emergency_stopped. */
export function emergencyStopAssessment(deps: AppDeps, principal: Principal, id: string) {
  return transition(deps, principal, id, 'emergency_stop', {});
}

/** Sets or clears the archived flag of a finished assessment; 409 when not finished or already in that state. */
export async function setArchived(deps: AppDeps, principal: Principal, id: string, archived: boolean) {
  const current = await requireAssessmentAccess(deps, principal, id, 'write');
  const now = deps.clock.now();
  const updated = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayAccess(tx, principal, { kind: 'assessment', id: current.id }, { ...(archived ? ARCHIVING_RIGHTS : UNARCHIVING_RIGHTS), need: 'write', hold: true });
    const moved = await tx.assessment.updateMany({
      where: {
        id: current.id,
        status: { in: [...FINISHED_STATES] },
        archivedAt: archived ? null : { not: null },
      },
      data: { archivedAt: archived ? now : null },
    });
    const fresh = await tx.assessment.findUniqueOrThrow({ where: { id: current.id } });
    if (moved.count === 1) return fresh;
    if (!FINISHED_STATES.includes(fresh.status as never)) {
      throw conflict(`Only finished assessments can be ${archived ? 'archived' : 'unarchived'}; this one is ${fresh.status}.`);
    }
    throw conflict(archived ? `The assessment (${fresh.status}) is already archived.` : `The assessment (${fresh.status}) is not archived.`);
  }, RECHECKED_TRANSACTION);
  return presentAssessment(updated);
}

/**
 * Name, description and settings can change only while the assessment is a draft (they are what the engine
 * runs); notes can change at any time.
 */
export async function updateAssessment(
  deps: AppDeps,
  principal: Principal,
  id: string,
  input: { name?: string; description?: string | null; notes?: string | null; settings?: JsonObject | null },
) {
  const current = await requireAssessmentAccess(deps, principal, id, 'write');
  const draftOnly = input.name !== undefined || input.description !== undefined || input.settings !== undefined;
  const data: Prisma.AssessmentUpdateManyMutationInput = {
    ...(input.name !== undefined && { name: input.name }),
    ...(input.description !== undefined && { description: input.description || null }),
    ...(input.notes !== undefined && { notes: input.notes || null }),
    ...(input.settings !== undefined && { settings: jsonOrNull(input.settings) }),
  };
  const updated = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayAccess(tx, principal, { kind: 'assessment', id: current.id }, { scope: 'assessments:update', action: 'Editing assessments', need: 'write', hold: true });
    // Held from here on (FOR KEY SHARE, then by the UPDATE): what is read back is what this change left.
    const moved = await tx.assessment.updateMany({ where: { id: current.id, ...(draftOnly && { status: 'draft' }) }, data });
    const row = await tx.assessment.findUniqueOrThrow({ where: { id: current.id } });
    if (moved.count !== 1) {
      throw conflict(`Name, description and settings can be changed only on a draft; this assessment is ${row.status} (notes can always change).`);
    }
    return row;
  }, RECHECKED_TRANSACTION);
  return presentAssessment(updated);
}

/**
 * Deletes the assessment with its findings and webhook subscriptions (cascade; each subscription audited as deleted);
 * 409 while queued or running (cancel or stop it first).
 */
export async function deleteAssessment(deps: AppDeps, by: Acting, id: string): Promise<void> {
  const { principal } = by;
  const current = await requireAssessmentAccess(deps, principal, id, 'write');
  const db = scopedTo(deps.prisma, principal);
  const deleted = await db.$transaction(async (tx) => {
    // The caller's role as committed (own-role.ts), their membership locked before the assessment's row and its
    // subscriptions, as a role change takes them.
    const committed = await principalAsCommitted(tx, principal, 'assessments:delete', 'Deleting assessments');
    return deleteWithSubscriptions(tx, { assessmentId: current.id }, { ...by, principal: committed }, deps.clock.now(), async () => {
      const gone = await tx.assessment.deleteMany({ where: { id: current.id, status: { notIn: [...ACTIVE_STATES] } } });
      return gone.count === 1;
    });
  }, DELETION_TRANSACTION);
  if (!deleted) {
    const fresh = await db.assessment.findUnique({ where: { id: current.id }, select: { status: true } });
    if (fresh) throw conflict(`Cannot delete an assessment that is ${fresh.status}: cancel or emergency-stop it first.`);
    return;
  }
  await deleteStoredObjectsAfterDeletion(deps, {
    organizationId: current.organizationId,
    projectId: current.projectId,
    assessmentId: current.id,
  });
}
