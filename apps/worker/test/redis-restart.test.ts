// A Redis restart in the middle of a backlog (issue 35, docs/operations.md "Outages" and "Delivery isolation"). The API and two
// workers run on a redis-server of this test's own with an append-only file; the retry schedule is compressed
// (backoff 200-2000 ms: the 8 attempts span 13 s) and the receiver is healthy but served two attempts at a time
// (the in-flight cap). Redis is killed mid-drain and started again 7 s later: it comes back with its data, including
// the slots of the attempts that were in flight, which stay taken until they expire. Deliveries waiting for the cap
// wait their turn however long that takes: every one is attempted and delivered, none fails "held back", and the
// subscription stays active. /readyz answers 200 again soon after Redis answers (the client retries 500 ms apart).
import { Redis } from 'ioredis';
import { startPrivateRedis, type PrivateRedis } from '../../../test-support/private-services';
import { startWorker, type RunningWorker } from '../src/worker';
import { createWorld, poll, type World } from './support/world';

const BACKLOG = 160;
const OUTAGE_MS = 7_000;

let redis: PrivateRedis;
let w: World;
let second: RunningWorker;

beforeAll(async () => {
  redis = await startPrivateRedis({ appendOnly: true });
  w = await createWorld({
    env: {
      REDIS_URL: redis.url,
      WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      WEBHOOK_MAX_ATTEMPTS: '8',
      WEBHOOK_BACKOFF_BASE_MS: '200',
      WEBHOOK_BACKOFF_MAX_MS: '2000',
      WEBHOOK_TIMEOUT_MS: '2000',
      // The cap binds: two attempts of the subscription at a time, across both workers.
      WEBHOOK_MIN_IN_FLIGHT: '2',
      WEBHOOK_MAX_IN_FLIGHT: '2',
      READINESS_TIMEOUT_MS: '400',
      REDIS_COMMAND_TIMEOUT_MS: '400',
      OUTBOX_RELAY_INTERVAL_MS: '500',
      OUTBOX_RELAY_AGE_MS: '1000',
    },
    workerOptions: { schedule: true },
  });
  second = await startWorker(w.workerDeps, { schedule: false });
}, 60_000);

afterAll(async () => {
  await second?.close();
  await w?.close();
  await redis?.close();
}, 60_000);

/** Polls until `probe` is true, every 25 ms; resolves with the time (Date.now()) it first was. */
async function firstTime(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return Date.now();
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

it('delivers a whole backlog after a 7 s Redis restart with AOF, failing none for waiting, and is ready again within 10 s', async () => {
  const sub = await w.subscribe({ name: 'backlog', url: w.receiver.url('/backlog'), events: ['report.ready'] });
  w.receiver.script('/backlog', () => ({ status: 200, body: 'ok', delayMs: 100 }));
  const accepted: string[] = [];
  for (let i = 0; i < BACKLOG; i += 1) {
    accepted.push(await w.deliveryFor(await w.publish({ type: 'report.ready', data: { report_id: `rep_restart_${i}` } }), sub.id));
  }
  await w.receiver.waitForRequests('/backlog', 10, 20_000);
  expect((await w.api().get('/readyz')).status).toBe(200);

  await redis.stop();
  await new Promise((r) => setTimeout(r, OUTAGE_MS));
  expect((await w.api().get('/readyz')).status).toBe(503);
  const readyz = w.api.bind(w);
  const restarting = redis.start();
  const probe = new Redis(redis.url, { lazyConnect: true, retryStrategy: () => 25, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  probe.on('error', () => undefined);
  try {
    const [answering, ready] = await Promise.all([
      firstTime('Redis to answer PING', async () => {
        if (probe.status === 'wait') await probe.connect();
        return (await probe.ping()) === 'PONG';
      }, 30_000),
      firstTime('/readyz to answer 200', async () => (await readyz().get('/readyz')).status === 200, 30_000),
    ]);
    await restarting;
    // The API's client retries at most 500 ms apart (packages/queue retryStrategy, its numbers checked in
    // unavailable.test.ts), so readiness is back about half a second after Redis answers on an idle machine. Full
    // suites on 2 cores read 1,031 ms and 5,092 ms: the bound is issue 35's 10 s, which a client that stopped
    // reconnecting, or waited out the server's loading estimate, still fails.
    expect(ready - answering).toBeLessThanOrEqual(10_000);
  } finally {
    probe.disconnect();
  }

  const deliveries = await poll(
    () => w.h.deps.prisma.webhookDelivery.findMany({ where: { id: { in: accepted } }, select: { status: true, attemptCount: true, failureReason: true } }),
    (rows) => rows.every((d) => d.status !== 'pending'),
    150_000,
    'every delivery of the backlog to finish',
  );
  expect(deliveries.filter((d) => /held back/.test(d.failureReason ?? ''))).toEqual([]);
  expect(deliveries.filter((d) => d.status !== 'succeeded')).toEqual([]);
  expect(deliveries.every((d) => d.attemptCount >= 1)).toBe(true);
  const arrived = new Set(w.receiver.requests('/backlog').map((r) => r.headers['x-service-delivery']));
  expect(accepted.filter((id) => !arrived.has(id))).toEqual([]);
  expect((await w.subscription(sub.id)).status).toBe('active');
}, 240_000);
