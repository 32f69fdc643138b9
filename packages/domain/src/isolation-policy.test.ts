import { describeDuration, fairSharePriority, DEFAULT_ISOLATION_RULES, breakerOpenPeriodMs, breakerOpenPeriodsMs, breakerSignalOf, farWakeMs, holdBackDeadline, postponeOrFail, retryWindowMs, wakeJitterMs, type WaitReason } from './isolation-policy';

describe('breakerSignalOf', () => {
  it.each([
    ['success', 'success'],
    ['timeout', 'unreachable'],
    ['network_error', 'unreachable'],
    ['tls_error', 'answered'],
    ['http_error', 'answered'],
    ['redirect', 'answered'],
    ['token_error', 'answered'],
    ['payload_too_large', 'answered'],
  ])('%s -> %s', (outcome, signal) => expect(breakerSignalOf(outcome)).toBe(signal));
});

describe('breaker open periods', () => {
  const rules = { breakerOpenMs: 30_000, breakerMaxOpenMs: 600_000 };
  it('doubles per trip up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((t) => breakerOpenPeriodMs(t, rules))).toEqual([30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000]);
  });
  it('refuses a trip number below 1', () => {
    expect(() => breakerOpenPeriodMs(0, rules)).toThrow(RangeError);
    expect(() => breakerOpenPeriodMs(1.5, rules)).toThrow(RangeError);
  });
  it('lists the periods for the Redis script, ending at the cap', () => {
    const periods = breakerOpenPeriodsMs(DEFAULT_ISOLATION_RULES);
    expect(periods[0]).toBe(DEFAULT_ISOLATION_RULES.breakerOpenMs);
    expect(periods[periods.length - 1]).toBe(DEFAULT_ISOLATION_RULES.breakerMaxOpenMs);
  });
  it('does not overflow on huge trip counts', () => expect(breakerOpenPeriodMs(10_000, rules)).toBe(600_000));
});

describe('retry window', () => {
  it('spans the default 8 attempts: about 15 h with jitter at its top', () => {
    // 30 s + 2 m + 8 m + 32 m + 128 m + 6 h + 6 h = 14 h 50.5 m; x 1.2
    expect(retryWindowMs()).toBe(Math.round((30 + 120 + 480 + 1920 + 7680 + 21600 + 21600) * 1000 * 1.2));
  });
  it('follows the configured base, cap and attempts', () => {
    expect(retryWindowMs({ baseMs: 10, maxMs: 20, maxAttempts: 3, jitter: 0 })).toBe(30);
    expect(retryWindowMs({ maxAttempts: 1 })).toBe(0);
  });
  it('puts the deadline that far after creation', () => {
    const created = new Date('2026-11-24T00:00:00Z');
    expect(holdBackDeadline(created, { baseMs: 10, maxMs: 20, maxAttempts: 3, jitter: 0 }).getTime()).toBe(created.getTime() + 30);
  });
});

describe('postponeOrFail', () => {
  const policy = { baseMs: 1000, maxMs: 1000, maxAttempts: 3, jitter: 0 }; // window 2 s
  const created = new Date('2026-11-24T00:00:00Z');
  const at = (ms: number) => new Date(created.getTime() + ms);
  const hold = (reason: WaitReason, until: number, endpointFailures = 0) => ({ reason, until: at(until), endpointFailures });
  it('postpones until the asked time within the window', () => {
    expect(postponeOrFail(hold('breaker_open', 1500, 3), created, at(100), policy)).toEqual({ action: 'postpone', until: at(1500) });
  });
  it('never postpones a delivery behind an open breaker past the deadline', () => {
    expect(postponeOrFail(hold('breaker_open', 60_000, 3), created, at(100), policy)).toEqual({ action: 'postpone', until: at(2000) });
  });
  it('fails a delivery behind an open breaker once the deadline has passed, saying why, counting for health', () => {
    expect(postponeOrFail(hold('breaker_open', 3000, 3), created, at(2000), policy)).toEqual({
      action: 'fail',
      detail: 'held back (breaker open) past its retry window of 2 s',
      countsForHealth: true,
    });
  });
  it('does not count a held-back failure against an endpoint whose last attempts did not fail', () => {
    const decision = postponeOrFail(hold('breaker_open', 3000, 0), created, at(2000), policy);
    expect(decision).toMatchObject({ action: 'fail', countsForHealth: false });
  });
  it.each(['in_flight_cap', 'rate_limit'] as const)('never fails a delivery waiting for the %s, and lets it wait its turn', (reason) => {
    expect(postponeOrFail(hold(reason, 60_000), created, at(100), policy)).toEqual({ action: 'postpone', until: at(60_000) });
    expect(postponeOrFail(hold(reason, 90_000, 5), created, at(80_000), policy)).toEqual({ action: 'postpone', until: at(90_000) });
  });
});

describe('wakeJitterMs', () => {
  it('spreads over 10 % of the wait, at least 50 ms and at most 5 s', () => {
    expect(wakeJitterMs(10_000, () => 0.999)).toBe(999);
    expect(wakeJitterMs(100, () => 0.5)).toBe(25);
    expect(wakeJitterMs(10 * 60_000, () => 0.999)).toBe(4995);
    expect(wakeJitterMs(10_000, () => 0)).toBe(0);
  });
});

describe('fairSharePriority', () => {
  it('gives no priority up to the share, then one level per doubling, capped', () => {
    expect(fairSharePriority(1, 600)).toBe(0);
    expect(fairSharePriority(600, 600)).toBe(0);
    expect(fairSharePriority(601, 600)).toBe(1);
    expect(fairSharePriority(1199, 600)).toBe(1);
    expect(fairSharePriority(1200, 600)).toBe(2);
    expect(fairSharePriority(20_000, 600)).toBe(6);
    expect(fairSharePriority(1e12, 600)).toBe(20);
  });
  it('is off without a share', () => {
    expect(fairSharePriority(10_000, 0)).toBe(0);
    expect(fairSharePriority(10_000, 0, true)).toBe(0);
  });
  it('puts a subscription held back by the isolation last, whatever its rate', () => {
    expect(fairSharePriority(1, 600, true)).toBe(20);
    expect(fairSharePriority(0, 600, true)).toBe(20);
    expect(fairSharePriority(1e12, 600, true)).toBe(20);
  });
});

describe('describeDuration', () => {
  it('reads in hours, minutes or seconds', () => {
    expect(describeDuration(retryWindowMs())).toBe('17.8 h');
    expect(describeDuration(12 * 60_000 + 10_000)).toBe('12 min');
    expect(describeDuration(3_100)).toBe('3 s');
  });
});

describe('farWakeMs', () => {
  it('is 10 minutes, or the longest open period when that is longer', () => {
    expect(farWakeMs({ breakerMaxOpenMs: 60_000 })).toBe(600_000);
    expect(farWakeMs({ breakerMaxOpenMs: 3_600_000 })).toBe(3_600_000);
  });
});
