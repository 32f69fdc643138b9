// Bounded exponential backoff of DESIGN.md: attempt n (1..7) is followed by a wait of
// min(base x factor^(n-1), max) with +-jitter: 30 s, 2 m, 8 m, 32 m, ~2 h 8 m, 6 h, 6 h. 8 attempts in all.
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
export function shouldRetry(attemptsMade: number): boolean {
  return Number.isInteger(attemptsMade) && attemptsMade >= 0 && attemptsMade < MAX_ATTEMPTS;
}

function stripUndefined<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>;
}
