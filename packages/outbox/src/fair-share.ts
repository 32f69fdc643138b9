// The counter behind a fair share of backlogs (@svc/domain fairSharePriority): deliveries enqueued per subscription
// in the current second, in Redis so that every API instance and worker counts together. One key per subscription
// and window (the id is a hash tag: one slot per key on a Redis Cluster).
import type { Queue } from 'bullmq';
import { fairSharePriority } from '@svc/domain';

export const FAIR_SHARE_WINDOW_MS = 1_000;

type CountingRedis = { incrby(key: string, n: number): Promise<number>; pexpire(key: string, ms: number): Promise<number> };

/** The priority of each subscription's deliveries in this batch, after counting them. */
export async function fairSharePriorities(
  queue: Queue,
  subscriptionCounts: Map<string, number>,
  perSecond: number,
  now = Date.now(),
): Promise<Map<string, number>> {
  const redis = (await queue.backend.client) as unknown as CountingRedis;
  const window = Math.floor(now / FAIR_SHARE_WINDOW_MS);
  const entries = [...subscriptionCounts];
  const counts = await Promise.all(
    entries.map(async ([subscriptionId, n]) => {
      const key = `${queue.opts.prefix}:fair:{${subscriptionId}}:${window}`;
      const count = await redis.incrby(key, n);
      if (count === n) await redis.pexpire(key, 2 * FAIR_SHARE_WINDOW_MS);
      return count;
    }),
  );
  return new Map(entries.map(([subscriptionId], i) => [subscriptionId, fairSharePriority(counts[i], (perSecond * FAIR_SHARE_WINDOW_MS) / 1000)]));
}
