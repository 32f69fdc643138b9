// Scheduled jobs of the worker: the outbox relay (enqueue deliveries and issue exports whose enqueue was lost; its own
// queue and worker, so no other job delays it), and on the maintenance queue the retention purge (retention.ts,
// bounded in time per run; with it the 24-hour sweep of Idempotency-Keys, idempotency-sweep.ts, and the purge of
// security notices sent or given up 30 days ago), the API-key lifecycle policy (key-lifecycle.ts), the SLA scan
// (finding.sla_breached, sla-scan.ts), GDPR erasure (erasure.ts), the orphan sweep of stored source
// (source-sweep.ts) and the sweep of security notices the API did not send (security-notices.ts). BullMQ job
// schedulers create one job per tick in Redis, so each runs once per tick however many workers are up.
import type { Queue } from 'bullmq';
import { outboxDeps, relayOverdueDeliveries, relayOverdueIssueExports } from '@svc/outbox';
import { scanSlaBreaches } from './sla-scan';
import { RELAY_JOB, type DeliveryJobData, type MaintenanceJobName } from '@svc/queue';
import type { WorkerDeps } from './deps';
import { runKeyLifecycle, type KeyLifecycleResult } from './key-lifecycle';
import { followUpCompletedErasures, runErasures, type ErasureRunResult } from './erasure';
import { sweepOrphanedSource, type SourceSweepResult } from './source-sweep';
import { runSecurityNoticeSweep, type NoticeSweepResult } from './security-notices';

import { purgeExpired, purgeSecurityNotices, type PurgeResult } from './retention';
import { sweepIdempotencyKeys } from './idempotency-sweep';
import { relayRequeued } from './metrics';

export type { PurgeResult } from './retention';

/**
 * The purge runs every minute for at most RETENTION_PURGE_BUDGET_MS, a batch of RETENTION_PURGE_BATCH rows per
 * statement: the maintenance worker is never held for longer than that (the SLA scan and the key lifecycle wait at
 * most one budget), and a backlog is worked off a budget per minute (docs/performance.md "Retention at volume").
 */
export const RETENTION_PURGE_INTERVAL_MS = 60 * 1000;
export const RETENTION_PURGE_BUDGET_MS = 20 * 1000;
export const RETENTION_PURGE_BATCH = 2000;
/**
 * The purge rests twice as long as each batch took: on two cores a purge without rests took the drain beside it to
 * 0.29 of its rate, and resting as long as each batch left it at 0.79-0.99 at 1,000,000 rows; it still removes
 * 1,000,000 expired deliveries within the 2 minutes it may take.
 */
export const RETENTION_PURGE_PAUSE_RATIO = 2;

/**
 * The sweep of security notices runs this often: a notice the API could not send goes out within about this long
 * once it is due (the API's own send is left SECURITY_NOTICE_SWEEP_DELAY_MS; then the retries' backoff).
 */
export const SECURITY_NOTICE_SWEEP_INTERVAL_MS = 15 * 1000;

const DAY_MS = 24 * 3600 * 1000;

export async function runOutboxRelay(deps: WorkerDeps, deliveryQueue: Queue<DeliveryJobData>): Promise<number> {
  const { relayAgeMs, maxAttempts, fairSharePerSecond } = deps.config.webhooks;
  const options = { ageMs: relayAgeMs, maxAttempts, now: deps.clock.now() };
  const relayed = await relayOverdueDeliveries(deps.prisma, deliveryQueue, { ...options, fairSharePerSecond });
  relayRequeued.inc(relayed);
  if (relayed > 0) deps.logger.info('Outbox relay enqueued overdue deliveries', { deliveries: relayed });
  const exports = await relayOverdueIssueExports(deps.prisma, deliveryQueue, options);
  if (exports > 0) deps.logger.info('Outbox relay enqueued overdue issue exports', { issue_exports: exports });
  return relayed;
}

export async function runSlaScan(deps: WorkerDeps, deliveryQueue: Queue<DeliveryJobData>): Promise<number> {
  const breaches = await scanSlaBreaches(
    outboxDeps(deps, deliveryQueue),
    deps.clock.now(),
  );
  if (breaches > 0) deps.logger.info('SLA scan published breaches', { findings: breaches });
  return breaches;
}

export async function purgeExpiredDeliveries(
  deps: WorkerDeps,
  options: { budgetMs?: number; batchSize?: number } = {},
): Promise<PurgeResult> {
  const cutoff = new Date(deps.clock.now().getTime() - deps.config.webhooks.retentionDays * DAY_MS);
  const result = await purgeExpired(deps.prisma, {
    cutoff,
    budgetMs: options.budgetMs ?? RETENTION_PURGE_BUDGET_MS,
    batchSize: options.batchSize ?? RETENTION_PURGE_BATCH,
    pauseRatio: RETENTION_PURGE_PAUSE_RATIO,
  });
  if (result.deliveries + result.events > 0 || !result.complete) {
    deps.logger.info('Retention purge', { ...result, cutoff: cutoff.toISOString() });
  }
  return result;
}

export const MAINTENANCE_SCHEDULES: ReadonlyArray<{ name: MaintenanceJobName; everyMs: (deps: WorkerDeps) => number }> = [
  { name: 'retention-purge', everyMs: () => RETENTION_PURGE_INTERVAL_MS },
  { name: 'key-lifecycle', everyMs: (deps) => deps.config.keyLifecycle.intervalMs },
  { name: 'sla-scan', everyMs: (deps) => deps.config.slaScan.intervalMs },
  { name: 'erasure', everyMs: (deps) => deps.config.erasure.intervalMs },
  { name: 'source-sweep', everyMs: (deps) => deps.config.source.orphanSweepIntervalMs },
  { name: 'security-notices', everyMs: () => SECURITY_NOTICE_SWEEP_INTERVAL_MS },
];

const SCHEDULED_JOB_OPTIONS = { removeOnComplete: true, removeOnFail: 100 };

/**
 * Creates or updates the job schedulers; every worker process does this at start, idempotently. The relay's
 * scheduler lives on its own queue; the one an older version registered on the maintenance queue is removed.
 */
export async function scheduleMaintenance(deps: WorkerDeps, maintenanceQueue: Queue, relayQueue: Queue): Promise<void> {
  for (const schedule of MAINTENANCE_SCHEDULES) {
    await maintenanceQueue.upsertJobScheduler(
      schedule.name,
      { every: schedule.everyMs(deps) },
      { name: schedule.name, opts: SCHEDULED_JOB_OPTIONS },
    );
  }
  await maintenanceQueue.removeJobScheduler(RELAY_JOB);
  await relayQueue.upsertJobScheduler(
    RELAY_JOB,
    { every: deps.config.webhooks.relayIntervalMs },
    { name: RELAY_JOB, opts: SCHEDULED_JOB_OPTIONS },
  );
}

export async function runMaintenanceJob(
  deps: WorkerDeps,
  deliveryQueue: Queue<DeliveryJobData>,
  name: string,
): Promise<number | PurgeResult | KeyLifecycleResult | ErasureRunResult | SourceSweepResult | NoticeSweepResult> {
  // A relay job an older version queued here before the relay had its own queue.
  if (name === RELAY_JOB) return runOutboxRelay(deps, deliveryQueue);
  switch (name as MaintenanceJobName) {
    case 'retention-purge': {
      const purged = await purgeExpiredDeliveries(deps);
      const keys = await sweepIdempotencyKeys(deps.prisma, deps.clock.now());
      if (keys > 0) deps.logger.info('Idempotency keys swept', { keys });
      const notices = await purgeSecurityNotices(deps.prisma, deps.clock.now());
      if (notices > 0) deps.logger.info('Security notices purged', { notices });
      return purged;
    }
    case 'key-lifecycle':
      return runKeyLifecycle(deps);
    case 'sla-scan':
      return runSlaScan(deps, deliveryQueue);
    case 'erasure': {
      const result = await runErasures(deps);
      await followUpCompletedErasures(deps);
      return result;
    }
    case 'source-sweep':
      return sweepOrphanedSource(deps);
    case 'security-notices':
      return runSecurityNoticeSweep(deps);
    default:
      throw new Error(`Unknown maintenance job ${name}`);
  }
}
