// Time is a dependency so tests can move it (token expiry, secret rotation windows, SLAs, retry schedules).
// It must keep flowing: tests shift it, they never freeze it.
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
