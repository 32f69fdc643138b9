// The service on a three-master Redis Cluster (REDIS_CLUSTER_NODES) of the test's own: BullMQ's keys carry the
// hash tag `{<prefix>:bull}`, and every other key the service writes keeps each Lua script or transaction in one
// slot. The flows that use Redis run here against the cluster: deliveries (with a retry), the login and request
// rate limits, and the auth epochs that make every API instance drop a cached API key at once. Each master has a
// replica; the last test kills the master holding the queues mid-drain, and delivery resumes on its promoted replica.
import request from 'supertest';
import type { Cluster } from 'ioredis';
import { createApp, type App } from '../../api/src/app';
import { bullPrefix, deliveryJobOptions } from '@svc/queue';
import { fairSharePriorities, markHeldBack, publishEvent, relayOverdueDeliveries } from '@svc/outbox';
import { bearer } from '../../api/test/support/fixtures';
import { startRedisCluster, type RedisCluster } from '../../../test-support/redis-topologies';
import { createWorld, poll, type World } from './support/world';

let cluster: RedisCluster;
let w: World;
/** A second API instance over the same cluster, with its own API-key cache. */
let other: App;

beforeAll(async () => {
  cluster = await startRedisCluster({ replicas: true });
  w = await createWorld({
    env: {
      REDIS_CLUSTER_NODES: cluster.nodes,
      OUTBOX_RELAY_INTERVAL_MS: '500',
      OUTBOX_RELAY_AGE_MS: '1000',
      WORKER_CONCURRENCY: '2',
      LOGIN_RATE_LIMIT_PER_MINUTE: '3',
      RATE_LIMIT_PER_MINUTE: '1000',
      API_KEY_CACHE_TTL_SECONDS: '60',
    },
  });
  other = createApp(w.h.deps);
}, 60_000);

// Closing the world after the master kill: 0.3 s alone, 2.5 s with the cores busy. A queue client left reconnecting
// by the failover once kept BullMQ's close waiting for ever; once its jobs are done, the worker's close now gives
// BullMQ 5 s and cuts its connections (apps/worker/src/worker.ts).
afterAll(async () => {
  await w?.close();
  await cluster?.close();
}, 30_000);

it('puts every BullMQ key of the service under one hash tag', async () => {
  expect(w.h.config.redis.mode).toBe('cluster');
  expect(bullPrefix(w.h.config)).toBe(`{${w.h.config.redisPrefix}:bull}`);
});

it('delivers, and retries a failed attempt, through BullMQ on the cluster', async () => {
  const sub = await w.subscribe({ name: 'cluster', url: w.receiver.url('/cluster'), events: ['report.ready'] });
  w.receiver.script('/cluster', (_req, n) => (n === 1 ? { status: 503 } : { status: 200, body: 'ok' }));
  const first = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_1' } });
  expect(first).toMatchObject({ status: 'succeeded', attemptCount: 2 });
  const more = await Promise.all(
    [2, 3, 4, 5].map((i) => w.publishTo(sub.id, { type: 'report.ready', data: { report_id: `rep_${i}` } })),
  );
  expect(more.map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
  expect(w.receiver.requests('/cluster')).toHaveLength(6);

  // BullMQ's keys all sit on the one master that owns the tag's slot.
  const masters = (w.h.deps.redis as unknown as Cluster).nodes('master');
  const perMaster = await Promise.all(masters.map((node) => node.keys(`${bullPrefix(w.h.config)}:*`)));
  expect(perMaster.filter((keys) => keys.length > 0)).toHaveLength(1);
});

it("counts an enqueued batch's subscriptions and reads their held-back marks in one script on the cluster", async () => {
  // Their keys share the queue's slot; a subscription a worker is holding back goes last, a burst behind by its rate.
  await markHeldBack(w.h.deps.redis, bullPrefix(w.h.config), 'whsub_cluster_held');
  const counts = new Map([['whsub_cluster_calm', 1], ['whsub_cluster_held', 1], ['whsub_cluster_burst', 500]]);
  const priorities = await fairSharePriorities(w.h.deps.deliveryQueue, counts, 50);
  expect(Object.fromEntries(priorities)).toEqual({ whsub_cluster_calm: 0, whsub_cluster_held: 20, whsub_cluster_burst: 4 });
});

it('relays a delivery that lost its job, and leaves one whose job is queued alone, on the cluster', async () => {
  const sub = await w.subscribe({ name: 'cluster-relay', url: w.receiver.url('/cluster-relay'), events: ['assessment.completed'] });
  // Both committed without the after-commit enqueue; one then gets its job, delayed an hour.
  const publish = (reportId: string) =>
    w.h.deps.prisma.$transaction((tx) =>
      publishEvent(tx, { type: 'assessment.completed', organizationId: w.org.id, data: { assessment_id: reportId } }, w.h.clock.now()),
    );
  const lost = await w.deliveryFor(await publish('asm_lost'), sub.id);
  const queued = await w.deliveryFor(await publish('asm_queued'), sub.id);
  await w.h.deps.deliveryQueue.add('deliver', { deliveryId: queued }, deliveryJobOptions(queued, 8, 3_600_000));

  const relayed = await relayOverdueDeliveries(w.h.deps.prisma, w.h.deps.deliveryQueue, { ageMs: 0, maxAttempts: 8, now: new Date(Date.now() + 1000) });

  expect(relayed).toBe(1);
  expect(await w.waitForDelivery(lost)).toMatchObject({ status: 'succeeded', attemptCount: 1 });
  expect(await w.h.deps.deliveryQueue.getJobState(queued)).toBe('delayed');
  expect(w.receiver.requests('/cluster-relay')).toHaveLength(1);
});

it('limits login attempts per e-mail across API instances', async () => {
  const email = `nobody-${Date.now()}@example.test`;
  const attempt = (app: App) => request(app).post('/api/v1/auth/login').send({ email, password: 'wrong password!' });
  expect((await attempt(w.h.app)).status).toBe(401);
  expect((await attempt(other)).status).toBe(401);
  expect((await attempt(w.h.app)).status).toBe(401);
  const limited = await attempt(other);
  expect(limited.status).toBe(429);
  expect(limited.headers['retry-after']).toMatch(/^\d+$/);
});

it('refuses a revoked API key on the very next request on every instance (auth epochs)', async () => {
  const created = await request(w.h.app).post('/api/v1/api-keys').set(bearer(w.org.manager.token)).send({ name: 'cached', scopes: ['profile:read'] });
  expect(created.status).toBe(201);
  const me = (app: App) => request(app).get('/api/v1/auth/me').set(bearer(created.body.key));
  for (const app of [w.h.app, other, w.h.app, other]) expect((await me(app)).status).toBe(200);
  const revoke = await request(w.h.app).delete(`/api/v1/api-keys/${created.body.id}`).set(bearer(w.org.manager.token));
  expect(revoke.status).toBe(204);
  expect((await me(other)).status).toBe(401);
  expect((await me(w.h.app)).status).toBe(401);
});

it('resumes delivery within 10 s of a replica taking over from the master killed mid-drain, losing nothing', async () => {
  const sub = await w.subscribe({ name: 'cluster-kill', url: w.receiver.url('/cluster-kill'), events: ['report.ready'] });
  w.receiver.script('/cluster-kill', () => ({ status: 200, body: 'ok', delayMs: 150 }));
  const accepted: string[] = [];
  const publish = async (i: number) => {
    const event = await w.publish({ type: 'report.ready', data: { report_id: `rep_kill_${i}` } });
    accepted.push(await w.deliveryFor(event, sub.id));
  };
  for (let i = 0; i < 30; i += 1) await publish(i);
  await w.receiver.waitForRequests('/cluster-kill', 3);

  const killedAt = Date.now();
  const { oldMaster, newMaster, promotedAt } = await cluster.killMasterOf(bullPrefix(w.h.config));
  expect(newMaster).not.toBe(oldMaster);
  expect(w.receiver.requests('/cluster-kill').length).toBeLessThan(30);
  for (let i = 30; i < 35; i += 1) await publish(i);

  const resumed = await poll(
    async () => w.receiver.requests('/cluster-kill').filter((r) => r.at > promotedAt),
    (rs) => rs.length > 0,
    30_000,
    'delivery to resume on the promoted replica',
  );
  expect(Math.min(...resumed.map((r) => r.at)) - promotedAt).toBeLessThanOrEqual(10_000);
  const deliveries = await poll(
    () => w.h.deps.prisma.webhookDelivery.findMany({ where: { id: { in: accepted } }, select: { status: true } }),
    (rows) => rows.every((d) => d.status !== 'pending'),
    60_000,
    'every accepted delivery to finish',
  ).catch(async (err: Error) => {
    // Seen once in ~40 runs: one delivery still pending. Its job's state says which recovery it waited for (a job
    // lost with the master: the relay's; one left active: the stalled check's, after its lock ran out).
    const pending = await w.h.deps.prisma.webhookDelivery.findMany({ where: { id: { in: accepted }, status: 'pending' }, select: { id: true, attemptCount: true } });
    const states = await Promise.all(pending.map(async (d) => ({ ...d, index: accepted.indexOf(d.id), job: await w.h.deps.deliveryQueue.getJobState(d.id) })));
    throw new Error(`${err.message}\npending: ${JSON.stringify(states)}; killed at ${killedAt}, promoted at ${promotedAt}, now ${Date.now()}`);
  });
  expect(deliveries.filter((d) => d.status !== 'succeeded')).toEqual([]);
  const received = w.receiver.requests('/cluster-kill');
  const arrived = new Set(received.map((r) => r.headers['x-service-delivery']));
  expect(accepted.filter((id) => !arrived.has(id))).toEqual([]);
  // Sent twice only when its first attempt was in flight as the master died (README: at least once).
  const firstAt = new Map<string, number>();
  const twice: string[] = [];
  for (const r of received) {
    const id = String(r.headers['x-service-delivery']);
    if (firstAt.has(id)) twice.push(id);
    else firstAt.set(id, r.at);
  }
  expect(twice.filter((id) => firstAt.get(id)! < killedAt - 1_000 || firstAt.get(id)! > promotedAt + 2_000)).toEqual([]);
}, 120_000);
