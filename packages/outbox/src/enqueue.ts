import type { Queue } from 'bullmq';
import { Coalescer, coalescerOf, type Db, type Tx } from '@svc/db';
import type { Config, Logger } from '@svc/config';
import { withTimeout } from '@svc/domain';
import { deliveryJobOptions, type DeliveryJobData } from '@svc/queue';
import { publishEvent, type DeliveryRef, type PublishEventInput, type PublishedEvent } from './publish';
import { fairSharePriorities } from './fair-share';
import { heldBackDelays, holdBackDeliveries, type HoldBack, type HoldBackCandidate } from './held-back';

export interface OutboxDeps {
  prisma: Db;
  deliveryQueue: Queue<DeliveryJobData>;
  logger: Logger;
  maxAttempts: number;
  /** Bound on the enqueue after commit; past it the relay enqueues instead (default: no bound). */
  enqueueTimeoutMs?: number;
  /** Deliveries a subscription may enqueue per second before the rest go behind lighter ones (0: off). */
  fairSharePerSecond?: number;
  /** Holds back deliveries whose subscription's breaker is open (null: isolation off). */
  holdBack?: HoldBack | null;
}

/** The one way to build OutboxDeps from a process's connections (API or worker) and the queue deliveries go to. */
export function outboxDeps(
  from: { prisma: Db; logger: Logger; config: Pick<Config, 'webhooks' | 'availability' | 'redisPrefix'> },
  deliveryQueue: Queue<DeliveryJobData>,
): OutboxDeps {
  const { webhooks } = from.config;
  return {
    prisma: from.prisma,
    deliveryQueue,
    logger: from.logger,
    maxAttempts: webhooks.maxAttempts,
    enqueueTimeoutMs: from.config.availability.redisCommandTimeoutMs,
    fairSharePerSecond: webhooks.fairSharePerSecond,
    holdBack: webhooks.isolation && { prisma: from.prisma, redisPrefix: from.config.redisPrefix, rules: webhooks.isolation },
  };
}


export type Publish = (input: PublishEventInput) => Promise<PublishedEvent>;

/** A delivery (publish.ts DeliveryRef; the relay knows no breaker) and the attempts it has left. */
export type DeliveryToEnqueue = HoldBackCandidate & { remainingAttempts: number };

export interface EnqueueOptions {
  fairSharePerSecond?: number;
  holdBack?: HoldBack | null;
}

/**
 * One job per delivery, job id = delivery id: adding a delivery that already has a job is a no-op. With a fair share,
 * a subscription's deliveries beyond its share of the current second get a BullMQ priority and so go behind lighter
 * ones. With a hold-back, deliveries to a subscription whose breaker is open are added postponed (held-back.ts).
 */
export async function enqueueDeliveries(
  queue: Queue<DeliveryJobData>,
  deliveries: DeliveryToEnqueue[],
  { fairSharePerSecond = 0, holdBack }: EnqueueOptions = {},
): Promise<void> {
  if (deliveries.length === 0) return;
  const now = Date.now();
  const delays = holdBack ? heldBackDelays(deliveries, holdBack.rules, now) : new Map<string, number>();
  const priorities = fairSharePerSecond > 0 ? await fairSharePriorities(queue, countBySubscription(deliveries), fairSharePerSecond) : null;
  await queue.addBulk(
    deliveries.map((d) => ({
      name: 'deliver',
      data: { deliveryId: d.id },
      opts: deliveryJobOptions(d.id, d.remainingAttempts, delays.get(d.id) ?? 0, (d.subscriptionId && priorities?.get(d.subscriptionId)) || 0),
    })),
  );
  if (holdBack && delays.size > 0) await holdBackDeliveries(queue, holdBack, deliveries, delays, now);
}

function countBySubscription(deliveries: DeliveryToEnqueue[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const d of deliveries) if (d.subscriptionId) counts.set(d.subscriptionId, (counts.get(d.subscriptionId) ?? 0) + 1);
  return counts;
}

/**
 * Runs `work` in one transaction, giving it `publish` for the events the change causes; enqueues their
 * deliveries after commit (enqueueAfterCommit).
 */
export async function withOutbox<T>(
  deps: OutboxDeps,
  work: (tx: Tx, publish: Publish) => Promise<T>,
  now: () => Date = () => new Date(),
  transaction?: { timeout?: number },
): Promise<T> {
  const deliveries: DeliveryRef[] = [];
  const result = await deps.prisma.$transaction(async (tx) => {
    const publish: Publish = async (input) => {
      const published = await publishEvent(tx, input, now());
      deliveries.push(...published.deliveries);
      return published;
    };
    return work(tx, publish);
  }, transaction);
  await enqueueAfterCommit(deps, deliveries);
  return result;
}

/** One caller's committed deliveries and how its process enqueues them. */
interface EnqueueRequest {
  deliveries: DeliveryToEnqueue[];
  options: EnqueueOptions;
}

const sameOptions = (a: EnqueueOptions, b: EnqueueOptions) =>
  a.fairSharePerSecond === b.fairSharePerSecond &&
  a.holdBack?.prisma === b.holdBack?.prisma &&
  a.holdBack?.redisPrefix === b.holdBack?.redisPrefix &&
  a.holdBack?.rules === b.holdBack?.rules;

/**
 * The enqueues of one batch, grouped by their options (one group in a process: its configuration), each group's
 * deliveries added by one enqueueDeliveries: one fair-share script and one addBulk for them all.
 */
async function enqueueTogether(queue: Queue<DeliveryJobData>, requests: EnqueueRequest[]): Promise<void[]> {
  const groups: EnqueueRequest[] = [];
  for (const request of requests) {
    const group = groups.find((g) => sameOptions(g.options, request.options));
    if (group) group.deliveries.push(...request.deliveries);
    else groups.push({ deliveries: [...request.deliveries], options: request.options });
  }
  await Promise.all(groups.map((g) => enqueueDeliveries(queue, g.deliveries, g.options)));
  return requests.map(() => undefined);
}

/**
 * The queue's enqueues after commit go together: while one batch is being added, the enqueues of concurrent
 * requests wait and then go as the next batch (a lone enqueue waits for nothing). Publishing with 32 clients cost the
 * API two Redis round trips per event (the fair-share script, then the addBulk pipeline), each a socket write on
 * both sides; together they cost two per batch.
 */
function enqueuerOf(queue: Queue<DeliveryJobData>): Coalescer<EnqueueRequest, void> {
  return coalescerOf(queue, 'enqueue', () => new Coalescer((requests: EnqueueRequest[]) => enqueueTogether(queue, requests)));
}

/**
 * Enqueues committed deliveries, together with those of concurrent callers (enqueuerOf). A failed enqueue is logged,
 * not thrown: the change is committed, and the relay will enqueue the deliveries. During a Redis outage the enqueue
 * fails at once (or after `enqueueTimeoutMs`).
 */
export async function enqueueAfterCommit(deps: OutboxDeps, deliveries: DeliveryRef[]): Promise<void> {
  if (deliveries.length === 0) return;
  try {
    const enqueue = () =>
      enqueuerOf(deps.deliveryQueue).run({
        deliveries: deliveries.map((d) => ({ ...d, remainingAttempts: deps.maxAttempts })),
        options: { fairSharePerSecond: deps.fairSharePerSecond, holdBack: deps.holdBack },
      });
    await (deps.enqueueTimeoutMs === undefined ? enqueue() : withTimeout(enqueue, deps.enqueueTimeoutMs));
  } catch (err) {
    deps.logger.warn('Enqueue after commit failed; the outbox relay will retry', {
      deliveries: deliveries.length,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}
