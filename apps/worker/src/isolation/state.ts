// The shared state of delivery isolation, in Redis, for every worker process: per subscription a circuit breaker,
// an adaptive cap on attempts in flight, an optional throttle (the receiver's rate_limit) and the deliveries that
// wait on them. Each decision is one Lua script over the keys of ONE subscription; the keys carry the subscription
// id as a hash tag, so on a Redis Cluster each script touches one slot. The numbers come from @svc/domain's
// isolation policy; this module only keeps and moves the state.
import type { Redis } from 'ioredis';
import { breakerOpenPeriodsMs, breakerSignalOf, type BreakerState, type IsolationRules, type WaitReason } from '@svc/domain';

// KEYS: 1 state (hash), 2 in flight (zset: token -> expiry ms), 3 waiting (zset: delivery id -> wake ms)
// ARGV: now, token, expiry ms of this attempt, min cap, max cap, slow ms, throttle interval ms (0: none), far wake ms
// Returns {'ok', state} | {reason, until ms, transition}
const ADMIT = `
local now = tonumber(ARGV[1])
local token = ARGV[2]
local expiry = tonumber(ARGV[3])
local minCap, maxCap = tonumber(ARGV[4]), tonumber(ARGV[5])
local slowMs, interval, far = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local st = redis.call('HMGET', KEYS[1], 'state', 'until', 'limit', 'next_send', 'probe', 'prober_until')
local state = st[1] or 'closed'
local untilMs = tonumber(st[2] or '0')
local transition = ''
local function wait(reason, at)
  redis.call('ZADD', KEYS[3], at, token)
  redis.call('PEXPIRE', KEYS[3], far * 4)
  return {reason, tostring(at), transition}
end
if state == 'open' then
  if now < untilMs then
    -- One delivery wakes at the probe time; the rest sleep long and are woken when the breaker closes.
    if tonumber(st[6] or '0') ~= untilMs then
      redis.call('HSET', KEYS[1], 'prober_until', untilMs)
      return wait('breaker_open', untilMs)
    end
    return wait('breaker_open', untilMs + far)
  end
  state = 'half_open'
  transition = 'half_open'
  redis.call('HSET', KEYS[1], 'state', 'half_open', 'probe', token)
elseif state == 'half_open' then
  local probe = st[5]
  local probeExpiry = probe and redis.call('ZSCORE', KEYS[2], probe)
  if probeExpiry and probe ~= token then return wait('breaker_open', tonumber(probeExpiry) + far) end
  redis.call('HSET', KEYS[1], 'probe', token)
else
  local limit = tonumber(st[3] or minCap)
  local inFlight = redis.call('ZCARD', KEYS[2])
  if inFlight > 0 and redis.call('ZCOUNT', KEYS[2], '-inf', now - slowMs + expiry - now) > 0 then
    limit = minCap
  end
  if inFlight >= limit then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return wait('in_flight_cap', tonumber(first[2]))
  end
  if interval > 0 then
    -- The throttle hands out send times one interval apart: a delivery that must wait reserves the next free one
    -- and is let through when it comes back then.
    local reserved = redis.call('HGET', KEYS[1], 'r:' .. token)
    if reserved then
      if now < tonumber(reserved) then return {'rate_limit', reserved, transition} end
      redis.call('HDEL', KEYS[1], 'r:' .. token)
    else
      local nextSend = tonumber(st[4] or '0')
      if now < nextSend then
        redis.call('HSET', KEYS[1], 'next_send', nextSend + interval, 'r:' .. token, nextSend)
        return {'rate_limit', tostring(nextSend), transition}
      end
      redis.call('HSET', KEYS[1], 'next_send', now + interval)
    end
  end
end
redis.call('ZADD', KEYS[2], expiry, token)
redis.call('ZREM', KEYS[3], token)
redis.call('PEXPIRE', KEYS[1], far * 4)
redis.call('PEXPIRE', KEYS[2], far * 4)
return {'ok', '0', transition}
`;

// KEYS as ADMIT. ARGV: now, token, signal (success|unreachable|answered), min cap, max cap, failures to open,
// far wake ms, open periods (ms) of trips 1..n.
// Returns {transition ('' | 'open' | 'closed'), until ms, ids to wake...}
const RELEASE = `
local now = tonumber(ARGV[1])
local token, signal = ARGV[2], ARGV[3]
local minCap, maxCap, threshold = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local far = tonumber(ARGV[7])
redis.call('ZREM', KEYS[2], token)
local st = redis.call('HMGET', KEYS[1], 'state', 'limit', 'failures', 'trips', 'probe')
local state = st[1] or 'closed'
local limit = tonumber(st[2] or minCap)
local failures = tonumber(st[3] or '0')
local trips = tonumber(st[4] or '0')
if signal == 'unreachable' then
  failures = failures + 1
  limit = math.max(minCap, math.floor(limit / 2))
  -- Attempts of the wave that opened it (still in flight then) change nothing; in half-open only the probe's
  -- failure opens again.
  local trips_now = (state == 'closed' and failures >= threshold) or (state == 'half_open' and st[5] == token)
  if trips_now then
    trips = trips + 1
    local period = tonumber(ARGV[7 + math.min(trips, #ARGV - 7)])
    local untilMs = now + period
    redis.call('HSET', KEYS[1], 'state', 'open', 'until', untilMs, 'limit', limit, 'failures', failures, 'trips', trips)
    redis.call('HDEL', KEYS[1], 'probe')
    -- The earliest waiting delivery becomes the one that probes.
    local first = redis.call('ZRANGE', KEYS[3], 0, 0)
    if first[1] then redis.call('HSET', KEYS[1], 'prober_until', untilMs) end
    return {'open', tostring(untilMs), first[1]}
  end
  redis.call('HSET', KEYS[1], 'limit', limit, 'failures', failures)
  return {'', '0'}
end
if signal == 'success' then limit = math.min(maxCap, limit + 1) end
redis.call('HSET', KEYS[1], 'limit', limit, 'failures', 0)
if state ~= 'closed' then
  redis.call('HSET', KEYS[1], 'state', 'closed', 'trips', 0)
  redis.call('HDEL', KEYS[1], 'until', 'probe', 'prober_until')
  local waiting = redis.call('ZRANGE', KEYS[3], 0, -1)
  redis.call('DEL', KEYS[3])
  local out = {'closed', '0'}
  for _, id in ipairs(waiting) do out[#out + 1] = id end
  return out
end
-- A slot is free: the delivery that has waited longest for one goes now.
local first = redis.call('ZRANGE', KEYS[3], 0, 0)
if first[1] then
  redis.call('ZREM', KEYS[3], first[1])
  return {'', '0', first[1]}
end
return {'', '0'}
`;

export type Admission =
  | { admitted: true; transition: BreakerState | null }
  | { admitted: false; reason: WaitReason; until: Date; transition: BreakerState | null };

export interface Release {
  /** The breaker opened or closed with this attempt. */
  transition: 'open' | 'closed' | null;
  /** While open: when the next probe may go. */
  until: Date | null;
  /** Waiting deliveries to wake now (the breaker closed, or a slot became free). */
  wake: string[];
  /** When the breaker opened: the waiting delivery that will probe at `until`. */
  prober: string | null;
}

export interface SubscriptionRef {
  id: string;
  rateLimit: number | null;
}

type IsolationRedis = Redis & {
  isolationAdmit(k1: string, k2: string, k3: string, ...argv: Array<string | number>): Promise<string[]>;
  isolationRelease(k1: string, k2: string, k3: string, ...argv: Array<string | number>): Promise<Array<string | null>>;
};

/** Far wake-up of deliveries that wait to be woken (a breaker that closes); also bounds how long keys live. */
const FAR_WAKE_MS = 10 * 60_000;

export class IsolationState {
  private readonly redis: IsolationRedis;
  private readonly periods: number[];

  constructor(
    redis: Redis,
    private readonly prefix: string,
    private readonly rules: IsolationRules,
    /** How long an admitted attempt may hold its in-flight slot (the attempt timeout plus a margin). */
    private readonly slotMs: number,
  ) {
    redis.defineCommand('isolationAdmit', { numberOfKeys: 3, lua: ADMIT });
    redis.defineCommand('isolationRelease', { numberOfKeys: 3, lua: RELEASE });
    this.redis = redis as IsolationRedis;
    this.periods = breakerOpenPeriodsMs(rules);
  }

  private keys(subscriptionId: string): [string, string, string] {
    const base = `${this.prefix}:iso:{${subscriptionId}}`;
    return [`${base}:state`, `${base}:inflight`, `${base}:waiting`];
  }

  private get farWakeMs(): number {
    return Math.max(FAR_WAKE_MS, this.rules.breakerMaxOpenMs);
  }

  /** Takes an in-flight slot for delivery `token`, or says why and until when it must wait. */
  async admit(subscription: SubscriptionRef, token: string, now: Date): Promise<Admission> {
    const t = now.getTime();
    const interval = subscription.rateLimit ? Math.ceil(1000 / subscription.rateLimit) : 0;
    const [reason, until, transition] = await this.redis.isolationAdmit(
      ...this.keys(subscription.id),
      t,
      token,
      t + this.slotMs,
      this.rules.minInFlight,
      this.rules.maxInFlight,
      this.rules.slowAttemptMs,
      interval,
      this.farWakeMs,
    );
    const moved = transition ? (transition as BreakerState) : null;
    if (reason === 'ok') return { admitted: true, transition: moved };
    return { admitted: false, reason: reason as WaitReason, until: new Date(Number(until)), transition: moved };
  }

  /** Frees the slot of an attempt and moves the breaker and the cap by its outcome. */
  async release(subscriptionId: string, token: string, outcome: string, now: Date): Promise<Release> {
    const r = this.rules;
    const [transition, until, ...ids] = await this.redis.isolationRelease(
      ...this.keys(subscriptionId),
      now.getTime(),
      token,
      breakerSignalOf(outcome),
      r.minInFlight,
      r.maxInFlight,
      r.breakerFailures,
      this.farWakeMs,
      ...this.periods,
    );
    const wakeIds = ids.filter((id): id is string => typeof id === 'string');
    return {
      transition: transition === 'open' || transition === 'closed' ? transition : null,
      until: Number(until) > 0 ? new Date(Number(until)) : null,
      wake: transition === 'open' ? [] : wakeIds,
      prober: transition === 'open' ? (wakeIds[0] ?? null) : null,
    };
  }

  close(): Promise<void> {
    return this.redis.quit().then(() => undefined, () => this.redis.disconnect());
  }

  /** A slot given back without an attempt (the delivery was not sent after all). */
  async abandon(subscriptionId: string, token: string): Promise<void> {
    await this.redis.zrem(this.keys(subscriptionId)[1], token);
  }
}
