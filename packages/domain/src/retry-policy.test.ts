import { DEFAULT_BACKOFF, MAX_ATTEMPTS, nextAttempt, retryAfterMs, shouldRetry } from './retry-policy';

const NOW = new Date('2026-11-22T12:00:00.000Z');
const noJitter = { jitter: 0 };
const at = (status: number | null, retryAfter?: string | null) => ({ status, retryAfter, now: NOW });

describe('retryAfterMs', () => {
  it.each([
    ['0', 0],
    ['2', 2000],
    [' 120 ', 120_000],
  ])('reads delta-seconds %p', (value, ms) => {
    expect(retryAfterMs(value, NOW)).toBe(ms);
  });

  it('reads an HTTP-date relative to now', () => {
    expect(retryAfterMs('Sun, 22 Nov 2026 12:00:05 GMT', NOW)).toBe(5000);
  });

  it('treats an HTTP-date in the past as no wait', () => {
    expect(retryAfterMs('Sun, 22 Nov 2026 11:00:00 GMT', NOW)).toBe(0);
  });

  it.each([null, undefined, '', '-1', '1.5', 'soon', '2s', '2026-11-22T12:00:05Z', 'Sunday, 22-Nov-26 12:00:05 GMT', 'Sun, 32 Nov 2026 12:00:05 GMT', '99999999999999999999'])(
    'rejects %p',
    (value) => {
      expect(retryAfterMs(value, NOW)).toBeNull();
    },
  );
});

describe('nextAttempt', () => {
  it('follows the normal backoff after an ordinary failure', () => {
    expect(nextAttempt(1, at(500), noJitter)).toEqual({ action: 'retry', delayMs: DEFAULT_BACKOFF.baseMs, retryAfterMs: null });
    expect(nextAttempt(3, at(null), noJitter)).toEqual({ action: 'retry', delayMs: 8 * 60_000, retryAfterMs: null });
  });

  it('stops after the last allowed attempt, default and configured', () => {
    expect(nextAttempt(MAX_ATTEMPTS, at(500))).toEqual({ action: 'stop', reason: 'attempts_exhausted', detail: `all ${MAX_ATTEMPTS} attempts failed` });
    expect(nextAttempt(MAX_ATTEMPTS - 1, at(500)).action).toBe('retry');
    expect(nextAttempt(2, at(500), { maxAttempts: 2 })).toMatchObject({ action: 'stop', reason: 'attempts_exhausted' });
    expect(nextAttempt(1, at(500), { maxAttempts: 2 }).action).toBe('retry');
  });

  it('stops at once on 410 Gone, even on the first attempt', () => {
    expect(nextAttempt(1, at(410))).toEqual({ action: 'stop', reason: 'gone', detail: 'the receiver answered 410 Gone' });
  });

  it.each([429, 503])('waits at least the Retry-After of a %i', (status) => {
    const policy = { baseMs: 100, jitter: 0 };
    expect(nextAttempt(1, at(status, '2'), policy)).toEqual({ action: 'retry', delayMs: 2000, retryAfterMs: 2000 });
    expect(nextAttempt(1, at(status, 'Sun, 22 Nov 2026 12:00:03 GMT'), policy)).toEqual({ action: 'retry', delayMs: 3000, retryAfterMs: 3000 });
  });

  it('never waits less than the normal backoff when Retry-After asks for less', () => {
    expect(nextAttempt(2, at(429, '1'), noJitter)).toEqual({ action: 'retry', delayMs: 2 * 60_000, retryAfterMs: 1000 });
  });

  it('caps the Retry-After wait at the maximum backoff', () => {
    expect(nextAttempt(1, at(503, String(48 * 3600)), noJitter)).toEqual({ action: 'retry', delayMs: DEFAULT_BACKOFF.maxMs, retryAfterMs: 48 * 3600_000 });
    expect(nextAttempt(1, at(503, '60'), { maxMs: 5000, jitter: 0 })).toMatchObject({ delayMs: 5000, retryAfterMs: 60_000 });
  });

  it.each([
    ['absent', undefined],
    ['invalid', 'later please'],
  ])('falls back to the normal backoff when Retry-After is %s', (_label, value) => {
    expect(nextAttempt(1, at(429, value), noJitter)).toEqual({ action: 'retry', delayMs: DEFAULT_BACKOFF.baseMs, retryAfterMs: null });
  });

  it.each([500, 502, 400, 301, null])('ignores Retry-After on a %p', (status) => {
    expect(nextAttempt(1, at(status, '3600'), noJitter)).toEqual({ action: 'retry', delayMs: DEFAULT_BACKOFF.baseMs, retryAfterMs: null });
  });

  it('keeps the normal delay inside the jitter band', () => {
    const low = nextAttempt(1, at(500), { random: () => 0 });
    const high = nextAttempt(1, at(500), { random: () => 0.999999 });
    expect(low).toMatchObject({ delayMs: DEFAULT_BACKOFF.baseMs * 0.8 });
    expect(high.action === 'retry' && high.delayMs).toBeLessThanOrEqual(DEFAULT_BACKOFF.baseMs * 1.2);
  });

  it.each([0, -1, 1.5, NaN])('refuses attempt number %p', (n) => {
    expect(() => nextAttempt(n, at(500))).toThrow(RangeError);
  });
});

describe('shouldRetry', () => {
  it('allows attempts below the limit only', () => {
    expect(shouldRetry(0)).toBe(true);
    expect(shouldRetry(MAX_ATTEMPTS - 1)).toBe(true);
    expect(shouldRetry(MAX_ATTEMPTS)).toBe(false);
    expect(shouldRetry(2, 3)).toBe(true);
    expect(shouldRetry(3, 3)).toBe(false);
    expect(shouldRetry(-1)).toBe(false);
  });
});
