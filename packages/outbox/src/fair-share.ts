// The measure behind a fair share of backlogs (@svc/domain fairSharePriority): each subscription's recent enqueue
// rate, in Redis so that every API instance and worker counts together. The rate decays exponentially (time constant
// FAIR_SHARE_DECAY_MS) rather than being counted per fixed window: a window that resets hands the next window's
// first deliveries a better priority than the previous window's last ones, so a busy subscription's own deliveries
// overtook each other and its oldest waited (a lone subscription at 600 deliveries/s had an event-to-receipt p99 of
// 1.1 s, 47 ms without the fair share). A steady rate keeps one priority: FIFO among its own deliveries. One key per
// subscription (the id is a hash tag: one slot per key on a Redis Cluster).
import type { Queue } from 'bullmq';
import { fairSharePriority } from '@svc/domain';
import { queueRedis } from '@svc/queue';

export const FAIR_SHARE_DECAY_MS = 5_000;

// KEYS[1]: hash {sum, at}. ARGV: now ms, deliveries enqueued now, decay ms. Returns the rate per second, as text
// (Redis would truncate a Lua number to an integer).
const DECAYED_RATE = `
local now, n, tau = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'sum', 'at')
local sum = tonumber(st[1] or '0')
local at = tonumber(st[2] or ARGV[1])
if now > at then sum = sum * math.exp(-(now - at) / tau) else now = at end
sum = sum + n
redis.call('HSET', KEYS[1], 'sum', tostring(sum), 'at', now)
redis.call('PEXPIRE', KEYS[1], tau * 10)
return tostring(sum * 1000 / tau)
`;

type RateRedis = {
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
  fairShareRate?(key: string, now: number, n: number, decayMs: number): Promise<string>;
};

const defined = new WeakSet<object>();

async function rateClient(queue: Queue): Promise<Required<Pick<RateRedis, 'fairShareRate'>>> {
  const redis = (await queueRedis(queue)) as unknown as RateRedis;
  if (!defined.has(redis)) {
    redis.defineCommand('fairShareRate', { numberOfKeys: 1, lua: DECAYED_RATE });
    defined.add(redis);
  }
  return redis as Required<Pick<RateRedis, 'fairShareRate'>>;
}

/** The priority of each subscription's deliveries in this batch, after counting them into its rate. */
export async function fairSharePriorities(
  queue: Queue,
  subscriptionCounts: Map<string, number>,
  perSecond: number,
  now = Date.now(),
): Promise<Map<string, number>> {
  const redis = await rateClient(queue);
  const entries = [...subscriptionCounts];
  const rates = await Promise.all(
    entries.map(([subscriptionId, n]) => redis.fairShareRate(`${queue.opts.prefix}:fair:{${subscriptionId}}`, now, n, FAIR_SHARE_DECAY_MS)),
  );
  return new Map(entries.map(([subscriptionId], i) => [subscriptionId, fairSharePriority(Number(rates[i]), perSecond)]));
}
