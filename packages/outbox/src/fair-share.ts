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
/** The shortest span a rate is measured over: a subscription's first deliveries are not read as a burst of 1,000/s. */
export const FAIR_SHARE_MIN_WINDOW_MS = 1_000;

// KEYS[1]: hash {sum, at, born}. ARGV: now ms, deliveries enqueued now, decay ms, min window ms. Returns the rate per
// second, as text (Redis would truncate a Lua number to an integer).
// The decayed sum is divided by the span it has had to accumulate, tau * (1 - e^(-age/tau)) (at least the min
// window), not by tau alone: a subscription that starts at 100 deliveries/s reads 100/s from its first second on,
// where sum / tau read 18/s after one second and passed a share of 50/s only after 3.5 s (tau ln 2). In those 3.5 s a
// dead endpoint behind five subscriptions had 1,700 deliveries queued with no priority, and a healthy neighbour's
// events waited behind them (p50 0.3-0.5 s in the first seconds). Once the key is older than a few tau the span is
// tau: a steady rate reads the same as before.
const DECAYED_RATE = `
local now, n, tau, minWindow = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local st = redis.call('HMGET', KEYS[1], 'sum', 'at', 'born')
local sum = tonumber(st[1] or '0')
local at = tonumber(st[2] or ARGV[1])
-- A key kept from before 'born' existed is an old one.
local born = tonumber(st[3] or (st[1] and '0' or ARGV[1]))
if now > at then sum = sum * math.exp(-(now - at) / tau) else now = at end
sum = sum + n
redis.call('HSET', KEYS[1], 'sum', tostring(sum), 'at', now, 'born', born)
redis.call('PEXPIRE', KEYS[1], tau * 10)
local window = math.max(minWindow, tau * (1 - math.exp(-(now - born) / tau)))
return tostring(sum * 1000 / window)
`;

type RateRedis = {
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
  fairShareRate?(key: string, now: number, n: number, decayMs: number, minWindowMs: number): Promise<string>;
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
    entries.map(([subscriptionId, n]) => redis.fairShareRate(`${queue.opts.prefix}:fair:{${subscriptionId}}`, now, n, FAIR_SHARE_DECAY_MS, FAIR_SHARE_MIN_WINDOW_MS)),
  );
  return new Map(entries.map(([subscriptionId], i) => [subscriptionId, fairSharePriority(Number(rates[i]), perSecond)]));
}
