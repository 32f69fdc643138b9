// Delivery isolation (DESIGN.md "Delivery isolation"): the rules that keep one receiver's trouble its own. The
// worker keeps the shared state in Redis (apps/worker/src/isolation); the numbers and decisions it applies come from
// here. A postponement (waiting for a cap, a throttle or an open breaker) is not an attempt.
import { nominalRetryDelayMs, type RetryPolicy, DEFAULT_BACKOFF, MAX_ATTEMPTS } from './retry-policy';

export interface IsolationRules {
  /** Attempts in flight per subscription a new or struggling receiver gets. */
  minInFlight: number;
  /** The most attempts in flight per subscription, reached by receivers that answer fast. */
  maxInFlight: number;
  /**
   * maxInFlight is one worker's share (WEBHOOK_MAX_IN_FLIGHT not set): the cap is the slots of every live worker
   * together (at least maxInFlight).
   */
  maxInFlightFollowsWorkers?: boolean;
  /** An attempt in flight longer than this marks the receiver slow: its cap falls back to minInFlight. */
  slowAttemptMs: number;
  /** Consecutive timeouts or connection failures that open the breaker. */
  breakerFailures: number;
  /** First open period; each further trip doubles it, up to breakerMaxOpenMs. */
  breakerOpenMs: number;
  breakerMaxOpenMs: number;
}

export const DEFAULT_ISOLATION_RULES: Readonly<IsolationRules> = Object.freeze({
  minInFlight: 4,
  maxInFlight: 32,
  slowAttemptMs: 2_000,
  breakerFailures: 3,
  breakerOpenMs: 30_000,
  breakerMaxOpenMs: 10 * 60_000,
});

export type BreakerState = 'closed' | 'open' | 'half_open';
export type WaitReason = 'breaker_open' | 'in_flight_cap' | 'rate_limit';
export const WAIT_REASONS: readonly WaitReason[] = ['breaker_open', 'in_flight_cap', 'rate_limit'];

/** How an attempt's outcome moves the breaker and the in-flight cap. */
export type BreakerSignal = 'success' | 'unreachable' | 'answered';

/**
 * Timeouts and connection failures (refused, reset) say the receiver is unreachable: they open the breaker. A TLS
 * failure (an untrusted certificate) is fast and says the receiver is there but misconfigured: it is retried. A
 * response of any status says it is there (a 503 is retried with backoff, not postponed); a success also lets its
 * cap grow.
 */
export function breakerSignalOf(outcome: string): BreakerSignal {
  if (outcome === 'success') return 'success';
  if (outcome === 'timeout' || outcome === 'network_error') return 'unreachable';
  return 'answered';
}

/**
 * How long a delivery held back behind an open breaker sleeps before it looks again, unless the breaker's closing
 * wakes it first (at least one longest open period: a delivery does not wake to find the breaker still open).
 */
export function farWakeMs(rules: Pick<IsolationRules, 'breakerMaxOpenMs'>): number {
  return Math.max(10 * 60_000, rules.breakerMaxOpenMs);
}

/** The open period after trip n (1-based): breakerOpenMs x 2^(n-1), capped. */
export function breakerOpenPeriodMs(trip: number, rules: Pick<IsolationRules, 'breakerOpenMs' | 'breakerMaxOpenMs'>): number {
  if (!Number.isInteger(trip) || trip < 1) throw new RangeError(`trip must be an integer >= 1, got ${trip}`);
  return Math.min(rules.breakerOpenMs * 2 ** Math.min(trip - 1, 30), rules.breakerMaxOpenMs);
}

/** The open periods of trips 1..n, for the Redis script (the last one repeats beyond n). */
export function breakerOpenPeriodsMs(rules: IsolationRules, n = 16): number[] {
  return Array.from({ length: n }, (_, i) => breakerOpenPeriodMs(i + 1, rules));
}

/**
 * The window a delivery's attempts would span at the longest: every backoff wait between its attempts at the top of
 * its jitter. A delivery still held back by an open breaker past it fails terminally (its backlog stays bounded).
 */
export function retryWindowMs(policy: RetryPolicy = {}): number {
  const maxAttempts = policy.maxAttempts ?? MAX_ATTEMPTS;
  const jitter = policy.jitter ?? DEFAULT_BACKOFF.jitter;
  let total = 0;
  for (let n = 1; n < maxAttempts; n += 1) total += nominalRetryDelayMs(n, policy);
  return Math.round(total * (1 + jitter));
}

/** When a delivery created at `createdAt` stops being postponed and fails instead. */
export function holdBackDeadline(createdAt: Date, policy: RetryPolicy = {}): Date {
  return new Date(createdAt.getTime() + retryWindowMs(policy));
}

export type PostponeDecision =
  | { action: 'postpone'; until: Date }
  | { action: 'fail'; detail: string; countsForHealth: boolean };

/** What is holding a delivery back, as the shared isolation state saw it at admission. */
export interface HoldBack {
  reason: WaitReason;
  /** When to look again. */
  until: Date;
  /** The endpoint's own consecutive failed attempts (timeouts, refused or reset connections) at the time. */
  endpointFailures: number;
}

/**
 * A delivery the isolation holds back (DESIGN.md "Delivery isolation", amended 2026-11-26). Only an open breaker
 * (the endpoint itself failing) bounds the wait: postponed no later than the deadline its attempts would have spanned,
 * and failed terminally once that has passed. One waiting for the in-flight cap or the throttle waits its turn,
 * however long: the cap and the throttle postpone only while that receiver is being served, and after an outage of
 * the service's own (a Redis restart that left slots taken until they expire) failing them punished a healthy
 * receiver. A held-back failure counts for the subscription's health only when the endpoint's last attempts failed.
 */
export function postponeOrFail(hold: HoldBack, createdAt: Date, now: Date, policy: RetryPolicy = {}): PostponeDecision {
  if (hold.reason !== 'breaker_open') return { action: 'postpone', until: hold.until };
  const deadline = holdBackDeadline(createdAt, policy);
  if (now.getTime() >= deadline.getTime()) {
    return {
      action: 'fail',
      detail: `held back (${hold.reason.replace(/_/g, ' ')}) past its retry window of ${describeDuration(retryWindowMs(policy))}`,
      countsForHealth: hold.endpointFailures > 0,
    };
  }
  return { action: 'postpone', until: hold.until.getTime() > deadline.getTime() ? deadline : hold.until };
}

/** 17.8 h, 12 min, 3 s: a duration as a person reads it in a failure reason. */
export function describeDuration(ms: number): string {
  if (ms >= 3_600_000) return `${Math.round(ms / 360_000) / 10} h`;
  if (ms >= 60_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 1000)} s`;
}

/** A wake-up spread over [0, spread) so that postponed deliveries do not all come back at one instant. */
export function wakeJitterMs(waitMs: number, random: () => number = Math.random): number {
  const spread = Math.min(Math.max(waitMs * 0.1, 50), 5_000);
  return Math.floor(random() * spread);
}

/** BullMQ's lowest priority number we hand out (1 is the highest after jobs with none). */
export const MAX_FAIR_SHARE_PRIORITY = 20;

/**
 * A fair share of a backlog: the BullMQ priority of a delivery from a subscription whose recent enqueue rate
 * (deliveries per second, this batch included) is `rate`. Up to `share` none (FIFO with everyone else); beyond it
 * 1, 2, 3, ... for each doubling, so a subscription importing thousands of findings goes behind every lighter one's
 * fresh events, and heavier backlogs behind lighter ones. A subscription whose deliveries the isolation is holding
 * back right now (`heldBack`: waiting for a slot, the breaker or the throttle) goes last whatever its rate: a worker
 * that fetched its delivery would only postpone it, and 25 dead endpoints at 20 deliveries/s each, every one under
 * the share, would otherwise stay FIFO with everyone's fresh events.
 */
export function fairSharePriority(rate: number, share: number, heldBack = false): number {
  if (!(share > 0)) return 0;
  if (heldBack) return MAX_FAIR_SHARE_PRIORITY;
  if (!(rate > share)) return 0;
  return Math.min(MAX_FAIR_SHARE_PRIORITY, 1 + Math.floor(Math.log2(rate / share)));
}
