import { DEFAULT_BACKOFF, MAX_ATTEMPTS, nominalRetryDelayMs, retryDelayMs, shouldRetry } from './backoff';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

describe('backoff', () => {
  it('follows 30 s, 2 m, 8 m, 32 m, 2 h 8 m, 6 h, 6 h without jitter', () => {
    const noJitter = { jitter: 0 };
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(n, noJitter))).toEqual([
      30 * SECOND,
      2 * MINUTE,
      8 * MINUTE,
      32 * MINUTE,
      2 * HOUR + 8 * MINUTE,
      6 * HOUR,
      6 * HOUR,
    ]);
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => nominalRetryDelayMs(n))).toEqual([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelayMs(n, noJitter)));
  });

  it('applies +-20 % jitter from the injected random source', () => {
    for (let n = 1; n <= 7; n += 1) {
      const nominal = nominalRetryDelayMs(n);
      expect(retryDelayMs(n, { random: () => 0 })).toBe(Math.round(nominal * 0.8));
      expect(retryDelayMs(n, { random: () => 0.5 })).toBe(nominal);
      const high = retryDelayMs(n, { random: () => 0.999999999 });
      expect(high).toBeLessThanOrEqual(Math.round(nominal * 1.2));
      expect(high).toBeGreaterThan(nominal * 1.19);
    }
    expect(retryDelayMs(1, { random: () => 0 })).toBe(24 * SECOND);
    expect(retryDelayMs(1, { random: () => 0.75 })).toBe(33 * SECOND);
    expect(retryDelayMs(7, { random: () => 0 })).toBe(4.8 * HOUR);
  });

  it('stays within bounds for many random draws', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 500; i += 1) {
      const n = (i % 7) + 1;
      const nominal = nominalRetryDelayMs(n);
      const delay = retryDelayMs(n, { random });
      expect(Number.isInteger(delay)).toBe(true);
      expect(delay).toBeGreaterThanOrEqual(Math.round(nominal * 0.8));
      expect(delay).toBeLessThanOrEqual(Math.round(nominal * 1.2));
    }
  });

  it('honours shrunk settings for tests', () => {
    expect([1, 2, 3, 4].map((n) => retryDelayMs(n, { baseMs: 10, maxMs: 500, jitter: 0 }))).toEqual([10, 40, 160, 500]);
    expect(retryDelayMs(3, { baseMs: 100, factor: 2, jitter: 0 })).toBe(400);
  });

  it('refuses bad input', () => {
    expect(() => retryDelayMs(0)).toThrow(RangeError);
    expect(() => retryDelayMs(1.5)).toThrow(RangeError);
    expect(() => retryDelayMs(1, { jitter: 2 })).toThrow(RangeError);
    expect(() => retryDelayMs(1, { random: () => 1 })).toThrow(RangeError);
    expect(() => retryDelayMs(1, { baseMs: -1 })).toThrow(RangeError);
  });

  it('allows 8 attempts in all', () => {
    expect(MAX_ATTEMPTS).toBe(8);
    expect(DEFAULT_BACKOFF).toEqual({ baseMs: 30000, factor: 4, maxMs: 21600000, jitter: 0.2 });
    for (let made = 0; made < 8; made += 1) expect(shouldRetry(made)).toBe(true);
    expect(shouldRetry(8)).toBe(false);
    expect(shouldRetry(9)).toBe(false);
    expect(shouldRetry(-1)).toBe(false);
    expect(shouldRetry(Number.NaN)).toBe(false);
  });
});
