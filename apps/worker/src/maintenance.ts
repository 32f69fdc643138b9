// Scheduled jobs of the worker: the outbox relay (enqueue deliveries whose enqueue was lost), the retention
// purge (deliveries and their attempts 30 days after they reached a terminal state) and the API-key lifecycle
// policy (key-lifecycle.ts), the SLA scan (finding.sla_breached, sla-scan.ts) and GDPR erasure (erasure.ts). BullMQ job schedulers create one job per tick in Redis, so each runs once per tick
// however many workers are up.
import type { Queue } from 'bullmq';
import type { Db } from '@svc/db';
import { outboxDeps, relayOverdueDeliveries, relayOverdueIssueExports } from '@svc/outbox';
import { scanSlaBreaches } from './sla-scan';
import type { DeliveryJobData, MaintenanceJobName } from '@svc/queue';
import type { WorkerDeps } from './deps';
import { runKeyLifecycle, type KeyLifecycleResult } from './key-lifecycle';
import { runErasures, type ErasureRunResult } from './erasure';

export const RETENTION_PURGE_INTERVAL_MS = 3600 * 1000;
const PURGE_BATCH_SIZE = 1000;
import { relayRequeued } from './metrics';

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

export interface PurgeResult {
  deliveries: number;
  events: number;
}

/** Deletes in batches until nothing matches, so one run never holds a huge delete. */
async function deleteInBatches(findIds: () => Promise<Array<{ id: string }>>, deleteIds: (ids: string[]) => Promise<{ count: number }>) {
  let total = 0;
  for (;;) {
    const ids = (await findIds()).map((row) => row.id);
    if (ids.length === 0) return total;
    total += (await deleteIds(ids)).count;
    if (ids.length < PURGE_BATCH_SIZE) return total;
  }
}

function purgeDeliveries(prisma: Db, cutoff: Date): Promise<number> {
  const where = { status: { in: ['succeeded' as const, 'failed' as const] }, completedAt: { lt: cutoff } };
  return deleteInBatches(
    () => prisma.webhookDelivery.findMany({ where, select: { id: true }, take: PURGE_BATCH_SIZE }),
    // Attempts go with their delivery (ON DELETE CASCADE).
    (ids) => prisma.webhookDelivery.deleteMany({ where: { id: { in: ids }, ...where } }),
  );
}

function purgeOrphanEvents(prisma: Db, cutoff: Date): Promise<number> {
  const where = { createdAt: { lt: cutoff }, deliveries: { none: {} } };
  return deleteInBatches(
    () => prisma.event.findMany({ where, select: { id: true }, take: PURGE_BATCH_SIZE }),
    (ids) => prisma.event.deleteMany({ where: { id: { in: ids }, ...where } }),
  );
}

export async function purgeExpiredDeliveries(deps: WorkerDeps): Promise<PurgeResult> {
  const cutoff = new Date(deps.clock.now().getTime() - deps.config.webhooks.retentionDays * DAY_MS);
  const deliveries = await purgeDeliveries(deps.prisma, cutoff);
  const events = await purgeOrphanEvents(deps.prisma, cutoff);
  if (deliveries + events > 0) deps.logger.info('Retention purge', { deliveries, events, cutoff: cutoff.toISOString() });
  return { deliveries, events };
}

export const MAINTENANCE_SCHEDULES: ReadonlyArray<{ name: MaintenanceJobName; everyMs: (deps: WorkerDeps) => number }> = [
  { name: 'outbox-relay', everyMs: (deps) => deps.config.webhooks.relayIntervalMs },
  { name: 'retention-purge', everyMs: () => RETENTION_PURGE_INTERVAL_MS },
  { name: 'key-lifecycle', everyMs: (deps) => deps.config.keyLifecycle.intervalMs },
  { name: 'sla-scan', everyMs: (deps) => deps.config.slaScan.intervalMs },
  { name: 'erasure', everyMs: (deps) => deps.config.erasure.intervalMs },
];

/** Creates or updates the job schedulers; every worker process does this at start, idempotently. */
export async function scheduleMaintenance(deps: WorkerDeps, maintenanceQueue: Queue): Promise<void> {
  for (const schedule of MAINTENANCE_SCHEDULES) {
    await maintenanceQueue.upsertJobScheduler(
      schedule.name,
      { every: schedule.everyMs(deps) },
      { name: schedule.name, opts: { removeOnComplete: true, removeOnFail: 100 } },
    );
  }
}

export async function runMaintenanceJob(
  deps: WorkerDeps,
  deliveryQueue: Queue<DeliveryJobData>,
  name: string,
): Promise<number | PurgeResult | KeyLifecycleResult | ErasureRunResult> {
  switch (name as MaintenanceJobName) {
    case 'outbox-relay':
      return runOutboxRelay(deps, deliveryQueue);
    case 'retention-purge':
      return purgeExpiredDeliveries(deps);
    case 'key-lifecycle':
      return runKeyLifecycle(deps);
    case 'sla-scan':
      return runSlaScan(deps, deliveryQueue);
    case 'erasure':
      return runErasures(deps);
    default:
      throw new Error(`Unknown maintenance job ${name}`);
  }
}
