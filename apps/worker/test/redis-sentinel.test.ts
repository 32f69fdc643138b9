// The API and the worker on a Redis Sentinel set (REDIS_SENTINELS, REDIS_SENTINEL_MASTER_NAME): one master, one
// replica and three sentinels of the test's own. Failovers are forced while deliveries drain (SENTINEL FAILOVER;
// twenty in a row with the old master turned replica, then one with the old master killed) and events keep being
// accepted through them: every connection moves to the new master without a restart, delivery resumes within
// 10 s of each promotion, and every accepted delivery reaches the receiver (the outbox relay re-enqueues what a
// switch dropped). Last, the ioredis race that once left a connection ended for good (issue 35), made to happen.
import { Redis } from 'ioredis';
import { createRedis, redisReady } from '@svc/queue';
import { startSentinelSet, type SentinelSet } from '../../../test-support/redis-topologies';
import type { ReceivedRequest } from './support/receiver';
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

const ROUNDS = 20;
const PER_ROUND = 8;

it(`resumes delivery within 10 s of each of ${ROUNDS} failovers forced mid-drain, losing nothing`, async () => {
  const sub = await w.subscribe({ name: 'loop', url: w.receiver.url('/loop'), events: ['report.ready'] });
  w.receiver.script('/loop', () => ({ status: 200, body: 'ok', delayMs: 100 }));
  let published = 0;
  const publish = async () => {
    const event = await w.publish({ type: 'report.ready', data: { report_id: `rep_loop_${(published += 1)}` } });
    return w.deliveryFor(event, sub.id);
  };
  const accepted: string[] = [];
  const resumedWithinMs: number[] = [];
  /** From the FAILOVER command to 2 s after the promotion: where an attempt may be sent twice (at least once). */
  const switching: Array<{ from: number; to: number }> = [];
  const arrivedAfter = (at: number) => w.receiver.requests('/loop').filter((r) => r.at > at);

  for (let round = 0; round < ROUNDS; round += 1) {
    await sentinel.replicaInSync();
    const started = Date.now();
    const batch: string[] = [];
    for (let i = 0; i < PER_ROUND; i += 1) batch.push(await publish());
    await poll(async () => arrivedAfter(started), (rs) => rs.length > 0, 15_000, `round ${round}: the drain to start`);
    const from = Date.now();
    const { promotedAt } = await sentinel.failOver({ keepOldMaster: true, via: round % 3 });
    switching.push({ from, to: promotedAt + 2_000 });
    // Accepted right after the switch: there is always something left to deliver through the new master.
    for (let i = 0; i < 2; i += 1) batch.push(await publish());
    const resumed = await poll(async () => arrivedAfter(promotedAt), (rs) => rs.length > 0, 30_000, `round ${round}: delivery to resume`);
    resumedWithinMs.push(Math.min(...resumed.map((r) => r.at)) - promotedAt);
    await poll(
      () => w.h.deps.prisma.webhookDelivery.count({ where: { id: { in: batch }, status: 'pending' } }),
      (pending) => pending === 0,
      60_000,
      `round ${round}: its deliveries to finish`,
    );
    accepted.push(...batch);
  }

  expect(resumedWithinMs).toHaveLength(ROUNDS);
  expect(resumedWithinMs.filter((ms) => ms > 10_000)).toEqual([]);
  const deliveries = await w.h.deps.prisma.webhookDelivery.findMany({ where: { id: { in: accepted } }, select: { status: true } });
  expect(deliveries.filter((d) => d.status !== 'succeeded')).toEqual([]);
  const byDelivery = new Map<string, ReceivedRequest[]>();
  for (const r of w.receiver.requests('/loop')) {
    const id = String(r.headers['x-service-delivery']);
    byDelivery.set(id, [...(byDelivery.get(id) ?? []), r]);
  }
  expect(accepted.filter((id) => !byDelivery.has(id))).toEqual([]);
  // Sent twice only when its first attempt was in flight while a master switched (README: at least once).
  const twiceOutsideASwitch = [...byDelivery].filter(
    ([, rs]) => rs.length > 1 && !switching.some(({ from, to }) => rs[0].at >= from - 1_000 && rs[0].at <= to),
  );
  expect(twiceOutsideASwitch).toEqual([]);
}, 10 * 60_000);

it('delivers every accepted event across a failover forced mid-drain, without restarting anything', async () => {
  await sentinel.replicaInSync();
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

describe('a reconnection that a +switch-master interrupts (the ioredis race behind issue 35)', () => {
  let set: SentinelSet;
  const clients: Redis[] = [];
  beforeAll(async () => {
    set = await startSentinelSet('svc-race');
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await set?.close();
  });

  it('moves to the new master instead of ending with "Connection is closed"', async () => {
    const sentinels = set.sentinels.split(',').map((hostPort) => ({ host: '127.0.0.1', port: Number(hostPort.split(':')[1]) }));
    // A long sentinel command timeout holds the reconnection at a frozen sentinel for as long as the test needs.
    const connection = createRedis(
      { mode: 'sentinel', sentinels, masterName: set.masterName, sentinelTls: false, tls: false },
      { sentinelCommandTimeout: 60_000 },
    );
    clients.push(connection);
    connection.on('error', () => undefined);
    await redisReady(connection, 10_000);
    await connection.set('before', '1');
    await new Promise((r) => setTimeout(r, 500)); // its failover detector subscribes to every sentinel
    const oldMaster = await set.masterPort();

    // The server closes the connection (as Sentinel's CLIENT KILL or a dying master does); the reconnection asks
    // the first sentinel, which is frozen, so it waits there while the second sentinel fails the master over.
    set.pauseSentinel(0);
    const killer = new Redis(oldMaster, '127.0.0.1');
    clients.push(killer);
    await killer.call('CLIENT', 'KILL', 'TYPE', 'normal');
    await poll(async () => connection.status, (status) => status === 'connecting', 5_000, 'the reconnection to wait at the frozen sentinel');
    const failingOver = set.failOver({ keepOldMaster: true, via: 1 });
    const second = new Redis(sentinels[1].port, '127.0.0.1');
    clients.push(second);
    await poll(
      async () => Number(((await second.call('SENTINEL', 'get-master-addr-by-name', set.masterName)) as string[])[1]),
      (port) => port !== oldMaster,
      30_000,
      'the second sentinel to switch (and publish +switch-master)',
    );
    await new Promise((r) => setTimeout(r, 300));
    set.resumeSentinel(0);
    const { newMaster } = await failingOver;

    await poll(async () => connection.status, (status) => status === 'ready' || status === 'end', 10_000, 'the connection to settle');
    expect(connection.status).not.toBe('end');
    await expect(connection.set('after', '1')).resolves.toBe('OK');
    expect(await connection.config('GET', 'port')).toEqual(['port', String(newMaster)]);
  }, 90_000);
});
