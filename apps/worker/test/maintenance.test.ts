// The retention purge: deliveries (and their attempts) go 30 days after they reached a terminal state; events go
// once no delivery of theirs is left and they are as old. Pending deliveries and recent ones stay.
import { newId } from '@svc/db';
import { publishEvent } from '@svc/outbox';
import { purgeExpiredDeliveries } from '../src/maintenance';
import { purgeExpired } from '../src/retention';
import { createWorld, poll, type CreatedSubscription, type World } from './support/world';

const DAY = 24 * 3600 * 1000;

let w: World;
let sub: CreatedSubscription;
beforeAll(async () => {
  w = await createWorld({ env: { RETENTION_DAYS: '30' } });
  sub = await w.subscribe({ name: 'retention', url: w.receiver.url('/retention'), events: ['report.ready'] });
});
afterAll(() => w?.close());

/** An event with one delivery to `sub`, in the given state, with one attempt, all written straight to the database. */
async function deliveryInState(daysAgo: number, state: { status: 'pending' | 'succeeded' | 'failed'; completedDaysAgo?: number }) {
  const { prisma } = w.h.deps;
  const createdAt = new Date(Date.now() - daysAgo * DAY);
  const published = await prisma.$transaction((tx) =>
    publishEvent(tx, { type: 'report.ready', organizationId: w.org.id, data: { report_id: `rep_${daysAgo}` } }, createdAt),
  );
  const id = published.deliveryIds.find(Boolean)!;
  const completedAt = state.completedDaysAgo === undefined ? null : new Date(Date.now() - state.completedDaysAgo * DAY);
  await prisma.webhookDelivery.update({ where: { id }, data: { status: state.status, completedAt, attemptCount: 1 } });
  await prisma.webhookAttempt.create({
    data: { id: newId('whatt'), deliveryId: id, number: 1, startedAt: createdAt, durationMs: 5, outcome: 'http_error', responseStatus: 500 },
  });
  return { deliveryId: id, eventId: published.eventId };
}

async function exists(ids: { deliveryId: string; eventId: string }) {
  const { prisma } = w.h.deps;
  return {
    delivery: (await prisma.webhookDelivery.count({ where: { id: ids.deliveryId } })) === 1,
    attempts: await prisma.webhookAttempt.count({ where: { deliveryId: ids.deliveryId } }),
    event: (await prisma.event.count({ where: { id: ids.eventId } })) === 1,
  };
}

it('removes terminal deliveries, their attempts and their events 30 days after completion, and nothing else', async () => {
  const oldSuccess = await deliveryInState(40, { status: 'succeeded', completedDaysAgo: 31 });
  const oldFailure = await deliveryInState(40, { status: 'failed', completedDaysAgo: 30.5 });
  const recentFailure = await deliveryInState(40, { status: 'failed', completedDaysAgo: 29 });
  const oldPending = await deliveryInState(45, { status: 'pending' });
  // A second, recent delivery of an old event keeps that event.
  const sharedEvent = await deliveryInState(40, { status: 'succeeded', completedDaysAgo: 35 });
  await w.h.deps.prisma.webhookDelivery.create({
    data: {
      id: newId('whdel'),
      organizationId: w.org.id,
      subscriptionId: sub.id,
      eventId: sharedEvent.eventId,
      eventType: 'report.ready',
      payload: {},
      payloadFormat: 'service',
      status: 'succeeded',
      completedAt: new Date(Date.now() - DAY),
    },
  });

  const purged = await purgeExpiredDeliveries(w.workerDeps);
  expect(purged.deliveries).toBeGreaterThanOrEqual(3);

  expect(await exists(oldSuccess)).toEqual({ delivery: false, attempts: 0, event: false });
  expect(await exists(oldFailure)).toEqual({ delivery: false, attempts: 0, event: false });
  expect(await exists(recentFailure)).toEqual({ delivery: true, attempts: 1, event: true });
  expect(await exists(oldPending)).toEqual({ delivery: true, attempts: 1, event: true });
  expect(await exists(sharedEvent)).toEqual({ delivery: false, attempts: 0, event: true });
});

describe('an old event with deliveries at the three subscription levels', () => {
  type State = { status: 'pending' | 'succeeded' | 'failed'; completedDaysAgo?: number };

  async function levelSubscriptions() {
    const { prisma } = w.h.deps;
    const project = await prisma.project.create({ data: { id: newId('prj'), organizationId: w.org.id, name: `Retention ${newId('prj')}` } });
    const assessment = await prisma.assessment.create({
      data: { id: newId('asm'), organizationId: w.org.id, projectId: project.id, name: 'Retention', status: 'running' },
    });
    // monitoring.regression: no other test here publishes it, so these subscriptions add no delivery to theirs.
    const body = (name: string) => ({ name, url: w.receiver.url('/levels'), events: ['monitoring.regression'] });
    return {
      org: (await w.subscribe(body('org level'))).id,
      project: (await w.subscribe(body('project level'), { level: 'project', projectId: project.id })).id,
      assessment: (await w.subscribe(body('assessment level'), { level: 'assessment', assessmentId: assessment.id })).id,
    };
  }

  /** One event `daysAgo` old with one delivery per listed subscription, each in its state with two attempts. */
  async function eventWith(daysAgo: number, deliveries: Array<[subscriptionId: string, state: State]>) {
    const { prisma } = w.h.deps;
    const createdAt = new Date(Date.now() - daysAgo * DAY);
    const event = await prisma.event.create({
      data: { id: newId('event'), organizationId: w.org.id, type: 'monitoring.regression', data: {}, createdAt },
    });
    const ids: string[] = [];
    for (const [subscriptionId, state] of deliveries) {
      const completedAt = state.completedDaysAgo === undefined ? null : new Date(Date.now() - state.completedDaysAgo * DAY);
      const delivery = await prisma.webhookDelivery.create({
        data: {
          id: newId('whdel'), organizationId: w.org.id, subscriptionId, eventId: event.id, eventType: 'monitoring.regression',
          payload: {}, payloadFormat: 'service', status: state.status, completedAt, attemptCount: 2, createdAt,
        },
      });
      for (const number of [1, 2]) {
        await prisma.webhookAttempt.create({
          data: { id: newId('whatt'), deliveryId: delivery.id, number, startedAt: createdAt, durationMs: 5, outcome: 'http_error', responseStatus: 500 },
        });
      }
      ids.push(delivery.id);
    }
    return { eventId: event.id, deliveryIds: ids };
  }

  async function remaining(seeded: { eventId: string; deliveryIds: string[] }) {
    const { prisma } = w.h.deps;
    return {
      event: await prisma.event.count({ where: { id: seeded.eventId } }),
      deliveries: (await prisma.webhookDelivery.findMany({ where: { id: { in: seeded.deliveryIds } }, select: { id: true } })).map((d) => seeded.deliveryIds.indexOf(d.id)).sort(),
      attempts: await prisma.webhookAttempt.count({ where: { deliveryId: { in: seeded.deliveryIds } } }),
    };
  }

  it('removes exactly the expired deliveries and their attempts, and the event only once nothing references it', async () => {
    const subs = await levelSubscriptions();
    // Expired at the organization and project levels, still pending at the assessment level: the event stays.
    const withPending = await eventWith(60, [
      [subs.org, { status: 'succeeded', completedDaysAgo: 59 }],
      [subs.project, { status: 'failed', completedDaysAgo: 31 }],
      [subs.assessment, { status: 'pending' }],
    ]);
    // Expired at two levels, completed 29 days ago at the third (a late retry): the event stays with that one.
    const withRecent = await eventWith(60, [
      [subs.org, { status: 'failed', completedDaysAgo: 45 }],
      [subs.project, { status: 'succeeded', completedDaysAgo: 29 }],
      [subs.assessment, { status: 'succeeded', completedDaysAgo: 30.1 }],
    ]);
    // Every level expired: everything goes.
    const allExpired = await eventWith(60, [
      [subs.org, { status: 'succeeded', completedDaysAgo: 40 }],
      [subs.project, { status: 'failed', completedDaysAgo: 40 }],
      [subs.assessment, { status: 'succeeded', completedDaysAgo: 31 }],
    ]);
    // Events no subscription matched: the old one goes, the recent one stays.
    const oldLonely = await eventWith(31, []);
    const recentLonely = await eventWith(29, []);
    // All recent: nothing goes.
    const recent = await eventWith(2, [
      [subs.org, { status: 'succeeded', completedDaysAgo: 1 }],
      [subs.project, { status: 'failed', completedDaysAgo: 1 }],
      [subs.assessment, { status: 'pending' }],
    ]);

    // A batch of 2 rows and several runs' worth of statements: the keyset walk must neither skip nor repeat rows.
    const result = await purgeExpiredDeliveries(w.workerDeps, { batchSize: 2 });
    expect(result.complete).toBe(true);

    expect(await remaining(withPending)).toEqual({ event: 1, deliveries: [2], attempts: 2 });
    expect(await remaining(withRecent)).toEqual({ event: 1, deliveries: [1], attempts: 2 });
    expect(await remaining(allExpired)).toEqual({ event: 0, deliveries: [], attempts: 0 });
    expect(await remaining(oldLonely)).toEqual({ event: 0, deliveries: [], attempts: 0 });
    expect(await remaining(recentLonely)).toEqual({ event: 1, deliveries: [], attempts: 0 });
    expect(await remaining(recent)).toEqual({ event: 1, deliveries: [0, 1, 2], attempts: 6 });

    // Once the pending delivery ends and its 30 days pass, the event goes too.
    await w.h.deps.prisma.webhookDelivery.update({
      where: { id: withPending.deliveryIds[2] },
      data: { status: 'succeeded', completedAt: new Date(Date.now() - 31 * DAY) },
    });
    await purgeExpiredDeliveries(w.workerDeps);
    expect(await remaining(withPending)).toEqual({ event: 0, deliveries: [], attempts: 0 });
  });

  it('stops on its time budget and says so; the next run carries on', async () => {
    const subs = await levelSubscriptions();
    const seeded = await eventWith(50, [
      [subs.org, { status: 'succeeded', completedDaysAgo: 40 }],
      [subs.project, { status: 'succeeded', completedDaysAgo: 40 }],
    ]);
    const spent = await purgeExpiredDeliveries(w.workerDeps, { budgetMs: 0 });
    expect(spent).toEqual({ deliveries: 0, events: 0, complete: false });
    expect(await remaining(seeded)).toEqual({ event: 1, deliveries: [0, 1], attempts: 4 });
    expect(await purgeExpiredDeliveries(w.workerDeps)).toMatchObject({ complete: true });
    expect(await remaining(seeded)).toEqual({ event: 0, deliveries: [], attempts: 0 });
  });

  it('rests after each batch as long as the batch took, times pauseRatio, and still completes', async () => {
    const subs = await levelSubscriptions();
    const seeded = await eventWith(60, [
      [subs.org, { status: 'succeeded', completedDaysAgo: 40 }],
      [subs.project, { status: 'failed', completedDaysAgo: 40 }],
      [subs.assessment, { status: 'succeeded', completedDaysAgo: 40 }],
    ]);
    let clock = 0;
    const rests: number[] = [];
    const result = await purgeExpired(w.h.deps.prisma, {
      cutoff: new Date(Date.now() - 30 * DAY),
      budgetMs: 60_000,
      batchSize: 1,
      pauseRatio: 2,
      now: () => (clock += 10), // every reading of the clock is 10 ms later: each batch "takes" 10 ms
      sleep: async (ms) => {
        rests.push(ms);
      },
    });
    expect(result.complete).toBe(true);
    expect(await remaining(seeded)).toEqual({ event: 0, deliveries: [], attempts: 0 });
    expect(rests.length).toBeGreaterThanOrEqual(2);
    expect(new Set(rests)).toEqual(new Set([20]));
  });
});

it('follows the clock: a delivery completed now is purged once the clock is 30 days ahead', async () => {
  const fresh = await deliveryInState(0, { status: 'failed', completedDaysAgo: 0 });
  await purgeExpiredDeliveries(w.workerDeps);
  expect((await exists(fresh)).delivery).toBe(true);
  w.h.clock.advance(30 * DAY + 60_000);
  try {
    await purgeExpiredDeliveries(w.workerDeps);
    expect(await exists(fresh)).toEqual({ delivery: false, attempts: 0, event: false });
  } finally {
    w.h.clock.reset();
  }
});

it('runs as the retention-purge job of the maintenance queue', async () => {
  const old = await deliveryInState(50, { status: 'succeeded', completedDaysAgo: 40 });
  await w.worker!.maintenanceQueue.add('retention-purge', {}, { removeOnComplete: true });
  await poll(() => exists(old), (e) => !e.delivery && !e.event, 10_000, 'the purge job');
});

it('runs the SLA scan as a maintenance job: an overdue finding is delivered as finding.sla_breached once', async () => {
  const { prisma } = w.h.deps;
  const breachSub = await w.subscribe({ name: 'sla', url: w.receiver.url('/sla'), events: ['finding.sla_breached'] });
  const project = await prisma.project.create({ data: { id: newId('prj'), organizationId: w.org.id, name: 'SLA' } });
  const assessment = await prisma.assessment.create({
    data: { id: newId('asm'), organizationId: w.org.id, projectId: project.id, name: 'SLA', status: 'running' },
  });
  const finding = await prisma.finding.create({
    data: {
      id: newId('fnd'), organizationId: w.org.id, projectId: project.id, assessmentId: assessment.id,
      fingerprint: 'sla-fp', title: 'Stale critical', severity: 'critical', originalSeverity: 'critical',
      openedAt: new Date(Date.now() - 8 * DAY), // critical: 7 days by default
    },
  });
  for (let run = 0; run < 2; run++) {
    await w.worker!.maintenanceQueue.add('sla-scan', {}, { removeOnComplete: true });
  }
  const delivered = await poll(() => Promise.resolve(w.receiver.requests('/sla')), (r) => r.length >= 1, 10_000, 'the breach delivery');
  await new Promise((r) => setTimeout(r, 500));
  expect(w.receiver.requests('/sla')).toHaveLength(1);
  const body = JSON.parse(delivered[0].body.toString());
  expect(body).toMatchObject({ type: 'finding.sla_breached', data: { kind: 'finding.sla_breached', finding_id: finding.id, sla_days: 7 } });
  expect(await prisma.webhookDelivery.count({ where: { subscriptionId: breachSub.id } })).toBe(1);
});
