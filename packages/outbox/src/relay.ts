// The outbox relay: enqueues every pending delivery that is overdue (its next attempt, or its creation, lies
// further back than `ageMs`) and so may have lost its job. Job id = delivery id, so a delivery whose job still
// exists is not enqueued twice.
import type { Queue } from 'bullmq';
import type { Db } from '@svc/db';
import { enqueueIssueExport, type DeliveryJobData } from '@svc/queue';
import { enqueueDeliveries } from './enqueue';

export async function relayOverdueDeliveries(
  prisma: Db,
  queue: Queue<DeliveryJobData>,
  options: { ageMs: number; maxAttempts: number; now?: Date; batchSize?: number; fairSharePerSecond?: number },
): Promise<number> {
  const cutoff = new Date((options.now ?? new Date()).getTime() - options.ageMs);
  const overdue = await prisma.webhookDelivery.findMany({
    where: {
      status: 'pending',
      OR: [{ nextAttemptAt: { lt: cutoff } }, { nextAttemptAt: null, createdAt: { lt: cutoff } }],
    },
    select: { id: true, attemptCount: true, subscriptionId: true },
    orderBy: { id: 'asc' },
    take: options.batchSize ?? 500,
  });
  await enqueueDeliveries(
    queue,
    overdue.map((d) => ({ id: d.id, subscriptionId: d.subscriptionId, remainingAttempts: options.maxAttempts - d.attemptCount })),
    { fairSharePerSecond: options.fairSharePerSecond },
  );
  return overdue.length;
}

/**
 * The same for issue exports (jobs named `issue-export` on the delivery queue): a pending export whose next
 * attempt (or creation) is overdue may have lost its job; job id = export id, so a live job is not doubled.
 */
export async function relayOverdueIssueExports(
  prisma: Db,
  queue: Queue<DeliveryJobData>,
  options: { ageMs: number; maxAttempts: number; now?: Date; batchSize?: number },
): Promise<number> {
  const cutoff = new Date((options.now ?? new Date()).getTime() - options.ageMs);
  const overdue = await prisma.findingIssueExport.findMany({
    where: {
      status: 'pending',
      OR: [{ nextAttemptAt: { lt: cutoff } }, { nextAttemptAt: null, createdAt: { lt: cutoff } }],
    },
    select: { id: true, attemptCount: true },
    orderBy: { id: 'asc' },
    take: options.batchSize ?? 500,
  });
  for (const e of overdue) await enqueueIssueExport(queue, e.id, Math.max(1, options.maxAttempts - e.attemptCount));
  return overdue.length;
}
