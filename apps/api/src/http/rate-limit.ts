// Rate limits shared by every API instance through Redis (rate-limiter-flexible). Numbers: DESIGN.md.
// While Redis is down (docs/operations.md "Outages"): the per-credential request limit fails open to an in-memory limit of the
// same size per API instance, so reads that need only PostgreSQL keep working; the login, TOTP and password-reset limits,
// which stop password and code guessing and mail floods, fail closed (503) rather than let guessing run unlimited.
import { isIPv6 } from 'node:net';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { Coalescer, coalescerOf } from '@svc/db';
import { parseIpv6 } from '@svc/webhooks';
import { tooManyRequests, type HttpError } from './errors';

export interface RateLimiters {
  /** Requests per credential (or per client IP before authentication) and minute. */
  request: RateLimiterRedis;
  /** Login attempts per minute, counted per client IP and per e-mail (or known browser: login-devices.ts); password confirmations per session. */
  login: RateLimiterRedis;
  /** Wrong TOTP codes per partial token (for its whole life). */
  totpFailures: RateLimiterRedis;
  /** Password-reset requests an hour per e-mail address (hashed key). Each may send a mail. */
  passwordResetPerEmail: RateLimiterRedis;
  /** Password-reset requests an hour per client address. */
  passwordResetPerAddress: RateLimiterRedis;
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
  limits: {
    perMinute: number;
    loginPerMinute: number;
    totpMaxFailures: number;
    partialTokenTtlSeconds: number;
    passwordReset: { perEmailPerHour: number; perIpPerHour: number };
  },
): RateLimiters {
  const make = (name: string, points: number, duration: number, failOpen: boolean) =>
    redisRateLimiter(redis, prefix, { name, points, duration, failOpen });
  return {
    request: make('req', limits.perMinute, 60, true),
    login: make('login', limits.loginPerMinute, 60, false),
    totpFailures: make('totp', limits.totpMaxFailures, limits.partialTokenTtlSeconds, false),
    // Fail closed like the login limit: while Redis is down no reset mail goes out (every e-mail gets the same 503).
    passwordResetPerEmail: make('pwreset-email', limits.passwordReset.perEmailPerHour, 3600, false),
    passwordResetPerAddress: make('pwreset-ip', limits.passwordReset.perIpPerHour, 3600, false),
  };
}

/**
 * The rate-limit key of a client address. An IPv6 client counts by its /64: a single host is routinely given a
 * whole /64 and can send from any of its 2^64 addresses, so counting each address apart would not limit it at all.
 * An IPv4 client seen through IPv6 counts as its IPv4 address, however the address is spelled: IPv4-mapped
 * (`::ffff:192.0.2.1`, `::ffff:c000:201`, `0:0:0:0:0:ffff:192.0.2.1`) and translated by NAT64 / SIIT (`64:ff9b::/96`).
 * Their /64 would otherwise put every IPv4 client in one count, where one of them locks all the others out.
 */
export function clientAddressKey(raw: string | null | undefined): string {
  if (!raw) return 'ip:unknown';
  // A proxy may write the client's source port too (`192.0.2.1:51234`, `[2001:db8::1]:51234`): a new connection, a
  // new port, so the address alone is the client.
  const ip = /^\[([^\]]+)\](?::\d+)?$/.exec(raw)?.[1] ?? /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(raw)?.[1] ?? raw;
  const groups = isIPv6(ip) ? parseIpv6(ip.split('%')[0]!) : null;
  if (!groups) return `ip:${ip}`;
  const prefix96 = groups.slice(0, 6).join(':');
  // ::ffff:0:0/96 (IPv4-mapped) and 64:ff9b::/96 (NAT64 / SIIT)
  if (prefix96 === '0:0:0:0:0:65535' || prefix96 === '100:65435:0:0:0:0') {
    const [hi, lo] = [groups[6]!, groups[7]!];
    return `ip:${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return `ip6:${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
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

/**
 * consumeOrThrow for the limit every request goes through, one command per batch of concurrent requests: the
 * requests of one key in a batch consume their points together (`consume(key, n)`), and those past the limit, in
 * arrival order, get the 429. The same count as one command per request (a refused request consumes its point too);
 * publishing with 32 clients sent one script per request.
 */
export async function consumeOneOf(limiter: RateLimiterRedis, key: string): Promise<void> {
  const refused = await counterOf(limiter).run(key);
  if (refused) throw refused;
}

function counterOf(limiter: RateLimiterRedis): Coalescer<string, HttpError | null> {
  return coalescerOf(limiter, 'rate-limit', () => new Coalescer((keys: string[]) => verdictsOf(limiter, keys)));
}

/** Per key of the batch (in order): null when within the limit, else the 429. Store errors propagate (503). */
async function verdictsOf(limiter: RateLimiterRedis, keys: string[]): Promise<Array<HttpError | null>> {
  const counts = new Map<string, number>();
  for (const key of keys) counts.set(key, (counts.get(key) ?? 0) + 1);
  const after = new Map(await Promise.all([...counts].map(async ([key, n]) => [key, await consumed(limiter, key, n)] as const)));
  const taken = new Map<string, number>();
  return keys.map((key) => {
    const res = after.get(key)!;
    const nth = (taken.get(key) ?? 0) + 1;
    taken.set(key, nth);
    const before = res.consumedPoints - counts.get(key)!;
    return before + nth <= limiter.points ? null : tooManyRequests(retryAfterSeconds(res));
  });
}

async function consumed(limiter: RateLimiterRedis, key: string, points: number): Promise<RateLimiterRes> {
  try {
    return await limiter.consume(key, points);
  } catch (err) {
    if (err instanceof RateLimiterRes) return err;
    throw err;
  }
}

/** Points taken before a guess was checked (reserveGuess); `refund` gives them back when the guess was not wrong. */
export interface GuessReservation {
  refund(): Promise<void>;
}

// Gives a point back only to a count still live. rate-limiter-flexible's reward() recreates an expired key at -1 with
// a full window: a guess taken before the window ran out and given back after it bought the next window an extra one.
const REFUND_IF_LIVE = "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('DECRBY', KEYS[1], ARGV[1]) end return false";

async function refundPoint(limiter: RateLimiterRedis, key: string): Promise<void> {
  // The limiter's own client and key (RateLimiterRedis keeps the count as a plain integer under getKey(key)).
  const { client } = limiter as unknown as { client: Redis };
  await client.eval(REFUND_IF_LIVE, 1, limiter.getKey(key), 1);
}

/**
 * Takes one point on each key before a guess (a TOTP code) is checked, or throws the 429 when a key is used up (its
 * points taken back). Taken before the check, not after a wrong answer: concurrent guesses would otherwise all pass
 * a read-only check before the first failure is counted, and a burst would get as many guesses as requests. Only
 * wrong guesses keep their points: a right one, or a request refused before its guess was checked, calls `refund`.
 * A refund that fails leaves the point taken (the stricter side). Store errors propagate (503).
 */
export async function reserveGuess(limiter: RateLimiterRedis, keys: string[]): Promise<GuessReservation> {
  const taken: string[] = [];
  const refund = async () => {
    await Promise.all(taken.map((key) => refundPoint(limiter, key))).catch(() => undefined);
  };
  for (const key of keys) {
    const res = await consumed(limiter, key, 1);
    taken.push(key);
    if (res.consumedPoints > limiter.points) {
      await refund();
      throw tooManyRequests(retryAfterSeconds(res));
    }
  }
  return { refund };
}
