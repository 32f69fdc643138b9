// The SLA breach scan, run by the worker on a schedule: publishes `finding.sla_breached` once per finding and
// breach, whichever worker runs it and however many run it at once.
//
// The rule is @svc/domain's (sla.ts); the SQL below is built from its column map and open statuses, and
// apps/worker/test/sla-scan.test.ts checks that both agree. A finding whose status is open, confirmed or
// regressed, whose severity has a window of N days in its organization's policy, is in breach when
// opened_at + N x 24 h < now.
//
// Exactly once: candidates are read without locks; each is then claimed inside its own publishing transaction by
// a conditional update (`sla_breached_at IS NULL`, same status set, severity and opened_at as read). PostgreSQL
// makes a concurrent claimer wait for the first one's row lock and then re-checks the condition, so only one
// transaction sees count 1 and publishes; the others see 0 and publish nothing. A reopened finding (regression,
// re-triage) has sla_breached_at cleared and opened_at reset by the API, which arms the next breach.
import { isLockNotAvailable, Prisma, utcTimestamp, type Db } from '@svc/db';
import { findingEventData, SLA_DAYS_COLUMNS, SLA_OPEN_STATUSES, SLA_SEVERITIES, slaDueAt } from '@svc/domain';
import { withOutbox, type OutboxDeps } from '@svc/outbox';
import { erasureUnderWaySql, erasuresUnderWay } from './erasure-under-way';

export type SlaScanDeps = OutboxDeps;

/** `CASE f.severity WHEN 'critical' THEN o.sla_critical_days ... END`: the window of each severity, from the domain's map. */
const SLA_DAYS_SQL = Prisma.sql`CASE f.severity ${Prisma.join(
  SLA_SEVERITIES.map((severity) => Prisma.sql`WHEN ${severity} THEN o.${Prisma.raw(SLA_DAYS_COLUMNS[severity])}`),
  ' ',
)} END`;
const BATCH_SIZE = 500;

/**
 * Longest one scan runs: it shares the single-slot maintenance queue with the security-notice sweep and the erasure,
 * and a policy turned on over a large backlog has thousands of breaches to publish. The next scan goes on (nothing
 * is published twice: each breach is claimed).
 */
export const SLA_SCAN_BUDGET_MS = 20_000;

interface Candidate {
  id: string;
  severity: string;
  opened_at: Date;
  sla_days: number;
}

async function findCandidates(prisma: Db, now: Date, excluded: readonly string[]): Promise<Candidate[]> {
  // The window of the finding's severity in its organization's policy; NULL (no SLA) never matches.
  // `now` travels as ISO 8601 text with its Z and is turned into a UTC timestamp, like the timestamp(3) columns.
  return prisma.$queryRaw<Candidate[]>`
    SELECT id, severity, opened_at, sla_days FROM (
      SELECT f.id, f.severity, f.opened_at,
             ${SLA_DAYS_SQL} AS sla_days
      FROM findings f
      JOIN organizations o ON o.id = f.organization_id
      WHERE f.status IN (${Prisma.join([...SLA_OPEN_STATUSES])})
        AND f.sla_breached_at IS NULL
        AND NOT (f.id = ANY(${excluded}::text[]))
        AND NOT ${erasureUnderWaySql('f.organization_id')}
    ) c
    WHERE c.sla_days IS NOT NULL
      AND c.opened_at + make_interval(days => c.sla_days) < ${utcTimestamp(now)}
    ORDER BY c.opened_at, c.id
    LIMIT ${BATCH_SIZE}`;
}

class ErasureUnderWay extends Error {}

/** Claims one breach and publishes its event in one transaction; false when another worker (or a change) won. */
async function claimAndPublish(deps: SlaScanDeps, candidate: Candidate, now: Date): Promise<boolean> {
  return withOutbox(
    deps,
    async (tx, publish) => {
      // A finding locked by a long transaction (its assessment being deleted, say) is skipped, not waited for: the
      // scan's budget would go to a few such rows at the front of the queue, run after run. A later scan retries it.
      await tx.$executeRaw`SET LOCAL lock_timeout = '500ms'`;
      const claimed = await tx.finding.updateMany({
        where: {
          id: candidate.id,
          slaBreachedAt: null,
          status: { in: [...SLA_OPEN_STATUSES] },
          severity: candidate.severity,
          openedAt: candidate.opened_at,
        },
        data: { slaBreachedAt: now },
      });
      if (claimed.count !== 1) return false;
      const f = await tx.finding.findUniqueOrThrow({ where: { id: candidate.id } });
      // An erasure confirmed since the candidate was read: the claim rolls back, a later scan publishes.
      if (await tx.erasureRequest.count({ where: erasuresUnderWay(f.organizationId) })) throw new ErasureUnderWay();
      await publish({
        type: 'finding.sla_breached',
        organizationId: f.organizationId,
        projectId: f.projectId,
        assessmentId: f.assessmentId,
        data: {
          ...findingEventData(f),
          sla_days: candidate.sla_days,
          due_at: slaDueAt(f.openedAt, candidate.sla_days).toISOString(),
        },
      });
      return true;
    },
    () => now,
  );
}

/**
 * Publishes `finding.sla_breached` for every finding past its SLA at `now` that has not had one for its current
 * breach, for at most `budgetMs` (the next scan goes on); returns how many this call published. Safe to run
 * concurrently: each breach is published exactly once.
 */
export async function scanSlaBreaches(deps: SlaScanDeps, now: Date, budgetMs = SLA_SCAN_BUDGET_MS): Promise<number> {
  const deadline = performance.now() + budgetMs;
  let published = 0;
  // Candidates this run already tried (claimed, lost to another worker, or changed meanwhile): never twice.
  const tried: string[] = [];
  while (performance.now() < deadline) {
    const candidates = await findCandidates(deps.prisma, now, tried);
    for (const candidate of candidates) {
      if (performance.now() >= deadline) break;
      tried.push(candidate.id);
      try {
        if (await claimAndPublish(deps, candidate, now)) published += 1;
      } catch (err) {
        if (err instanceof ErasureUnderWay) continue;
        if (isLockNotAvailable(err)) {
          deps.logger.info('SLA breach left to a later scan: the finding is locked', { finding_id: candidate.id });
          continue;
        }
        // One finding's failure must not stop the scan; its claim rolled back, so the next run retries it.
        deps.logger.error('SLA breach publication failed', {
          finding_id: candidate.id,
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
    if (candidates.length < BATCH_SIZE) break;
  }
  if (published > 0) deps.logger.info('SLA breaches published', { count: published });
  return published;
}
