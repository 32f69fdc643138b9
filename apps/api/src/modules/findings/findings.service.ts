// Findings: recorded by the engine on a running assessment, triaged by people, listed, read and exported.
// Reading a finding needs read access to its assessment; changing it needs write access. A finding of another
// organization, or of an assessment the caller cannot read, answers 404.
//
// Every status change goes through changeFindingStatus: one conditional UPDATE checked against the transition
// table (@svc/domain), and `finding.status_changed` (plus `finding.confirmed` on confirmation) published in
// the caller's transaction.
import { Prisma, type Finding, type Scoped, type Tx } from '@svc/db';
import { FINDING_STATUSES, SEVERITIES, findingEventData, isFindingStatus, isSeverity, type FindingStatus } from '@svc/domain';
import {
  candidateSubscriptionsJson,
  enqueueAfterCommit,
  eventsWriteCtes,
  outboxDeps,
  planEventFor,
  publishedOf,
  withOutbox,
  type CandidateSubscription,
  type PlannedEvent,
  type Publish,
} from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, HttpError, notFound, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { answeringOneByOneOnFailure, Coalescer, coalescerOf, newId, queryRows, scopedTo } from '@svc/db';
import { readableAssessmentsFilter, requireAssessmentAccess, requireAssessmentAccessWithSla, type Access, type AssessmentForWrite } from '../access/access.service';
import { loadSlaPolicy } from '../governance/governance.service';
import { findingSlaDueAt, isSlaOpenStatus, type SlaPolicy } from '@svc/domain';
import { requireFindingAccess, requireStillMayChangeFinding, type FindingChange } from './finding-access';
import { RECHECKED_TRANSACTION } from '../access/own-role';
import type { InTurn } from '../../http/organization-turns';
import { canChangeFindingStatus } from '@svc/domain';

export function presentFinding(f: Finding, policy: SlaPolicy) {
  return {
    id: f.id,
    project_id: f.projectId,
    assessment_id: f.assessmentId,
    fingerprint: f.fingerprint,
    title: f.title,
    severity: f.severity,
    original_severity: f.originalSeverity,
    status: f.status,
    location: f.location,
    description: f.description,
    assignee_user_id: f.assigneeId,
    opened_at: f.openedAt.toISOString(),
    sla_due_at: findingSlaDueAt(f, policy)?.toISOString() ?? null,
    sla_breached_at: f.slaBreachedAt?.toISOString() ?? null,
    fixed_at: f.fixedAt?.toISOString() ?? null,
    created_at: f.createdAt.toISOString(),
    updated_at: f.updatedAt.toISOString(),
  };
}

export type PresentedFinding = ReturnType<typeof presentFinding>;

function checkSeverity(value: string): string {
  if (!isSeverity(value)) throw unprocessable(`severity must be one of ${SEVERITIES.join(', ')}.`);
  return value;
}

/**
 * Changes a finding's status inside the caller's transaction and publishes the events of the change:
 * `finding.status_changed` (status, previous_status) always, `finding.confirmed` too when the new status is
 * `confirmed`. 409 when the transition table does not allow it, or when the finding's status changed since
 * `finding` was read. Re-entering an open status (open, confirmed, regressed) from a closed one restarts the SLA
 * window (openedAt = now) and clears the breach mark, so a later breach is reported again.
 */
export async function changeFindingStatus(
  tx: Scoped<Tx>,
  publish: Publish,
  finding: Finding,
  newStatus: FindingStatus,
  now: Date,
): Promise<Finding> {
  const from = finding.status;
  if (!canChangeFindingStatus(from, newStatus)) {
    throw conflict(`Cannot move a finding that is ${from} to ${newStatus}.`);
  }
  const reopening = !isSlaOpenStatus(from) && isSlaOpenStatus(newStatus);
  const moved = await tx.finding.updateMany({
    where: { id: finding.id, status: from },
    data: {
      status: newStatus,
      fixedAt: newStatus === 'fixed' ? now : null,
      ...(reopening && { openedAt: now, slaBreachedAt: null }),
    },
  });
  if (moved.count !== 1) {
    const current = await tx.finding.findUnique({ where: { id: finding.id }, select: { status: true } });
    throw conflict(`The finding changed meanwhile: it is ${current?.status ?? 'gone'} now.`);
  }
  const updated = await tx.finding.findUniqueOrThrow({ where: { id: finding.id } });
  const event = { organizationId: updated.organizationId, projectId: updated.projectId, assessmentId: updated.assessmentId };
  await publish({ ...event, type: 'finding.status_changed', data: { ...findingEventData(updated), previous_status: from } });
  if (newStatus === 'confirmed') await publish({ ...event, type: 'finding.confirmed', data: findingEventData(updated) });
  return updated;
}

export interface RecordFindingInput {
  title: string;
  severity: string;
  fingerprint: string;
  location?: string | null;
  description?: string | null;
}

/**
 * Engine: records a finding on a running assessment. The fingerprint identifies the issue: the same fingerprint
 * again in the same assessment updates that finding (title, location, description; severity too unless someone
 * overrode it) and publishes nothing; a new one is created `open` and publishes `finding.created`.
 *
 * The hot path (a new finding) is two statements straight on the pg pool, without Prisma or a transaction around
 * them: access, the SLA policy and the candidate subscriptions; then ONE statement that share-locks the assessment
 * (completion, which counts findings, waits for it), inserts the finding only while the assessment is running
 * (ON CONFLICT DO NOTHING: of two concurrent reports of one fingerprint exactly one creates), and writes the event
 * and its deliveries only if the finding was inserted. One statement commits all of it or nothing. Concurrent
 * requests share both statements (access.service.ts, findingWriter), each with its own answer.
 */
/**
 * `inTurn`: the request's turn (http/organization-turns.ts) for what waits alone for a lock, keeping a connection: the
 * shared statement does not wait (SKIP LOCKED), a finding whose rows are locked is written alone, waiting for them.
 */
export async function recordFinding(deps: AppDeps, principal: Principal, assessmentId: string, input: RecordFindingInput, inTurn: InTurn = (work) => work()) {
  const severity = checkSeverity(input.severity);
  const assessment = await requireAssessmentAccessWithSla<CandidateSubscription[]>(deps, principal, assessmentId, 'write', {
    select: (at) => candidateSubscriptionsJson('finding.created', at),
    preparedAs: 'api_finding_access_and_subscriptions',
  });
  const now = deps.clock.now();
  const finding = newFinding(assessment, input, severity, now);
  const plan = planEventFor(
    {
      type: 'finding.created',
      organizationId: finding.organizationId,
      projectId: finding.projectId,
      assessmentId: finding.assessmentId,
      data: findingEventData(finding),
    },
    assessment.extra,
    now,
  );
  const shared = await findingWriter(deps).run({ finding, plan });
  // Its assessment or organization row was locked (or is gone): written alone, waiting for the lock, off the batch.
  const written = shared === LOCKED_OR_GONE ? await inTurn(() => writeFindingAlone(deps, { finding, plan }, 'wait')) : shared;
  if (written instanceof Error) throw written;
  if (written === LOCKED_OR_GONE) throw notRunning(undefined);
  if (written.assessmentStatus !== 'running') throw notRunning(written.assessmentStatus ?? undefined);
  if (!written.created) {
    const updated = await inTurn(() => updateRecordedFinding(deps, principal, assessment.id, input, severity));
    return { created: false, finding: presentFinding(updated, assessment.slaPolicy) };
  }
  await enqueueAfterCommit(outboxDeps(deps, deps.deliveryQueue), publishedOf(plan).deliveries);
  return { created: true, finding: presentFinding(finding, assessment.slaPolicy) };
}

/** A new finding to insert and the event it publishes if it is inserted. */
interface FindingWrite {
  finding: Finding;
  plan: PlannedEvent;
}

/**
 * The assessment's status (null: gone) and whether the finding was inserted; or, alone, the statement's error; or,
 * in a statement that does not wait for locks, LOCKED_OR_GONE.
 */
type WriteAnswer = { assessmentStatus: string | null; created: boolean } | Error | typeof LOCKED_OR_GONE;

const LOCKED_OR_GONE = Symbol('locked or gone');

/**
 * How a statement takes its assessments', organizations' and subscriptions' row locks. 'skip' in the shared
 * statement: a lock that one organization's own transaction holds (an assessment being updated, its organization row
 * serialising an upload, a subscription's recovery, whose FOR UPDATE the foreign keys' FOR KEY SHARE would wait for)
 * must not hold up the other organizations' findings of the batch, nor the batches behind it; such a finding is then
 * written alone with 'wait'.
 */
type Locks = 'skip' | 'wait';

/**
 * New findings, their events and deliveries in ONE statement, each with its own fate: a finding is inserted only
 * into its own assessment of its own organization (the one its access check read for its principal) while that is
 * running, a conflict skips only that finding, and an event is written only for an inserted finding. Rows are
 * inserted in (assessment, fingerprint) order, so that two API instances' batches take the unique index's entries in
 * one order.
 */
async function writeFindings(deps: AppDeps, writes: FindingWrite[], locks: Locks): Promise<WriteAnswer[]> {
  const f = <T>(of: (finding: Finding) => T) => writes.map((w) => of(w.finding));
  // Raw SQL: every organization id in it is the one the access check read for that finding's principal.
  // The subscriptions each finding's deliveries reference: a delivery's foreign key waits for a lock on its row too.
  const needs = writes.flatMap((w) => w.plan.deliveries.map((d) => ({ findingId: w.finding.id, subscriptionId: d.subscriptionId })));
  const rows = await queryRows<{ ord: number; assessment_status: string | null; created: boolean; blocked: boolean }>(
    deps.prisma,
    Prisma.sql`
      WITH v AS (
        SELECT * FROM unnest(${f((x) => x.id)}::text[], ${f((x) => x.organizationId)}::text[], ${f((x) => x.projectId)}::text[],
                             ${f((x) => x.assessmentId)}::text[], ${f((x) => x.fingerprint)}::text[], ${f((x) => x.title)}::text[],
                             ${f((x) => x.severity)}::text[], ${f((x) => x.location)}::text[], ${f((x) => x.description)}::text[],
                             ${f((x) => x.openedAt.toISOString())}::timestamptz[], ${f((x) => x.createdAt.toISOString())}::timestamptz[])
             WITH ORDINALITY AS v(id, organization_id, project_id, assessment_id, fingerprint, title, severity, location, description,
                                  opened_at, created_at, ord)),
      ${
        locks === 'skip'
          ? Prisma.sql`o AS (SELECT id FROM organizations WHERE id IN (SELECT organization_id FROM v) FOR KEY SHARE SKIP LOCKED),
      a AS (SELECT id, organization_id, status FROM assessments
            WHERE id IN (SELECT assessment_id FROM v) AND organization_id IN (SELECT id FROM o) FOR SHARE SKIP LOCKED),
      n AS (SELECT * FROM unnest(${needs.map((x) => x.findingId)}::text[], ${needs.map((x) => x.subscriptionId)}::text[])
            AS n(finding_id, subscription_id)),
      s AS (SELECT id FROM webhook_subscriptions WHERE id IN (SELECT subscription_id FROM n) FOR KEY SHARE SKIP LOCKED),
      blocked AS (SELECT DISTINCT finding_id AS id FROM n WHERE subscription_id NOT IN (SELECT id FROM s)),`
          : Prisma.sql`a AS (SELECT id, organization_id, status FROM assessments WHERE id IN (SELECT assessment_id FROM v) FOR SHARE),
      blocked AS (SELECT NULL::text AS id WHERE false),`
      }
      ins AS (
        INSERT INTO findings (id, organization_id, project_id, assessment_id, fingerprint, title, severity, original_severity,
                              status, location, description, opened_at, created_at, updated_at)
        SELECT v.id, v.organization_id, v.project_id, v.assessment_id, v.fingerprint, v.title, v.severity, v.severity, 'open',
               v.location, v.description, v.opened_at AT TIME ZONE 'UTC', v.created_at AT TIME ZONE 'UTC', v.created_at AT TIME ZONE 'UTC'
        FROM v JOIN a ON a.id = v.assessment_id AND a.organization_id = v.organization_id AND a.status = 'running'
        WHERE v.id NOT IN (SELECT id FROM blocked)
        ORDER BY v.assessment_id, v.fingerprint
        ON CONFLICT DO NOTHING
        RETURNING id),
      ${eventsWriteCtes(
        writes.map((w) => ({ plan: w.plan, whenRowIn: w.finding.id })),
        'ins',
      )}
      SELECT v.ord::int AS ord, a.status::text AS assessment_status, v.id IN (SELECT id FROM ins) AS created,
             v.id IN (SELECT id FROM blocked) AS blocked
      FROM v LEFT JOIN a ON a.id = v.assessment_id AND a.organization_id = v.organization_id`,
    locks === 'skip' ? 'api_record_findings' : 'api_record_findings_waiting',
  );
  const byOrdinal = new Map(rows.map((row) => [Number(row.ord), row]));
  return writes.map((_, i) => {
    const row = byOrdinal.get(i + 1);
    if ((!row?.assessment_status || row.blocked) && locks === 'skip') return LOCKED_OR_GONE;
    return { assessmentStatus: row?.assessment_status ?? null, created: row?.created === true };
  });
}

/** One finding on its own statement: its answer, or the statement's error as its answer. */
function writeFindingAlone(deps: AppDeps, write: FindingWrite, locks: Locks): Promise<WriteAnswer> {
  return answeringOneByOneOnFailure((writes: FindingWrite[]) => writeFindings(deps, writes, locks))([write]).then(([answer]) => answer);
}

/**
 * Per pool, the coalescer of concurrent findings' writes. When a batch's statement fails (whatever one finding did to
 * it), each of its findings is written again alone and gets its own answer.
 */
function findingWriter(deps: AppDeps): Coalescer<FindingWrite, WriteAnswer> {
  return coalescerOf(deps.prisma, 'findings', () =>
    new Coalescer(answeringOneByOneOnFailure((writes: FindingWrite[]) => writeFindings(deps, writes, 'skip'))),
  );
}

const notRunning = (status: string | undefined) =>
  conflict(`Findings can be recorded only while the assessment is running; it is ${status ?? 'gone'}.`);

/** The row a new finding will have (what the INSERT writes and the response shows). */
function newFinding(assessment: AssessmentForWrite<unknown>, input: RecordFindingInput, severity: string, now: Date): Finding {
  const written = new Date();
  return {
    id: newId('fnd', now.getTime()),
    organizationId: assessment.organizationId,
    projectId: assessment.projectId,
    assessmentId: assessment.id,
    fingerprint: input.fingerprint,
    title: input.title,
    severity,
    originalSeverity: severity,
    status: 'open',
    location: input.location || null,
    description: input.description || null,
    assigneeId: null,
    openedAt: now,
    slaBreachedAt: null,
    fixedAt: null,
    createdAt: written,
    updatedAt: written,
  };
}

/** The fingerprint was recorded before: update that finding, under the same share lock, while still running. */
async function updateRecordedFinding(deps: AppDeps, principal: Principal, assessmentId: string, input: RecordFindingInput, severity: string) {
  return deps.prisma.$transaction(async (raw) => {
    const tx = scopedTo(raw, principal);
    const [a] = await tx.$queryRaw<Array<{ status: string }>>`SELECT status::text FROM assessments WHERE id = ${assessmentId} FOR SHARE`;
    if (a?.status !== 'running') throw notRunning(a?.status);
    const existing = await tx.finding.findUniqueOrThrow({ where: { assessmentId_fingerprint: { assessmentId, fingerprint: input.fingerprint } } });
    const overridden = existing.severity !== existing.originalSeverity;
    return tx.finding.update({
      where: { id: existing.id },
      data: {
        title: input.title,
        ...(input.location !== undefined && { location: input.location || null }),
        ...(input.description !== undefined && { description: input.description || null }),
        originalSeverity: severity,
        ...(!overridden && { severity }),
      },
    });
  }, RECHECKED_TRANSACTION);
}

/** A triage action: one status change, published in the same transaction. */
export async function setFindingStatus(deps: AppDeps, principal: Principal, id: string, status: FindingStatus, change: FindingChange) {
  const finding = await requireFindingAccess(deps, principal, id, 'write');
  const now = deps.clock.now();
  const updated = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await requireStillMayChangeFinding(tx, principal, finding, change);
      return changeFindingStatus(tx, publish, finding, status, now);
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentFinding(updated, await loadSlaPolicy(deps, principal.organizationId));
}

/** One change to a finding's own columns, re-checked as it commits (requireStillMayChangeFinding); 404 when it is gone. */
async function updateFinding(deps: AppDeps, principal: Principal, finding: Finding, change: FindingChange, data: Prisma.FindingUpdateManyMutationInput, check?: (tx: Scoped<Tx>) => Promise<void>) {
  const updated = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayChangeFinding(tx, principal, finding, change);
    if (check) await check(tx);
    const moved = await tx.finding.updateMany({ where: { id: finding.id }, data });
    if (moved.count !== 1) throw notFound('Finding');
    return tx.finding.findUniqueOrThrow({ where: { id: finding.id } });
  }, RECHECKED_TRANSACTION);
  return presentFinding(updated, await loadSlaPolicy(deps, principal.organizationId));
}

/** Overrides the severity (the engine's own stays in original_severity). Publishes nothing: not a status change. */
export async function setFindingSeverity(deps: AppDeps, principal: Principal, id: string, input: { severity: string }) {
  const severity = checkSeverity(input.severity);
  const finding = await requireFindingAccess(deps, principal, id, 'write');
  return updateFinding(deps, principal, finding, { scope: 'findings:edit_severity', action: 'Overriding severities' }, { severity });
}

/** Assigns the finding to a member of the organization (422 for anyone else), or unassigns it with null. */
export async function reassignFinding(deps: AppDeps, principal: Principal, id: string, input: { assignee_user_id: string | null }) {
  const finding = await requireFindingAccess(deps, principal, id, 'write');
  const assignee = input.assignee_user_id;
  return updateFinding(deps, principal, finding, { scope: 'findings:triage', action: 'Assigning findings' }, { assigneeId: assignee }, async (tx) => {
    if (assignee === null) return;
    const membership = await tx.membership.findFirst({ where: { userId: assignee, user: { status: 'active' } } });
    if (!membership) throw unprocessable('assignee_user_id must be an active member of the organization.');
  });
}

export async function getFinding(deps: AppDeps, principal: Principal, id: string) {
  const finding = await requireFindingAccess(deps, principal, id, 'read');
  return presentFinding(finding, await loadSlaPolicy(deps, principal.organizationId));
}

export interface FindingFilters {
  project_id?: string;
  assessment_id?: string;
  severity?: string;
  status?: string;
  assignee?: string;
}

function listOf(value: string, allowed: readonly string[], ok: (v: string) => boolean, field: string): string[] {
  const values = [...new Set(value.split(',').map((v) => v.trim()).filter(Boolean))];
  const bad = values.filter((v) => !ok(v));
  if (values.length === 0 || bad.length > 0) {
    throw unprocessable(`${field} must be one or more of ${allowed.join(', ')} (comma-separated).`);
  }
  return values;
}

/**
 * The Prisma filter for the findings a principal can read, narrowed by the query's filters (422 for bad values).
 * The organization is not in it: query through scopedTo(deps.prisma, principal), which adds it.
 */
export async function findingsWhere(deps: AppDeps, principal: Principal, q: FindingFilters): Promise<Prisma.FindingWhereInput> {
  const readable = await readableAssessmentsFilter(deps, principal);
  const assignee =
    q.assignee === undefined ? {} : q.assignee === 'none' ? { assigneeId: null } : { assigneeId: q.assignee === 'me' ? principal.userId : q.assignee };
  return {
    assessment: readable,
    ...(q.project_id && { projectId: q.project_id }),
    ...(q.assessment_id && { assessmentId: q.assessment_id }),
    ...(q.severity && { severity: { in: listOf(q.severity, SEVERITIES, isSeverity, 'severity') } }),
    ...(q.status && { status: { in: listOf(q.status, FINDING_STATUSES, isFindingStatus, 'status') } }),
    ...assignee,
  };
}

export async function listFindings(deps: AppDeps, principal: Principal, query: PageQuery & FindingFilters) {
  const where = await findingsWhere(deps, principal, query);
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).finding.findMany({ ...args, where: { ...args.where, ...where } });
  const policy = await loadSlaPolicy(deps, principal.organizationId);
  return toPage(rows, query, (f) => presentFinding(f, policy));
}
