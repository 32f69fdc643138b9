// The in-flight cap's default ceiling follows the live workers (docs/webhooks.md "Delivery isolation"): each worker's
// slots count while it runs, against the real Redis.
import { randomUUID } from 'node:crypto';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { loadConfig } from '@svc/config';
import { createRedis, IsolationState, isolationKeys } from './index';

const config = loadConfig();
const prefix = `test_iso_workers_${randomUUID()}`;
const rules = { minInFlight: 1, maxInFlight: 1, slowAttemptMs: 2_000, breakerFailures: 3, breakerOpenMs: 30_000, breakerMaxOpenMs: 600_000 };
const subscription = { id: `sub_${randomUUID()}`, rateLimit: null };

const states: IsolationState[] = [];
const isolation = (followsWorkers: boolean) => {
  const state = new IsolationState(createRedis(config.redis), prefix, { ...rules, maxInFlightFollowsWorkers: followsWorkers }, 15_000);
  states.push(state);
  return state;
};
const close = (state: IsolationState) => {
  states.splice(states.indexOf(state), 1);
  return state.close();
};
/** The keys this file made, under its own prefix, go with it. */
async function deletePrefix(): Promise<void> {
  const redis = createRedis(config.redis);
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  await redis.quit();
}
afterAll(async () => {
  await Promise.all([...states].map(close));
  await deletePrefix();
});

/** Admits `tokens` one after the other; answers which were admitted. */
async function admitted(state: IsolationState, tokens: string[]): Promise<string[]> {
  const ok: string[] = [];
  for (const token of tokens) if ((await state.admit(subscription, token, new Date())).admitted) ok.push(token);
  return ok;
}

it('lets a fast receiver grow to the slots of every live worker, and back to one worker\'s when the other leaves', async () => {
  const first = isolation(true);
  const second = isolation(true);
  await first.joinWorkers('w1', 1);
  await second.joinWorkers('w2', 1);
  await new Promise((resolve) => setTimeout(resolve, 1_200)); // the first worker renews its view: the second is in it
  // One quick success raises the limit from the minimum (1) to the ceiling (2 slots, two workers).
  expect(await admitted(first, ['a'])).toEqual(['a']);
  await first.release(subscription.id, 'a', 'success', 5, new Date());
  expect(await admitted(first, ['b', 'c', 'd'])).toEqual(['b', 'c']);
  await Promise.all(['b', 'c'].map((t) => first.release(subscription.id, t, 'success', 5, new Date())));

  await Promise.all([close(first), close(second)]);
  const last = isolation(true);
  await last.joinWorkers('w3', 1); // both left when they closed: its own slot is the ceiling, and the raised limit is held to it
  expect(await admitted(last, ['e', 'f'])).toEqual(['e']);
});

it('keeps a fixed ceiling when WEBHOOK_MAX_IN_FLIGHT is set', async () => {
  const fixed = isolation(false);
  const other = isolation(false);
  await fixed.joinWorkers('x1', 5);
  await other.joinWorkers('x2', 5);
  const sub = { id: `sub_${randomUUID()}`, rateLimit: null };
  expect((await fixed.admit(sub, 'p', new Date())).admitted).toBe(true);
  await fixed.release(sub.id, 'p', 'success', 5, new Date());
  expect((await fixed.admit(sub, 'q', new Date())).admitted).toBe(true);
  expect((await fixed.admit(sub, 'r', new Date())).admitted).toBe(false);
});

it('does not let an entry that no live worker keeps (a lapse far ahead, slots that are no count) raise the ceiling', async () => {
  const ownPrefix = `${prefix}_own`; // under the file's prefix: deleted with it
  const redis = createRedis(config.redis);
  try {
    // A worker whose clock runs an hour ahead (or any bogus writer) left these; neither is a live worker's share.
    await redis.zadd(`${ownPrefix}:iso:workers`, Date.now() + 3_600_000, 'ahead:1000', Date.now() + 4_000, 'bogus:Infinity');
    const state = new IsolationState(createRedis(config.redis), ownPrefix, { ...rules, maxInFlightFollowsWorkers: true }, 15_000);
    states.push(state);
    await state.joinWorkers('only', 1);
    const sub = { id: `sub_${randomUUID()}`, rateLimit: null };
    expect((await state.admit(sub, 'a', new Date())).admitted).toBe(true);
    await state.release(sub.id, 'a', 'success', 5, new Date());
    // One live worker with one slot: the ceiling is 1, whatever the other entries claim.
    const ok: string[] = [];
    for (const token of ['b', 'c']) if ((await state.admit(sub, token, new Date())).admitted) ok.push(token);
    expect(ok).toEqual(['b']);
  } finally {
    await redis.quit();
  }
});

describe('a registration that fails', () => {
  const unhandled: unknown[] = [];
  const note = (reason: unknown) => unhandled.push(reason);
  beforeAll(() => process.on('unhandledRejection', note));
  afterAll(() => process.off('unhandledRejection', note));
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  async function until(check: () => boolean, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check() && Date.now() < deadline) await sleep(50);
  }
  /** What joinWorkers told, in order. */
  const listener = (told: string[]) => ({
    failing: (err: unknown) => told.push(`failing: ${err instanceof Error ? err.message : String(err)}`),
    recovered: () => told.push('recovered'),
  });

  it('is told once per streak, retried every second, and told again when one goes through', async () => {
    // (A closed connection's disconnect waits disconnectTimeout for a socket long gone: short, so jest exits at once.)
    const redis = createRedis(config.redis, { disconnectTimeout: 100 });
    await redis.ping();
    const state = new IsolationState(redis, prefix, { ...rules, maxInFlightFollowsWorkers: true }, 15_000);
    states.push(state);
    const told: string[] = [];
    redis.disconnect(); // closed: every command fails at once
    await state.joinWorkers('flaky', 3, listener(told));
    expect(told).toEqual(['failing: Connection is closed.']);
    await sleep(2_500); // two more failed renewals: the same streak, not told again
    expect(told).toHaveLength(1);

    await redis.connect();
    await until(() => told.length > 1, 3_000);
    expect(told).toEqual(['failing: Connection is closed.', 'recovered']);
    const reader = createRedis(config.redis);
    expect(await reader.zrange(`${prefix}:iso:workers`, '0', '-1')).toContain('flaky:3');
    await reader.quit();

    redis.disconnect(); // a new streak: told again
    await until(() => told.length > 2, 3_000);
    expect(told).toEqual(['failing: Connection is closed.', 'recovered', 'failing: Connection is closed.']);
    expect(unhandled).toEqual([]);
  });

  /** An IsolationState on a server that accepts connections and never answers: the connection is never ready, and
   * its commands wait in its queue. */
  async function isolationOnTarpit() {
    const sockets = new Set<Socket>();
    const tarpit = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => tarpit.listen(0, '127.0.0.1', resolve));
    const redis = createRedis(`redis://127.0.0.1:${(tarpit.address() as AddressInfo).port}`, { disconnectTimeout: 100 });
    redis.on('error', () => undefined);
    const state = new IsolationState(redis, prefix, { ...rules, maxInFlightFollowsWorkers: true }, 15_000);
    const stopTarpit = async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => tarpit.close(resolve));
    };
    return { redis, state, stopTarpit };
  }

  it('closes within a second when Redis does not answer (a shutdown is not held up by its goodbye)', async () => {
    const { redis, state, stopTarpit } = await isolationOnTarpit();
    try {
      void state.joinWorkers('leaving', 2, {});
      await sleep(200);
      const started = Date.now();
      await state.close(); // before: the ZREM waited in the queue, and close() with it, for as long as Redis was away
      expect(Date.now() - started).toBeLessThan(2_500);
      await until(() => redis.status === 'end', 2_000); // the connection dropped, not left reconnecting
      expect(redis.status).toBe('end');
    } finally {
      await stopTarpit();
    }
    expect(unhandled).toEqual([]);
  }, 15_000);

  it('is told when Redis does not answer within an entry\'s lapse (the command waiting in the queue)', async () => {
    const { redis, state, stopTarpit } = await isolationOnTarpit();
    const told: string[] = [];
    try {
      await state.joinWorkers('unanswered', 2, listener(told));
      expect(told).toEqual(['failing: Redis did not answer within 5000 ms']);
      await sleep(1_500); // renewals still waiting: one at a time, and not told again
      expect(told).toHaveLength(1);
    } finally {
      redis.disconnect(); // the waiting command fails now: the same streak, not told
      await state.close();
      await stopTarpit();
    }
    await sleep(100);
    expect(told).toHaveLength(1);
    expect(unhandled).toEqual([]);
  }, 15_000);
});

it('an attempt that may hold its slot longer than the idle expiry (an issue export) keeps the cap full until its slot ends', async () => {
  const state = isolation(false);
  const longSubscription = { id: `iexp_${randomUUID()}`, rateLimit: null };
  const slotMs = 3 * 3600_000; // beyond the keys' idle expiry (4 x the far wake-up, 40 min here)
  expect((await state.admit(longSubscription, 'long', new Date(), slotMs)).admitted).toBe(true);
  const redis = createRedis(config.redis);
  try {
    const [, inFlight] = isolationKeys(prefix, longSubscription.id);
    expect(await redis.pttl(inFlight)).toBeGreaterThan(slotMs - 60_000);
  } finally {
    await redis.quit();
  }
  expect((await state.admit(longSubscription, 'second', new Date(), slotMs)).admitted).toBe(false);
});
