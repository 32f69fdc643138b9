// The outbox relay: enqueues every pending delivery that is overdue (its next attempt, or its creation, lies
// further back than `ageMs`) and so may have lost its job. Job id = delivery id, so a delivery whose job still
// exists is not enqueued twice.
import type { Queue } from 'bullmq';
import type { Db } from '@svc/db';
import type { DeliveryJobData } from '@svc/queue';
import { enqueueDeliveries } from './enqueue';

export async function relayOverdueDeliveries(
  prisma: Db,
  queue: Queue<DeliveryJobData>,
  options: { ageMs: number; maxAttempts: number; now?: Date; batchSize?: number; fairSharePerMinute?: number },
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
    options.fairSharePerMinute,
  );
  return overdue.length;
}
