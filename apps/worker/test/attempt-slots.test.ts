// The worker's attempt slots (src/attempt-slots.ts): never more attempts at once than WORKER_CONCURRENCY, whatever
// BullMQ has taken ahead; waiters go first come first served; a failing attempt frees its slot.
import { AttemptSlots, SlotsClosedError, lookAheadJobs } from '../src/attempt-slots';
import { bearer } from '../../api/test/support/fixtures';
import { LOADED_DELIVERY_FRESH_MS } from '../src/deliver';
import { startWorker } from '../src/worker';
import { createWorld, poll, type World } from './support/world';

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (err: Error) => void } {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('AttemptSlots', () => {
  it('runs at most `size` tasks at once and starts the waiters in the order they came', async () => {
    const slots = new AttemptSlots(2);
    const gates = Array.from({ length: 5 }, deferred);
    const started: number[] = [];
    let running = 0;
    let most = 0;
    const runs = gates.map((gate, i) =>
      slots.run(async () => {
        started.push(i);
        running += 1;
        most = Math.max(most, running);
        await gate.promise;
        running -= 1;
        return i;
      }),
    );
    await tick();
    expect(started).toEqual([0, 1]);
    expect(slots.inUse).toBe(2);
    expect(slots.queued).toBe(3);

    gates[1].resolve();
    await tick();
    expect(started).toEqual([0, 1, 2]);
    gates[0].resolve();
    await tick();
    expect(started).toEqual([0, 1, 2, 3]);
    for (const gate of gates.slice(2)) gate.resolve();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect(slots.inUse).toBe(0);
    expect(slots.queued).toBe(0);
  });

  it('frees the slot of a task that fails, and hands its error to the caller', async () => {
    const slots = new AttemptSlots(1);
    const failing = slots.run(async () => {
      throw new Error('receiver exploded');
    });
    const next = slots.run(async () => 'ran');
    await expect(failing).rejects.toThrow('receiver exploded');
    await expect(next).resolves.toBe('ran');
    expect(slots.inUse).toBe(0);
  });

  it('gives a freed slot to the longest waiter, not to a task that arrives as it frees', async () => {
    const slots = new AttemptSlots(1);
    const first = deferred();
    const order: string[] = [];
    const holder = slots.run(() => first.promise.then(() => order.push('holder')));
    const waiter = slots.run(async () => order.push('waiter'));
    first.resolve();
    await holder;
    // The holder's slot went to the waiter as the holder settled: a newcomer now waits behind it.
    const newcomer = slots.run(async () => order.push('newcomer'));
    await Promise.all([waiter, newcomer]);
    expect(order).toEqual(['holder', 'waiter', 'newcomer']);
  });

  it('once closed, refuses the waiters and any newcomer while the running task finishes in its slot', async () => {
    const slots = new AttemptSlots(1);
    const gate = deferred();
    let finished = false;
    const running = slots.run(async () => {
      await gate.promise;
      finished = true;
      return 'finished';
    });
    let waiterRan = false;
    const waiter = slots.run(async () => {
      waiterRan = true;
    });
    await tick();
    slots.close();
    await expect(waiter).rejects.toBeInstanceOf(SlotsClosedError);
    await expect(slots.run(async () => 'late')).rejects.toBeInstanceOf(SlotsClosedError);
    expect(finished).toBe(false);
    gate.resolve();
    await expect(running).resolves.toBe('finished');
    expect(waiterRan).toBe(false);
    expect(slots.inUse).toBe(0);
  });

  it('refuses a size that is not a positive integer', () => {
    expect(() => new AttemptSlots(0)).toThrow(RangeError);
    expect(() => new AttemptSlots(1.5)).toThrow(RangeError);
  });

  it('takes as many jobs ahead as it has slots', () => {
    expect(lookAheadJobs(16)).toBe(16);
    expect(lookAheadJobs(1)).toBe(1);
  });
});

describe('a worker with WORKER_CONCURRENCY 2', () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld({ env: { WORKER_CONCURRENCY: '2' } });
  });
  afterAll(async () => {
    await w?.close();
  });

  it('sends a receiver at most two requests at a time while it has taken more jobs ahead, and delivers them all', async () => {
    let inFlight = 0;
    let most = 0;
    w.receiver.script('/slow', () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      setTimeout(() => (inFlight -= 1), 250);
      return { status: 200, body: 'ok', delayMs: 250 };
    });
    await w.subscribe({ name: 'slow', url: w.receiver.url('/slow'), events: ['report.ready'] });
    for (let i = 0; i < 8; i++) await w.publish({ type: 'report.ready', data: { report_id: `rep_slots_${i}` } });

    // While two attempts are in flight, the jobs taken ahead wait loaded (BullMQ counts them active).
    const queue = w.worker!.deliveryQueue;
    let activeMost = 0;
    const watching = (async () => {
      while (w.receiver.requests('/slow').length < 8) {
        activeMost = Math.max(activeMost, await queue.getActiveCount());
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await w.receiver.waitForRequests('/slow', 8, 20_000);
    await watching;
    expect(most).toBe(2);
    expect(activeMost).toBeGreaterThan(2);
    expect(activeMost).toBeLessThanOrEqual(2 + lookAheadJobs(2));
  });
});

describe('a worker with one attempt slot and a job taken ahead', () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld({ worker: false });
  });
  afterAll(async () => {
    await w?.close();
  });

  it('finishes the attempt in flight, gives the waiting job back unattempted, and the next worker delivers it', async () => {
    w.receiver.script('/closing', () => ({ status: 200, body: 'ok', delayMs: 600 }));
    await w.subscribe({ name: 'closing', url: w.receiver.url('/closing'), events: ['report.ready'] });
    const worker = await startWorker(w.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    await w.publish({ type: 'report.ready', data: { report_id: 'rep_first' } });
    await w.publish({ type: 'report.ready', data: { report_id: 'rep_second' } });
    await w.receiver.waitForRequests('/closing', 1, 10_000);
    await poll(() => worker.deliveryQueue.getActiveCount(), (n) => n === 2, 10_000, 'the second job taken ahead');

    await worker.close();
    expect(w.receiver.requests('/closing')).toHaveLength(1);
    const deliveries = await w.h.deps.prisma.webhookDelivery.findMany({ where: { organizationId: w.org.id }, orderBy: { attemptCount: 'desc' } });
    expect(deliveries.map((d) => [d.status, d.attemptCount])).toEqual([
      ['succeeded', 1],
      ['pending', 0],
    ]);

    const next = await startWorker(w.workerDeps, { schedule: false });
    try {
      const requests = await w.receiver.waitForRequests('/closing', 2, 10_000);
      expect(requests.map((r) => r.body.toString('utf8').includes('rep_second'))).toEqual([false, true]);
      await poll(
        () => w.h.deps.prisma.webhookDelivery.count({ where: { organizationId: w.org.id, status: 'succeeded', attemptCount: 1 } }),
        (n) => n === 2,
        10_000,
        'both deliveries succeeded after one attempt each',
      );
    } finally {
      await next.close();
    }
  });

  it('loads a delivery again when it waited over a second for its slot: a subscription moved meanwhile gets it at its new URL', async () => {
    w.receiver.script('/busy', () => ({ status: 200, body: 'ok', delayMs: LOADED_DELIVERY_FRESH_MS + 500 }));
    await w.subscribe({ name: 'busy', url: w.receiver.url('/busy'), events: ['assessment.completed'] });
    const moving = await w.subscribe({ name: 'moving', url: w.receiver.url('/moving-old'), events: ['spend.threshold_crossed'] });
    const worker = await startWorker(w.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_busy', project_id: 'prj_busy' } });
      await w.receiver.waitForRequests('/busy', 1, 10_000);
      await w.publish({ type: 'spend.threshold_crossed', data: { threshold: 1 } });
      await poll(() => worker.deliveryQueue.getActiveCount(), (n) => n === 2, 10_000, 'the second job taken ahead');
      const moved = await w
        .api()
        .patch(`${w.levelBase()}/subscriptions/${moving.id}`)
        .set(bearer(w.org.admin.token))
        .send({ url: w.receiver.url('/moving-new') });
      expect(moved.status).toBe(200);

      await w.receiver.waitForRequests('/moving-new', 1, 10_000);
      expect(w.receiver.requests('/moving-old')).toHaveLength(0);
    } finally {
      await worker.close();
    }
  });
});
