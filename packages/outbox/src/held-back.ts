// Deliveries to a subscription whose circuit breaker is open are enqueued already postponed (docs/webhooks.md "Delivery
// isolation"): their jobs are added delayed to the far wake-up and wait in the subscription's waiting set for the
// breaker to close, so no worker spends a slot, a read and a write on each of them while it is open. (Postponed one by
// one in the worker, a dead endpoint behind five subscriptions at 100 events/s cost 500 postponements a second, and a
// healthy neighbour's p99 rose 7 x.) The subscription row's mirror of the breaker says which deliveries to hold back;
// Redis, where the breaker lives, has the last word: a breaker closed meanwhile lets them go at once.
import type { Queue } from 'bullmq';
import { Prisma, queryRows, utcTimestamp, type Db } from '@svc/db';
import { farWakeMs, wakeJitterMs, type IsolationRules } from '@svc/domain';
import { holdBehindOpenBreaker, queueRedis, redelayDeliveryJob, wakeDeliveryJobs, type DeliveryJobData } from '@svc/queue';
import type { DeliveryRef } from './publish';

export interface HoldBack {
  prisma: Db;
  /** config.redisPrefix: where the isolation state lives. */
  redisPrefix: string;
  rules: Pick<IsolationRules, 'breakerMaxOpenMs'>;
}

/** What the hold-back needs of a delivery to enqueue. */
export type HoldBackCandidate = Pick<DeliveryRef, 'id'> & Partial<Pick<DeliveryRef, 'subscriptionId' | 'breakerOpenUntilMs'>>;

/**
 * The job delay of each delivery to hold back (its subscription row shows the breaker open): the far wake-up after
 * the probe time, spread a little, as the worker postpones one.
 */
export function heldBackDelays(deliveries: HoldBackCandidate[], rules: HoldBack['rules'], now: number): Map<string, number> {
  const delays = new Map<string, number>();
  for (const d of deliveries) {
    if (!d.subscriptionId || !d.breakerOpenUntilMs || d.breakerOpenUntilMs <= now) continue;
    const wait = d.breakerOpenUntilMs - now + farWakeMs(rules);
    delays.set(d.id, wait + wakeJitterMs(wait));
  }
  return delays;
}

/**
 * After their delayed jobs were added: each subscription's held-back deliveries join its waiting set (one of them
 * probes, if none was chosen yet); those whose breaker is no longer open go now. Then the rows show why they wait.
 */
export async function holdBackDeliveries(
  queue: Queue<DeliveryJobData>,
  hold: HoldBack,
  deliveries: HoldBackCandidate[],
  delays: Map<string, number>,
  now: number,
): Promise<void> {
  const redis = await queueRedis(queue);
  const bySubscription = new Map<string, string[]>();
  for (const d of deliveries) {
    if (!delays.has(d.id)) continue;
    const ids = bySubscription.get(d.subscriptionId!) ?? [];
    ids.push(d.id);
    bySubscription.set(d.subscriptionId!, ids);
  }
  const waiting: Array<{ id: string; at: Date }> = [];
  await Promise.all(
    [...bySubscription].map(async ([subscriptionId, ids]) => {
      const verdict = await holdBehindOpenBreaker(redis, hold.redisPrefix, subscriptionId, ids, hold.rules, new Date(now));
      if (!verdict.held) {
        await wakeDeliveryJobs(queue, ids);
        return;
      }
      if (verdict.prober) await redelayDeliveryJob(queue, verdict.prober, verdict.probeAt.getTime() - now);
      for (const id of ids) waiting.push({ id, at: id === verdict.prober ? verdict.probeAt : new Date(now + delays.get(id)!) });
    }),
  );
  if (waiting.length === 0) return;
  await showBreakerWait(hold.prisma, waiting, new Date(now));
}

/** next_attempt_at and wait_reason of deliveries held back before any attempt, in one statement. */
async function showBreakerWait(prisma: Db, waiting: Array<{ id: string; at: Date }>, now: Date): Promise<void> {
  await queryRows(
    prisma,
    Prisma.sql`
      UPDATE webhook_deliveries d
         SET next_attempt_at = v.at AT TIME ZONE 'UTC', wait_reason = 'breaker_open', updated_at = ${utcTimestamp(now)}
        FROM unnest(${waiting.map((w) => w.id)}::text[], ${waiting.map((w) => w.at.toISOString())}::timestamptz[]) AS v(id, at)
       WHERE d.id = v.id AND d.status = 'pending' AND d.attempt_count = 0
      RETURNING d.id`,
    'outbox_show_breaker_wait',
  );
}
