// The shared state of delivery isolation, in Redis, for every worker process: per subscription a circuit breaker,
// an adaptive cap on attempts in flight, an optional throttle (the receiver's rate_limit) and the deliveries that
// wait on them. Each decision is one Lua script over the keys of ONE subscription; the keys carry the subscription
// id as a hash tag, so on a Redis Cluster each script touches one slot. The numbers come from @svc/domain's
// isolation policy; this module only keeps and moves the state. The worker admits and releases attempts; whoever
// enqueues deliveries (API, relay) holds back those of a subscription whose breaker is open (holdBehindOpenBreaker).
import type { Redis } from 'ioredis';
import { breakerOpenPeriodsMs, breakerSignalOf, farWakeMs, withTimeout, type BreakerState, type IsolationRules, type WaitReason } from '@svc/domain';

// KEYS: 1 state (hash), 2 in flight (zset: token -> expiry ms), 3 waiting (zset: delivery id -> wake ms)
// ARGV: now, token, expiry ms of this attempt, min cap, max cap, slow ms, throttle interval ms (0: none), far wake ms
// Returns {'ok', state} | {reason, until ms, transition, the endpoint's consecutive failed attempts}
const ADMIT = `
local now = tonumber(ARGV[1])
local token = ARGV[2]
local expiry = tonumber(ARGV[3])
local minCap, maxCap = tonumber(ARGV[4]), tonumber(ARGV[5])
local slowMs, interval, far = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local st = redis.call('HMGET', KEYS[1], 'state', 'until', 'limit', 'next_send', 'probe', 'prober_until', 'failures')
local state = st[1] or 'closed'
local untilMs = tonumber(st[2] or '0')
local transition = ''
local function wait(reason, at)
  return {reason, tostring(at), transition, st[7] or '0'}
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
  -- The cap's ceiling falls when a worker leaves: a limit raised before is held to it.
  local limit = math.min(maxCap, tonumber(st[3] or minCap))
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
      if now < tonumber(reserved) then return wait('rate_limit', reserved) end
      redis.call('HDEL', KEYS[1], 'r:' .. token)
    else
      local nextSend = tonumber(st[4] or '0')
      if now < nextSend then
        redis.call('HSET', KEYS[1], 'next_send', nextSend + interval, 'r:' .. token, nextSend)
        return wait('rate_limit', nextSend)
      end
      redis.call('HSET', KEYS[1], 'next_send', now + interval)
    end
  end
end
redis.call('ZADD', KEYS[2], expiry, token)
redis.call('ZREM', KEYS[3], token)
redis.call('PEXPIRE', KEYS[1], far * 4)
-- Never before the slot just taken expires (an issue export's slot spans many requests).
redis.call('PEXPIRE', KEYS[2], math.max(far * 4, expiry - now))
return {'ok', '0', transition}
`;

// After a held-back delivery's job is delayed: it waits to be woken. If what it waited for is already over (a slot
// freed, the breaker closed, between the decision and now), it is told to wake itself; so no wake-up is lost.
// KEYS as ADMIT. ARGV: now, token, wake ms, reason. Returns 1 to wake now, 0 to wait.
const PARK = `
local now = tonumber(ARGV[1])
redis.call('ZADD', KEYS[3], tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[3], 3600000)
local st = redis.call('HMGET', KEYS[1], 'state', 'limit')
local state = st[1] or 'closed'
if ARGV[4] == 'breaker_open' then
  if state == 'closed' then redis.call('ZREM', KEYS[3], ARGV[3]) return 1 end
  return 0
end
if state == 'closed' and redis.call('ZCARD', KEYS[2]) < tonumber(st[2] or '1') then
  redis.call('ZREM', KEYS[3], ARGV[3])
  return 1
end
return 0
`;

// KEYS as ADMIT. ARGV: now, token, signal (success|unreachable|answered), min cap, max cap, failures to open,
// far wake ms, fast (1: the attempt took less than the slow threshold), open periods (ms) of trips 1..n.
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
    local period = tonumber(ARGV[8 + math.min(trips, #ARGV - 8)])
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
-- Only quick successes raise the cap: a slow receiver stays at the minimum.
if signal == 'success' and ARGV[8] == '1' then limit = math.min(maxCap, limit + 1) end
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

// Deliveries enqueued while the subscription row shows the breaker open: their jobs were added already delayed to a
// far wake-up, and join the waiting set here, so that the breaker's closing wakes them and no worker touches them
// meanwhile. If no delivery has been chosen to probe since the breaker opened, the first of them is.
// KEYS as ADMIT. ARGV: now, far wake ms, ids... Returns {'go', '0', ''} when the breaker is not open after all
// (closed, or due for its probe: the workers' admission decides), else {'wait', probe time ms, prober id or ''}.
const HOLD = `
local now, far = tonumber(ARGV[1]), tonumber(ARGV[2])
local st = redis.call('HMGET', KEYS[1], 'state', 'until', 'prober_until')
local state = st[1] or 'closed'
local untilMs = tonumber(st[2] or '0')
if state == 'closed' or (state == 'open' and now >= untilMs) then return {'go', '0', ''} end
local prober = ''
if state == 'open' and tonumber(st[3] or '0') ~= untilMs then
  redis.call('HSET', KEYS[1], 'prober_until', untilMs)
  prober = ARGV[3]
end
local wake = untilMs
if state ~= 'open' then wake = now end
for i = 3, #ARGV do
  if ARGV[i] == prober then redis.call('ZADD', KEYS[3], untilMs, ARGV[i])
  else redis.call('ZADD', KEYS[3], wake + far, ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[3], 3600000)
return {'wait', tostring(wake), prober}
`;

// The live workers and their slots (WORKER_CONCURRENCY), for a cap that follows them: each worker renews its entry
// (a sorted set member "id:slots", scored by when it lapses) and reads the others'. The time is Redis's own, not
// the workers': a worker whose clock runs ahead would otherwise keep a dead entry (and its slots) for that long, and
// an entry lapsing later than any renewal can set was not written here: dropped.
// KEYS: 1 workers (zset). ARGV: member, lapse ms. Returns the live members.
const WORKERS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lapse = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now + lapse), '+inf')
redis.call('ZADD', KEYS[1], string.format('%d', now + lapse), ARGV[1])
redis.call('PEXPIRE', KEYS[1], lapse)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`;

/** How often a worker renews its entry among the live workers, and how long an entry lasts unrenewed. */
const WORKER_RENEW_MS = 1_000;
const WORKER_LAPSE_MS = 5 * WORKER_RENEW_MS;
/** How long close() waits for Redis to take its goodbye. */
const CLOSE_WAIT_MS = 1_000;

/** A live worker's slots from its entry "id:slots": a positive integer as a worker writes it, else none (0). */
function slotsOf(member: string): number {
  const slots = member.slice(member.lastIndexOf(':') + 1);
  return /^[1-9][0-9]{0,5}$/.test(slots) ? Number(slots) : 0;
}

/** Where one subscription's isolation state lives (the id a hash tag: one Cluster slot per subscription). */
export function isolationKeys(prefix: string, subscriptionId: string): [string, string, string] {
  const base = `${prefix}:iso:{${subscriptionId}}`;
  return [`${base}:state`, `${base}:inflight`, `${base}:waiting`];
}

export type Admission =
  | { admitted: true; transition: BreakerState | null }
  | {
      admitted: false;
      reason: WaitReason;
      until: Date;
      transition: BreakerState | null;
      /** The endpoint's consecutive failed attempts (timeouts, connection failures) when it was held back. */
      endpointFailures: number;
    };

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

/** What joinWorkers tells of its registrations among the live workers (for the worker's log). */
export interface WorkerMembershipEvents {
  /** A registration failed: the first of a streak (the next are not told until one has gone through). */
  failing?: (err: unknown) => void;
  /** A registration went through after a streak of failures. */
  recovered?: () => void;
}

export interface SubscriptionRef {
  id: string;
  rateLimit: number | null;
}

type IsolationRedis = Redis & {
  isolationAdmit(k1: string, k2: string, k3: string, ...argv: Array<string | number>): Promise<string[]>;
  isolationRelease(k1: string, k2: string, k3: string, ...argv: Array<string | number>): Promise<Array<string | null>>;
  isolationPark(k1: string, k2: string, k3: string, ...argv: Array<string | number>): Promise<number>;
  isolationWorkers(k1: string, ...argv: Array<string | number>): Promise<string[]>;
};

export class IsolationState {
  private readonly redis: IsolationRedis;
  private readonly periods: number[];
  /** The cap's ceiling: rules.maxInFlight, or every live worker's slots together (joinWorkers). */
  private maxInFlight: number;
  private membership: { member: string; timer: NodeJS.Timeout } | null = null;

  constructor(
    redis: Redis,
    private readonly prefix: string,
    private readonly rules: IsolationRules,
    /** How long an admitted attempt may hold its in-flight slot (the attempt timeout plus a margin). */
    private readonly slotMs: number,
  ) {
    redis.defineCommand('isolationAdmit', { numberOfKeys: 3, lua: ADMIT });
    redis.defineCommand('isolationRelease', { numberOfKeys: 3, lua: RELEASE });
    redis.defineCommand('isolationPark', { numberOfKeys: 3, lua: PARK });
    redis.defineCommand('isolationWorkers', { numberOfKeys: 1, lua: WORKERS });
    this.redis = redis as IsolationRedis;
    this.periods = breakerOpenPeriodsMs(rules);
    this.maxInFlight = rules.maxInFlight;
  }

  /**
   * Counts this worker's `slots` among the live workers' while it runs; when the rules say the cap follows the
   * workers, the cap's ceiling becomes their slots together (never below rules.maxInFlight). A cap below the
   * workers' slots made a lone busy subscription's surplus jobs churn: fetched, held back, woken, fetched again.
   *
   * The registration is renewed every second for as long as the worker runs, whatever happens; meanwhile the ceiling
   * stays as last seen (one worker's share if no registration ever went through). `events.failing` is called once per
   * streak of failures: at the first registration that fails (an error, or no answer within the lapse of an entry:
   * with Redis away the command waits in the connection's queue), and not again until one has gone through, which
   * `events.recovered` says. Resolves once the first registration went through or failed; never rejects.
   */
  async joinWorkers(workerId: string, slots: number, events: WorkerMembershipEvents = {}): Promise<void> {
    if (!this.rules.maxInFlightFollowsWorkers || this.membership) return;
    const member = `${workerId}:${slots}`;
    let failing = false;
    let waiting: Promise<void> | null = null;
    const tell = (listener: (() => void) | undefined) => {
      try {
        listener?.();
      } catch {
        // a listener's own failure is not the registration's
      }
    };
    const failed = (err: unknown) => {
      if (failing || this.membership?.member !== member) return; // a streak told already, or the worker has left
      failing = true;
      tell(() => events.failing?.(err));
    };
    const counted = (members: string[]) => {
      this.maxInFlight = Math.max(this.rules.maxInFlight, members.reduce((sum, m) => sum + slotsOf(m), 0));
      if (!failing) return;
      failing = false;
      tell(events.recovered);
    };
    const renew = (): Promise<void> => {
      // One registration at a time: while one waits for Redis, the next ticks do not queue more behind it.
      if (waiting) return waiting;
      let late: NodeJS.Timeout | undefined;
      // No answer within an entry's lapse: this worker is no longer counted, which is what a failure means here.
      const lapsed = new Promise<void>((resolve) => {
        late = setTimeout(() => {
          failed(new Error(`Redis did not answer within ${WORKER_LAPSE_MS} ms`));
          resolve();
        }, WORKER_LAPSE_MS);
        late.unref();
      });
      const answered = Promise.resolve()
        .then(() => this.redis.isolationWorkers(`${this.prefix}:iso:workers`, member, WORKER_LAPSE_MS))
        .then(counted)
        .catch(failed)
        .finally(() => {
          clearTimeout(late);
          waiting = null;
        });
      waiting = Promise.race([answered, lapsed]);
      return waiting;
    };
    const timer = setInterval(() => void renew(), WORKER_RENEW_MS);
    timer.unref();
    this.membership = { member, timer };
    await renew();
  }

  private keys(subscriptionId: string): [string, string, string] {
    return isolationKeys(this.prefix, subscriptionId);
  }

  private get farWakeMs(): number {
    return farWakeMs(this.rules);
  }

  /**
   * Admits attempt `token` on `subscription`, or says why and until when it waits. `slotMs` is how long its slot may
   * be held (a worker that dies mid-attempt frees it then); every attempt on one key must use the same (the slow
   * attempt check reads each slot's start off its expiry).
   */
  async admit(subscription: SubscriptionRef, token: string, now: Date, slotMs = this.slotMs): Promise<Admission> {
    const t = now.getTime();
    const interval = subscription.rateLimit ? Math.ceil(1000 / subscription.rateLimit) : 0;
    const [reason, until, transition, failures] = await this.redis.isolationAdmit(
      ...this.keys(subscription.id),
      t,
      token,
      t + slotMs,
      this.rules.minInFlight,
      this.maxInFlight,
      this.rules.slowAttemptMs,
      interval,
      this.farWakeMs,
    );
    const moved = transition ? (transition as BreakerState) : null;
    if (reason === 'ok') return { admitted: true, transition: moved };
    return {
      admitted: false,
      reason: reason as WaitReason,
      until: new Date(Number(until)),
      transition: moved,
      endpointFailures: Number(failures ?? 0),
    };
  }

  /** Frees the slot of an attempt and moves the breaker and the cap by its outcome. */
  async release(subscriptionId: string, token: string, outcome: string, durationMs: number, now: Date): Promise<Release> {
    const r = this.rules;
    const [transition, until, ...ids] = await this.redis.isolationRelease(
      ...this.keys(subscriptionId),
      now.getTime(),
      token,
      breakerSignalOf(outcome),
      r.minInFlight,
      this.maxInFlight,
      r.breakerFailures,
      this.farWakeMs,
      durationMs < r.slowAttemptMs ? 1 : 0,
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

  /**
   * Registers a held-back delivery (its job already delayed until `wakeAt`) as waiting for a slot or for the breaker
   * to close. True: what it waited for is over already, wake it now.
   */
  async park(subscriptionId: string, token: string, reason: WaitReason, wakeAt: Date, now: Date): Promise<boolean> {
    if (reason === 'rate_limit') return false; // its send time is reserved: it comes back exactly then
    return (await this.redis.isolationPark(...this.keys(subscriptionId), now.getTime(), wakeAt.getTime(), token, reason)) === 1;
  }

  /**
   * Leaves the live workers and closes the connection. With Redis away the goodbye would wait in the connection's
   * queue for as long as Redis is away, holding up the worker's shutdown: after CLOSE_WAIT_MS the connection is
   * dropped instead (this worker's entry then lapses by itself within WORKER_LAPSE_MS).
   */
  async close(): Promise<void> {
    const membership = this.membership;
    this.membership = null;
    if (membership) clearInterval(membership.timer);
    const goodbye = async () => {
      if (membership) await this.redis.zrem(`${this.prefix}:iso:workers`, membership.member).catch(() => undefined);
      await this.redis.quit();
    };
    await withTimeout(goodbye, CLOSE_WAIT_MS).catch(() => this.redis.disconnect());
  }

  /** A slot given back without an attempt (the delivery was not sent after all). */
  async abandon(subscriptionId: string, token: string): Promise<void> {
    await this.redis.zrem(this.keys(subscriptionId)[1], token);
  }
}

/** A batch of deliveries enqueued behind an open breaker: held (waiting to be woken), or to go after all. */
export type EnqueueHold = { held: false } | { held: true; probeAt: Date; prober: string | null };

type HoldRedis = {
  defineCommand(name: string, definition: { numberOfKeys: number; lua: string }): void;
  isolationHold?(k1: string, k2: string, k3: string, ...argv: Array<string | number>): Promise<string[]>;
};
const holdDefined = new WeakSet<object>();

/**
 * Registers deliveries of one subscription, whose jobs were just added delayed to `farWakeMs` after the probe time,
 * as waiting for its breaker to close. `prober`: the one to bring forward to the probe time.
 */
export async function holdBehindOpenBreaker(
  redis: Redis,
  prefix: string,
  subscriptionId: string,
  deliveryIds: string[],
  rules: Pick<IsolationRules, 'breakerMaxOpenMs'>,
  now: Date,
): Promise<EnqueueHold> {
  const client = redis as unknown as HoldRedis;
  if (!holdDefined.has(client)) {
    client.defineCommand('isolationHold', { numberOfKeys: 3, lua: HOLD });
    holdDefined.add(client);
  }
  const [verdict, probeAt, prober] = await client.isolationHold!(
    ...isolationKeys(prefix, subscriptionId),
    now.getTime(),
    farWakeMs(rules),
    ...deliveryIds,
  );
  if (verdict !== 'wait') return { held: false };
  return { held: true, probeAt: new Date(Number(probeAt)), prober: prober || null };
}
