// Rate limits shared by every API instance through Redis (rate-limiter-flexible). Numbers: DESIGN.md.
// While Redis is down (docs/operations.md "Outages"): the per-credential request limit fails open to an in-memory limit of the
// same size per API instance, so reads that need only PostgreSQL keep working; the login and TOTP limits, which
// stop password and code guessing, fail closed (503) rather than let guessing run unlimited.
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from './errors';

export interface RateLimiters {
  /** Requests per credential (or per client IP before authentication) and minute. */
  request: RateLimiterRedis;
  /** Login attempts per minute, counted per client IP and per e-mail. */
  login: RateLimiterRedis;
  /** Wrong TOTP codes per partial token (for its whole life). */
  totpFailures: RateLimiterRedis;
}

/**
 * One limit shared by every API instance: `points` per `duration` seconds per key, under `<prefix>:rl:<name>`.
 * failOpen: while Redis is down, an in-memory limit of the same size per instance; otherwise the request fails (503).
 */
export function redisRateLimiter(
  redis: Redis,
  prefix: string,
  limit: { name: string; points: number; duration: number; failOpen: boolean },
): RateLimiterRedis {
  const { name, points, duration, failOpen } = limit;
  return new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${prefix}:rl:${name}`,
    points,
    duration,
    // Do not wait for a reconnection: fall back (or fail) at once while Redis is not connected.
    rejectIfRedisNotReady: true,
    insuranceLimiter: failOpen ? new RateLimiterMemory({ keyPrefix: `${prefix}:rl:${name}`, points, duration }) : undefined,
  });
}

export function createRateLimiters(
  redis: Redis,
  prefix: string,
  limits: { perMinute: number; loginPerMinute: number; totpMaxFailures: number; partialTokenTtlSeconds: number },
): RateLimiters {
  const make = (name: string, points: number, duration: number, failOpen: boolean) =>
    redisRateLimiter(redis, prefix, { name, points, duration, failOpen });
  return {
    request: make('req', limits.perMinute, 60, true),
    login: make('login', limits.loginPerMinute, 60, false),
    totpFailures: make('totp', limits.totpMaxFailures, limits.partialTokenTtlSeconds, false),
  };
}

function retryAfterSeconds(res: RateLimiterRes): number {
  return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
}

/** Consumes one point; throws the 429 HttpError when the limit is exhausted. Store errors propagate (503). */
export async function consumeOrThrow(limiter: RateLimiterRedis, key: string): Promise<void> {
  try {
    await limiter.consume(key);
  } catch (err) {
    if (err instanceof RateLimiterRes) throw tooManyRequests(retryAfterSeconds(err));
    throw err;
  }
}

/** Throws 429 when the key has already used up its points, without consuming one. */
export async function throwIfExhausted(limiter: RateLimiterRedis, key: string): Promise<void> {
  const res = await limiter.get(key);
  if (res && res.remainingPoints <= 0 && res.consumedPoints >= limiter.points) throw tooManyRequests(retryAfterSeconds(res));
}
