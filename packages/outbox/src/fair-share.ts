// The measure behind a fair share of backlogs (@svc/domain fairSharePriority): each subscription's recent enqueue
// rate, in Redis so that every API instance and worker counts together. The rate decays exponentially (time constant
// FAIR_SHARE_DECAY_MS) rather than being counted per fixed window: a window that resets hands the next window's
// first deliveries a better priority than the previous window's last ones, so a busy subscription's own deliveries
// overtook each other and its oldest waited (a lone subscription at 600 deliveries/s had an event-to-receipt p99 of
// 1.1 s, 47 ms without the fair share). A steady rate keeps one priority: FIFO among its own deliveries. Two keys per
// subscription (its rate, and its held-back mark: markHeldBack) under the queue's prefix: on a Redis Cluster they
// share the queue's hash slot (bullPrefix), so one script reads a whole batch's.
import type { Queue } from 'bullmq';
import { fairSharePriority } from '@svc/domain';
import { queueRedis } from '@svc/queue';

export const FAIR_SHARE_DECAY_MS = 5_000;
/** How long a postponement keeps its subscription's next deliveries behind everyone else's (markHeldBack). */
export const HELD_BACK_MARK_MS = 2_000;
/** The shortest span a rate is measured over: a subscription's first deliveries are not read as a burst of 1,000/s. */
export const FAIR_SHARE_MIN_WINDOW_MS = 1_000;

// The decayed sum is divided by the span it has had to accumulate, tau * (1 - e^(-age/tau)) (at least the min
// window), not by tau alone: a subscription that starts at 100 deliveries/s reads 100/s from its first second on,
// where sum / tau read 18/s after one second and passed a share of 50/s only after 3.5 s (tau ln 2). In those 3.5 s a
// dead endpoint behind five subscriptions had 1,700 deliveries queued with no priority, and a healthy neighbour's
// events waited behind them (p50 0.3-0.5 s in the first seconds). Once the key is older than a few tau the span is
// tau: a steady rate reads the same as before.
//
// One call per enqueued batch, whatever the number of subscriptions it touches (a publish fanned out to 5 of them
// cost 5 round trips, each a socket write on both sides). KEYS: each subscription's rate hash {sum, at, born}, then
// each one's held-back mark, in the same order. ARGV: now ms, decay ms, min window ms, then the deliveries enqueued
// now for each subscription. Returns per subscription its rate per second (as text: Redis would truncate a Lua number
// to an integer) and 1 or 0 for the mark. All keys share the queue's hash slot on a Redis Cluster.
const DECAYED_RATES = `
local now, tau, minWindow = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count = #KEYS / 2
local out = {}
for i = 1, count do
  local key = KEYS[i]
  local n = tonumber(ARGV[3 + i])
  local st = redis.call('HMGET', key, 'sum', 'at', 'born')
  local sum = tonumber(st[1] or '0')
  local at = tonumber(st[2] or ARGV[1])
  -- A key kept from before 'born' existed is an old one.
  local born = tonumber(st[3] or (st[1] and '0' or ARGV[1]))
  local t = now
  if t > at then sum = sum * math.exp(-(t - at) / tau) else t = at end
  sum = sum + n
  redis.call('HSET', key, 'sum', tostring(sum), 'at', t, 'born', born)
  redis.call('PEXPIRE', key, tau * 10)
  local window = math.max(minWindow, tau * (1 - math.exp(-(t - born) / tau)))
  out[2 * i - 1] = tostring(sum * 1000 / window)
  out[2 * i] = redis.call('EXISTS', KEYS[count + i])
end
return out
`;

const rateKey = (prefix: string, subscriptionId: string) => `${prefix}:fair:{${subscriptionId}}`;
const heldBackKey = (prefix: string, subscriptionId: string) => `${prefix}:held:{${subscriptionId}}`;

type MarkRedis = { set(key: string, value: string, px: 'PX', ms: number): Promise<unknown> };

type RateRedis = {
  defineCommand(name: string, definition: { numberOfKeys?: number; lua: string }): void;
  fairShareRates?(numberOfKeys: number, ...keysAndArgs: Array<string | number>): Promise<string[]>;
};

const defined = new WeakSet<object>();

async function rateClient(queue: Queue): Promise<Required<Pick<RateRedis, 'fairShareRates'>>> {
  const redis = (await queueRedis(queue)) as unknown as RateRedis;
  if (!defined.has(redis)) {
    // numberOfKeys omitted: given first on each call (two keys per subscription of the batch).
    redis.defineCommand('fairShareRates', { lua: DECAYED_RATES });
    defined.add(redis);
  }
  return redis as Required<Pick<RateRedis, 'fairShareRates'>>;
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
  if (entries.length === 0) return new Map();
  const prefix = queue.opts.prefix!;
  const keys = [...entries.map(([subscriptionId]) => rateKey(prefix, subscriptionId)), ...entries.map(([subscriptionId]) => heldBackKey(prefix, subscriptionId))];
  const counts = entries.map(([, n]) => n);
  const answer = await redis.fairShareRates(keys.length, ...keys, now, FAIR_SHARE_DECAY_MS, FAIR_SHARE_MIN_WINDOW_MS, ...counts);
  return new Map(
    entries.map(([subscriptionId], i) => [subscriptionId, fairSharePriority(Number(answer[2 * i]), perSecond, Number(answer[2 * i + 1]) === 1)]),
  );
}

/**
 * A subscription's deliveries are being held back (postponed for a slot, the breaker or the throttle): its next
 * deliveries go behind everyone else's for HELD_BACK_MARK_MS, a mark each postponement renews.
 */
export async function markHeldBack(redis: MarkRedis, queuePrefix: string, subscriptionId: string): Promise<void> {
  await redis.set(heldBackKey(queuePrefix, subscriptionId), '1', 'PX', HELD_BACK_MARK_MS);
}

/**
 * markHeldBack for a process that postpones many deliveries: a subscription's mark is renewed at most four times per
 * HELD_BACK_MARK_MS, not once per postponement (500 a second behind a dead endpoint). Never throws: a failed mark
 * only costs the priority.
 */
export function heldBackMarker(redis: MarkRedis, queuePrefix: string, onError: (err: unknown) => void): (subscriptionId: string) => void {
  const lastMarked = new Map<string, number>();
  return (subscriptionId) => {
    const now = Date.now();
    if (now - (lastMarked.get(subscriptionId) ?? 0) < HELD_BACK_MARK_MS / 4) return;
    if (lastMarked.size >= 10_000) lastMarked.clear();
    lastMarked.set(subscriptionId, now);
    markHeldBack(redis, queuePrefix, subscriptionId).catch(onError);
  };
}
