import type { Queue } from 'bullmq';
import type { Db, Tx } from '@svc/db';
import type { Config, Logger } from '@svc/config';
import { withTimeout } from '@svc/domain';
import { deliveryJobOptions, type DeliveryJobData } from '@svc/queue';
import { publishEvent, type PublishEventInput, type PublishedEvent } from './publish';

export interface OutboxDeps {
  prisma: Db;
  deliveryQueue: Queue<DeliveryJobData>;
  logger: Logger;
  maxAttempts: number;
  /** Bound on the enqueue after commit; past it the relay enqueues instead (default: no bound). */
  enqueueTimeoutMs?: number;
}

/** The one way to build OutboxDeps from a process's connections (API or worker) and the queue deliveries go to. */
export function outboxDeps(
  from: { prisma: Db; logger: Logger; config: Pick<Config, 'webhooks' | 'availability'> },
  deliveryQueue: Queue<DeliveryJobData>,
): OutboxDeps {
  return {
    prisma: from.prisma,
    deliveryQueue,
    logger: from.logger,
    maxAttempts: from.config.webhooks.maxAttempts,
    enqueueTimeoutMs: from.config.availability.redisCommandTimeoutMs,
  };
}


export type Publish = (input: PublishEventInput) => Promise<PublishedEvent>;

/** One job per delivery, job id = delivery id: adding a delivery that already has a job is a no-op. */
export async function enqueueDeliveries(
  queue: Queue<DeliveryJobData>,
  deliveries: Array<{ id: string; remainingAttempts: number }>,
): Promise<void> {
  if (deliveries.length === 0) return;
  await queue.addBulk(
    deliveries.map((d) => ({ name: 'deliver', data: { deliveryId: d.id }, opts: deliveryJobOptions(d.id, d.remainingAttempts) })),
  );
}

/**
 * Runs `work` in one transaction, giving it `publish` for the events the change causes; enqueues their
 * deliveries after commit (enqueueAfterCommit).
 */
export async function withOutbox<T>(
  deps: OutboxDeps,
  work: (tx: Tx, publish: Publish) => Promise<T>,
  now: () => Date = () => new Date(),
): Promise<T> {
  const deliveryIds: string[] = [];
  const result = await deps.prisma.$transaction(async (tx) => {
    const publish: Publish = async (input) => {
      const published = await publishEvent(tx, input, now());
      deliveryIds.push(...published.deliveryIds);
      return published;
    };
    return work(tx, publish);
  });
  await enqueueAfterCommit(deps, deliveryIds);
  return result;
}

/**
 * Enqueues committed deliveries. A failed enqueue is logged, not thrown: the change is committed, and the relay
 * will enqueue the deliveries. During a Redis outage the enqueue fails at once (or after `enqueueTimeoutMs`).
 */
export async function enqueueAfterCommit(deps: OutboxDeps, deliveryIds: string[]): Promise<void> {
  try {
    const enqueue = () =>
      enqueueDeliveries(
        deps.deliveryQueue,
        deliveryIds.map((id) => ({ id, remainingAttempts: deps.maxAttempts })),
      );
    await (deps.enqueueTimeoutMs === undefined ? enqueue() : withTimeout(enqueue, deps.enqueueTimeoutMs));
  } catch (err) {
    deps.logger.warn('Enqueue after commit failed; the outbox relay will retry', {
      deliveries: deliveryIds.length,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}
