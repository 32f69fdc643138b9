// Nothing accepted is lost: a delivery committed without its queue job (the process died between commit and
// enqueue, or Redis refused the job) is enqueued by the outbox relay, which runs on a BullMQ job scheduler.
import { publishEvent, relayOverdueDeliveries, withOutbox } from '@svc/outbox';
import { createDeliveryQueue, createRedis, deliveryJobOptions } from '@svc/queue';
import { startWorker } from '../src/worker';
import { createWorld, type World } from './support/world';

let w: World;
beforeAll(async () => {
  w = await createWorld({
    env: { OUTBOX_RELAY_INTERVAL_MS: '200', OUTBOX_RELAY_AGE_MS: '0' },
    workerOptions: { schedule: true },
  });
});
afterAll(() => w?.close());

it('registers the relay (on its own queue) and the maintenance jobs as job schedulers, once however many workers start', async () => {
  const second = await startWorker(w.workerDeps);
  try {
    const schedulers = await w.worker!.maintenanceQueue.getJobSchedulers();
    expect(schedulers.map((s) => [s.key, s.every]).sort()).toEqual([
      ['erasure', 30_000],
      ['key-lifecycle', 3_600_000],
      ['retention-purge', 60_000],
      ['security-notices', 15_000],
      ['sla-scan', 900_000],
      ['source-sweep', 3_600_000],
    ]);
    const relay = await w.worker!.relayQueue.getJobSchedulers();
    expect(relay.map((s) => [s.key, s.every])).toEqual([['outbox-relay', 200]]);
  } finally {
    await second.close();
  }
});

it('delivers an event whose deliveries were committed but never enqueued', async () => {
  const sub = await w.subscribe({ name: 'no-enqueue', url: w.receiver.url('/no-enqueue'), events: ['report.ready'] });
  // Commit without the after-commit enqueue, as if the process had died in between.
  const published = await w.h.deps.prisma.$transaction((tx) =>
    publishEvent(tx, { type: 'report.ready', organizationId: w.org.id, data: { report_id: 'lost' } }, w.h.clock.now()),
  );
  const deliveryId = await w.deliveryFor(published, sub.id);

  const delivery = await w.waitForDelivery(deliveryId);
  expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
  const requests = w.receiver.requests('/no-enqueue');
  expect(requests).toHaveLength(1);
  expect(requests[0].headers['x-service-delivery']).toBe(deliveryId);
});

it('delivers an event whose enqueue failed because Redis was unreachable', async () => {
  const sub = await w.subscribe({ name: 'redis-down', url: w.receiver.url('/redis-down'), events: ['report.ready'] });
  // Nothing listens on port 1: every Redis command of this queue fails.
  const deadConnection = createRedis('redis://127.0.0.1:1', { enableOfflineQueue: false, retryStrategy: () => null });
  deadConnection.on('error', () => undefined);
  const deadQueue = createDeliveryQueue(deadConnection, w.h.config);
  deadQueue.on('error', () => undefined);
  const warnings: unknown[] = [];
  const logger = { ...w.h.deps.logger, warn: (...args: unknown[]) => warnings.push(args) } as unknown as typeof w.h.deps.logger;

  const published = await withOutbox({ prisma: w.h.deps.prisma, deliveryQueue: deadQueue, logger, maxAttempts: 8 }, (_tx, publish) =>
    publish({ type: 'report.ready', organizationId: w.org.id, data: { report_id: 'redis-down' } }),
  );
  expect(warnings).toHaveLength(1);
  await deadQueue.close().catch(() => undefined);
  deadConnection.disconnect();

  const delivery = await w.waitForDelivery(await w.deliveryFor(published, sub.id));
  expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
  expect(w.receiver.requests('/redis-down')).toHaveLength(1);
});

it('does not enqueue a delivery twice while its job is waiting for a retry', async () => {
  w.receiver.script('/retrying', (_req, n) => (n < 3 ? { status: 500 } : { status: 200 }));
  const sub = await w.subscribe({ name: 'retrying', url: w.receiver.url('/retrying'), events: ['report.ready'] });
  const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'r' } });
  expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 3 });
  await new Promise((r) => setTimeout(r, 500));
  expect(w.receiver.requests('/retrying')).toHaveLength(3);
});

describe('behind a backlog of overdue deliveries whose jobs are still queued', () => {
  let local: World;
  beforeAll(async () => {
    local = await createWorld({ worker: false });
  });
  afterAll(() => local?.close());

  it('finds the delivery that lost its job past the first page, and adds no second job for the others', async () => {
    const sub = await local.subscribe({ name: 'backlog', url: local.receiver.url('/backlog'), events: ['report.ready'] });
    await local.h.deps.prisma.$transaction(async (tx) => {
      for (let i = 0; i < 120; i++) {
        await publishEvent(tx, { type: 'report.ready', organizationId: local.org.id, data: { report_id: `backlog_${i}` } }, local.h.clock.now());
      }
    });
    // Every delivery but the one the relay pages to last has its job, delayed: a queued backlog, overdue by now.
    const ids = (
      await local.h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId: sub.id }, select: { id: true }, orderBy: { id: 'asc' } })
    ).map((d) => d.id);
    expect(ids).toHaveLength(120);
    const lost = ids[ids.length - 1];
    const queue = local.h.deps.deliveryQueue;
    await queue.addBulk(ids.slice(0, -1).map((id) => ({ name: 'deliver', data: { deliveryId: id }, opts: deliveryJobOptions(id, 8, 3_600_000) })));

    const relayed = await relayOverdueDeliveries(local.h.deps.prisma, queue, { ageMs: 0, maxAttempts: 8, now: new Date(Date.now() + 1000), batchSize: 50 });

    expect(relayed).toBe(1);
    expect(await queue.getJobState(lost)).toBe('waiting');
    expect(await queue.getDelayedCount()).toBe(119);
  });
});
