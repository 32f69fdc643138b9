// The retry policy of webhook deliveries, the single source of the backoff schedule and the attempt limit
// (DESIGN.md "Delivery operations"). Given the attempt just made and what the receiver said, it decides: wait
// this long and try again, or stop and why. Bounded exponential backoff: attempt n (1..7) is followed by a wait
// of min(base x factor^(n-1), max) with +-jitter: 30 s, 2 m, 8 m, 32 m, ~2 h 8 m, 6 h, 6 h; 8 attempts in all.
// The jitter is applied after the cap, so a capped wait lies within [max x (1 - jitter), max x (1 + jitter)).

export const MAX_ATTEMPTS = 8;

export interface BackoffOptions {
  baseMs?: number;
  factor?: number;
  maxMs?: number;
  /** Fraction, 0..1: the wait is multiplied by a value in [1 - jitter, 1 + jitter). */
  jitter?: number;
  /** Returns a number in [0, 1); Math.random by default. */
  random?: () => number;
}

export const DEFAULT_BACKOFF = Object.freeze({
  baseMs: 30_000,
  factor: 4,
  maxMs: 6 * 3600 * 1000,
  jitter: 0.2,
});

function checkAttemptNumber(attemptNumber: number): void {
  if (!Number.isInteger(attemptNumber) || attemptNumber < 1) {
    throw new RangeError(`Attempt number must be an integer >= 1, got ${attemptNumber}`);
  }
}

/** The wait after attempt `attemptNumber` before jitter: min(base x factor^(n-1), max). */
export function nominalRetryDelayMs(attemptNumber: number, options: BackoffOptions = {}): number {
  checkAttemptNumber(attemptNumber);
  const { baseMs, factor, maxMs } = { ...DEFAULT_BACKOFF, ...stripUndefined(options) };
  if (!(baseMs >= 0) || !(factor >= 1) || !(maxMs >= 0)) {
    throw new RangeError('Backoff needs baseMs >= 0, factor >= 1 and maxMs >= 0');
  }
  return Math.min(baseMs * factor ** (attemptNumber - 1), maxMs);
}

/** The wait in whole milliseconds after attempt `attemptNumber` (1-based), jitter included. */
export function retryDelayMs(attemptNumber: number, options: BackoffOptions = {}): number {
  const nominal = nominalRetryDelayMs(attemptNumber, options);
  const jitter = options.jitter ?? DEFAULT_BACKOFF.jitter;
  if (!(jitter >= 0 && jitter <= 1)) {
    throw new RangeError('jitter must be between 0 and 1');
  }
  const random = options.random ?? Math.random;
  const r = random();
  if (!(r >= 0 && r < 1)) {
    throw new RangeError(`random() must return a number in [0, 1), got ${r}`);
  }
  return Math.round(nominal * (1 + jitter * (2 * r - 1)));
}

/** True while another attempt may be made after `attemptsMade` failed attempts. */
export function shouldRetry(attemptsMade: number, maxAttempts: number = MAX_ATTEMPTS): boolean {
  return Number.isInteger(attemptsMade) && attemptsMade >= 0 && attemptsMade < maxAttempts;
}

/** Statuses whose Retry-After header is honoured (RFC 9110 15.5.20 / 15.6.4). */
const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503]);

const DELTA_SECONDS = /^\d+$/;
// IMF-fixdate, the form RFC 9110 requires senders to use: "Sun, 06 Nov 1994 08:49:37 GMT".
const IMF_FIXDATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/**
 * The wait a Retry-After value asks for, in ms from `now`: delta-seconds or an HTTP-date (a date in the past asks
 * for no wait). Null when the value is absent or not one of those forms.
 */
export function retryAfterMs(value: string | null | undefined, now: Date): number | null {
  if (value === null || value === undefined) return null;
  const text = value.trim();
  if (DELTA_SECONDS.test(text)) {
    const seconds = Number(text);
    return Number.isSafeInteger(seconds * 1000) ? seconds * 1000 : null;
  }
  if (!IMF_FIXDATE.test(text)) return null;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now.getTime());
}

/** What the receiver said about the attempt that just failed. */
export interface ReceiverSignals {
  /** HTTP status, or null when there was no response (timeout, network, TLS, unsafe URL). */
  status: number | null;
  /** The raw Retry-After header value, if any. */
  retryAfter?: string | null;
  now: Date;
}

export interface RetryPolicy extends BackoffOptions {
  maxAttempts?: number;
}

export type StopReason = 'attempts_exhausted' | 'gone';

export type RetryDecision =
  | {
      action: 'retry';
      delayMs: number;
      /** The wait the receiver's Retry-After asked for (before the cap), when it was honoured. */
      retryAfterMs: number | null;
    }
  | { action: 'stop'; reason: StopReason; detail: string };

/**
 * After failed attempt `attemptNumber` (1-based): 410 Gone stops at once; the last allowed attempt stops; otherwise
 * the next attempt waits the normal backoff, or, on 429/503 with a valid Retry-After, no less than asked, capped
 * at the maximum backoff.
 */
export function nextAttempt(attemptNumber: number, signals: ReceiverSignals, policy: RetryPolicy = {}): RetryDecision {
  checkAttemptNumber(attemptNumber);
  const maxAttempts = policy.maxAttempts ?? MAX_ATTEMPTS;
  if (signals.status === 410) {
    return { action: 'stop', reason: 'gone', detail: 'the receiver answered 410 Gone' };
  }
  if (attemptNumber >= maxAttempts) {
    return { action: 'stop', reason: 'attempts_exhausted', detail: `all ${maxAttempts} attempts failed` };
  }
  const backoffMs = retryDelayMs(attemptNumber, policy);
  const asked = signals.status !== null && RETRY_AFTER_STATUSES.has(signals.status) ? retryAfterMs(signals.retryAfter, signals.now) : null;
  if (asked === null) return { action: 'retry', delayMs: backoffMs, retryAfterMs: null };
  const maxMs = policy.maxMs ?? DEFAULT_BACKOFF.maxMs;
  return { action: 'retry', delayMs: Math.min(Math.max(asked, backoffMs), maxMs), retryAfterMs: asked };
}

function stripUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
