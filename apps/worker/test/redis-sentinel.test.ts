// The API and the worker on a Redis Sentinel set (REDIS_SENTINELS, REDIS_SENTINEL_MASTER_NAME): one master, one
// replica and three sentinels of the test's own. A failover is forced while deliveries drain (SENTINEL FAILOVER,
// then the old master is killed) and events keep being accepted through it: every connection moves to the new
// master without a restart, and every accepted delivery reaches the receiver (the outbox relay re-enqueues what the
// switch dropped).
import { startSentinelSet, type SentinelSet } from '../../../test-support/redis-topologies';
import { createWorld, poll, type World } from './support/world';

const BEFORE = 40;
const DURING = 20;

let sentinel: SentinelSet;
let w: World;

beforeAll(async () => {
  sentinel = await startSentinelSet();
  w = await createWorld({
    env: {
      REDIS_SENTINELS: sentinel.sentinels,
      REDIS_SENTINEL_MASTER_NAME: sentinel.masterName,
      OUTBOX_RELAY_INTERVAL_MS: '500',
      OUTBOX_RELAY_AGE_MS: '1000',
      WEBHOOK_MAX_ATTEMPTS: '8',
      // A drain slow enough for the failover to happen in its middle.
      WORKER_CONCURRENCY: '2',
    },
    workerOptions: { schedule: true },
  });
}, 60_000);

afterAll(async () => {
  await w?.close();
  await sentinel?.close();
});

it('connects the API and the worker to the master the sentinels name', async () => {
  expect(w.h.config.redis).toMatchObject({ mode: 'sentinel', masterName: sentinel.masterName });
  const port = await sentinel.masterPort();
  expect(await w.h.deps.redis.config('GET', 'port')).toEqual(['port', String(port)]);
});

it('delivers every accepted event across a failover forced mid-drain, without restarting anything', async () => {
  const sub = await w.subscribe({ name: 'failover', url: w.receiver.url('/failover'), events: ['report.ready'] });
  w.receiver.script('/failover', () => ({ status: 200, body: 'ok', delayMs: 300 }));
  const accepted: string[] = [];
  const publish = async (i: number) => {
    const published = await w.publish({ type: 'report.ready', data: { report_id: `rep_${i}` } });
    accepted.push(await w.deliveryFor(published, sub.id));
  };
  for (let i = 0; i < BEFORE; i += 1) await publish(i);
  await w.receiver.waitForRequests('/failover', 5);

  const failingOver = sentinel.failOver();
  for (let i = BEFORE; i < BEFORE + DURING; i += 1) {
    await publish(i);
    await new Promise((r) => setTimeout(r, 50));
  }
  const { oldMaster, newMaster } = await failingOver;
  expect(newMaster).not.toBe(oldMaster);
  // The old master died with deliveries still waiting in the queue.
  expect(w.receiver.requests('/failover').length).toBeLessThan(BEFORE + DURING);

  const deliveries = await poll(
    () => w.h.deps.prisma.webhookDelivery.findMany({ where: { id: { in: accepted } }, select: { id: true, status: true } }),
    (rows) => rows.every((d) => d.status !== 'pending'),
    90_000,
    'every accepted delivery to finish',
  );
  expect(deliveries).toHaveLength(BEFORE + DURING);
  expect(deliveries.filter((d) => d.status !== 'succeeded')).toEqual([]);
  const arrived = new Set(w.receiver.requests('/failover').map((r) => r.headers['x-service-delivery']));
  expect(accepted.filter((id) => !arrived.has(id))).toEqual([]);

  // The same API connection now talks to the promoted master.
  expect(await w.h.deps.redis.config('GET', 'port')).toEqual(['port', String(newMaster)]);
}, 150_000);
