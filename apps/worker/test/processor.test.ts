// The processor called directly (no queue): deliveries it must not attempt, the guard against recording the
// same attempt twice, and the isolation slot of an attempt that moves the subscription or its breaker kept until the
// attempt is recorded.
import { publishEvent } from '@svc/outbox';
import { closeDeliveryContext, createDeliveryContext, loadDeliveries, processDelivery, type DeliveryContext } from '../src/deliver';
import { AttemptConflictError, attemptRecorder, recordAttempt, type AttemptWrite } from '../src/record';
import { RetryableDeliveryError } from '../src/retry';
import { createWorld, type CreatedSubscription, type World } from './support/world';

let w: World;
let ctx: DeliveryContext;
beforeAll(async () => {
  w = await createWorld({ worker: false });
  ctx = createDeliveryContext(w.workerDeps);
});
afterAll(async () => {
  if (ctx) await closeDeliveryContext(ctx);
  await w?.close();
});

async function subscribe(path: string): Promise<CreatedSubscription> {
  return w.subscribe({ name: path, url: w.receiver.url(path), events: ['report.ready'] });
}

/** A committed delivery with no queue job: only the direct call below processes it. */
async function pendingDelivery(sub: CreatedSubscription): Promise<string> {
  const published = await w.h.deps.prisma.$transaction((tx) =>
    publishEvent(tx, { type: 'report.ready', organizationId: w.org.id, data: { report_id: 'r' } }, w.h.clock.now()),
  );
  return w.deliveryFor(published, sub.id);
}

const delivery = (id: string) => w.h.deps.prisma.webhookDelivery.findUniqueOrThrow({ where: { id }, include: { attempts: true } });

it('sends nothing for a soft-deleted subscription and fails its pending delivery', async () => {
  const sub = await subscribe('/deleted');
  const id = await pendingDelivery(sub);
  await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { deletedAt: new Date() } });
  expect(await processDelivery(ctx, id)).toEqual({ status: 'skipped', reason: 'subscription deleted' });
  expect(await delivery(id)).toMatchObject({ status: 'failed', failureReason: 'subscription deleted', attemptCount: 0, attempts: [] });
  expect(w.receiver.requests('/deleted')).toHaveLength(0);
});

it('leaves a finished delivery alone and ignores an unknown id', async () => {
  const sub = await subscribe('/finished');
  const id = await pendingDelivery(sub);
  expect(await processDelivery(ctx, id)).toMatchObject({ status: 'succeeded', attempt: 1 });
  expect(await processDelivery(ctx, id)).toEqual({ status: 'skipped', reason: 'delivery already succeeded' });
  expect(w.receiver.requests('/finished')).toHaveLength(1);
  expect(await processDelivery(ctx, 'whdel_00000000000000000000000000')).toEqual({ status: 'skipped', reason: 'delivery not found' });
});

it('throws a RetryableDeliveryError carrying the delay it stored as the next attempt time', async () => {
  w.receiver.script('/retry-later', () => ({ status: 500 }));
  const id = await pendingDelivery(await subscribe('/retry-later'));
  const before = Date.now();
  const error = await processDelivery(ctx, id).catch((err: unknown) => err);
  expect(error).toBeInstanceOf(RetryableDeliveryError);
  const { delayMs } = error as RetryableDeliveryError;
  const stored = await delivery(id);
  expect(stored).toMatchObject({ status: 'pending', attemptCount: 1 });
  expect(stored.nextAttemptAt!.getTime()).toBeGreaterThanOrEqual(before + delayMs);
  expect(stored.nextAttemptAt!.getTime()).toBeLessThanOrEqual(Date.now() + delayMs);
});

it('records an attempt number once: a second writer of the same attempt is refused and nothing changes', async () => {
  const sub = await subscribe('/conflict');
  const id = await pendingDelivery(sub);
  const write = {
    deliveryId: id,
    subscriptionId: sub.id,
    attempt: {
      number: 1, startedAt: new Date(), durationMs: 3, outcome: 'http_error' as const,
      responseStatus: 500, responseHeaders: {}, responseBody: 'nul \u0000 byte', error: null, retryAfterMs: null,
    },
    delivery: { status: 'pending' as const, nextAttemptAt: new Date() },
    subscription: { kind: 'none' as const },
    now: new Date(),
  };
  await recordAttempt(w.h.deps.prisma, write);
  await expect(recordAttempt(w.h.deps.prisma, { ...write, delivery: { status: 'succeeded' }, subscription: { kind: 'success' } })).rejects.toBeInstanceOf(
    AttemptConflictError,
  );
  const stored = await delivery(id);
  expect(stored).toMatchObject({ status: 'pending', attemptCount: 1 });
  expect(stored.attempts).toHaveLength(1);
  expect(stored.attempts[0].responseBody).toBe('nul \uFFFD byte');
});

/** An attempt's write as the worker makes it, for `id`'s attempt `number`. */
function attemptWrite(id: string, subscriptionId: string, number: number, success: boolean): AttemptWrite {
  const now = new Date();
  return {
    deliveryId: id,
    subscriptionId,
    attempt: {
      number, startedAt: now, durationMs: 4, outcome: success ? 'success' : 'http_error',
      responseStatus: success ? 200 : 503, responseHeaders: { 'content-type': 'text/plain' }, responseBody: success ? 'ok' : 'busy \u0000',
      error: null, retryAfterMs: success ? null : 2000,
    },
    delivery: success ? { status: 'succeeded' } : { status: 'pending', nextAttemptAt: new Date(now.getTime() + 30_000) },
    subscription: success ? { kind: 'success' } : { kind: 'none' },
    now,
  };
}

it('records attempts that finish together in one statement, each claimed by its attempt count', async () => {
  const sub = await subscribe('/batched');
  const [a, b, c, d] = [await pendingDelivery(sub), await pendingDelivery(sub), await pendingDelivery(sub), await pendingDelivery(sub)];
  await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { consecutiveFailures: 2, firstFailureAt: new Date() } });
  await recordAttempt(w.h.deps.prisma, attemptWrite(d, sub.id, 1, false)); // d's attempt 1 is in already
  const recorder = attemptRecorder(w.h.deps.prisma);
  // All four asked in one tick: one batch. d's attempt 1 again is a conflict; the other three are recorded.
  const answers = await Promise.all([
    recorder.run(attemptWrite(a, sub.id, 1, true)),
    recorder.run(attemptWrite(b, sub.id, 1, false)),
    recorder.run(attemptWrite(c, sub.id, 1, true)),
    recorder.run(attemptWrite(d, sub.id, 1, true)),
  ]);
  expect(answers.slice(0, 3)).toEqual([null, null, null]);
  expect(answers[3]).toBeInstanceOf(AttemptConflictError);
  expect(await delivery(a)).toMatchObject({ status: 'succeeded', attemptCount: 1, waitReason: null, completedAt: expect.any(Date) });
  const retried = await delivery(b);
  expect(retried).toMatchObject({ status: 'pending', attemptCount: 1, waitReason: 'backoff', completedAt: null, nextAttemptAt: expect.any(Date) });
  expect(retried.attempts[0]).toMatchObject({ number: 1, outcome: 'http_error', responseStatus: 503, responseBody: 'busy \uFFFD', retryAfterMs: 2000, responseHeaders: { 'content-type': 'text/plain' } });
  expect((await delivery(c)).attempts).toHaveLength(1);
  expect(await delivery(d)).toMatchObject({ status: 'pending', attemptCount: 1, attempts: [expect.objectContaining({ outcome: 'http_error' })] });
  // The successes reset the subscription's health.
  expect(await w.h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: sub.id } })).toMatchObject({ consecutiveFailures: 0, firstFailureAt: null });
});

it('records each write of a batch alone when one of them fails the whole statement, each with its own answer', async () => {
  const sub = await subscribe('/batch-fails');
  const [a, b] = [await pendingDelivery(sub), await pendingDelivery(sub)];
  const recorder = attemptRecorder(w.h.deps.prisma);
  // a's attempt 1 twice in one batch: the statement inserts it twice and fails on the (delivery, number) index. Alone
  // (side by side), one of them is recorded and the other is a conflict, and b (innocent) is recorded.
  const answers = await Promise.all([
    recorder.run(attemptWrite(a, sub.id, 1, true)),
    recorder.run(attemptWrite(a, sub.id, 1, true)),
    recorder.run(attemptWrite(b, sub.id, 1, false)),
  ]);
  expect(answers.slice(0, 2).filter((answer) => answer === null)).toHaveLength(1);
  expect(answers.slice(0, 2).filter((answer) => answer instanceof AttemptConflictError)).toHaveLength(1);
  expect(answers[2]).toBeNull();
  expect(await delivery(a)).toMatchObject({ status: 'succeeded', attemptCount: 1, attempts: [expect.objectContaining({ number: 1 })] });
  expect(await delivery(b)).toMatchObject({ status: 'pending', attemptCount: 1, attempts: [expect.objectContaining({ outcome: 'http_error' })] });
});

it('loads many deliveries in one statement, in the order asked, null for an unknown id', async () => {
  const sub = await subscribe('/loaded');
  const [a, b] = [await pendingDelivery(sub), await pendingDelivery(sub)];
  const loaded = await loadDeliveries(w.h.deps.prisma, [b, 'whdel_00000000000000000000000000', a]);
  expect(loaded.map((l) => l?.id ?? null)).toEqual([b, null, a]);
  expect(loaded[0]).toMatchObject({ status: 'pending', subscriptionId: sub.id, subscription: { id: sub.id, url: w.receiver.url('/loaded') } });
});

/** Holds the delivery's row in a transaction of its own, so that its attempt's record waits until `release`. */
async function holdRow(id: string): Promise<{ release: () => Promise<void> }> {
  let letGo!: () => void;
  const held = new Promise<void>((resolve) => (letGo = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const blocker = w.h.deps.prisma.$transaction(
    async (tx) => {
      await tx.$queryRaw`SELECT id FROM webhook_deliveries WHERE id = ${id} FOR UPDATE`;
      locked();
      await held;
    },
    { timeout: 30_000 },
  );
  await Promise.race([lockTaken, blocker]);
  return {
    release: async () => {
      letGo();
      await blocker;
    },
  };
}

/** The attempts of `subscriptionId` holding an isolation slot (its in-flight set). */
async function slotsTaken(subscriptionId: string): Promise<number> {
  const probe = w.workerDeps.redis();
  try {
    return await probe.zcard(`${w.h.config.redisPrefix}:iso:{${subscriptionId}}:inflight`);
  } finally {
    probe.disconnect();
  }
}

it('keeps the slot of an attempt answered 410 until its record has disabled the subscription', async () => {
  w.receiver.script('/gone-slot', () => ({ status: 410 }));
  const sub = await subscribe('/gone-slot');
  const id = await pendingDelivery(sub);
  const row = await holdRow(id);
  try {
    const processing = processDelivery(ctx, id);
    await w.receiver.waitForRequests('/gone-slot', 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await slotsTaken(sub.id)).toBe(1);
    await row.release();
    expect(await processing).toMatchObject({ status: 'failed', attempt: 1 });
    expect(await slotsTaken(sub.id)).toBe(0);
    expect(await w.h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: sub.id } })).toMatchObject({ status: 'disabled' });
  } finally {
    await row.release();
  }
});

it("closes a half-open breaker with its probe's success only after the probe is recorded, the slot held until then", async () => {
  const sub = await subscribe('/probe-closes');
  const id = await pendingDelivery(sub);
  const state = `${w.h.config.redisPrefix}:iso:{${sub.id}}:state`;
  const redis = w.workerDeps.redis();
  // The breaker opened earlier and its open period is over: this delivery is admitted as the probe.
  await redis.hset(state, 'state', 'open', 'until', String(w.h.clock.now().getTime() - 1_000), 'trips', '1');
  const row = await holdRow(id);
  try {
    const processing = processDelivery(ctx, id);
    await w.receiver.waitForRequests('/probe-closes', 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await redis.hget(state, 'state')).toBe('half_open');
    expect(await slotsTaken(sub.id)).toBe(1);
    await row.release();
    expect(await processing).toMatchObject({ status: 'succeeded', attempt: 1 });
    expect(await redis.hget(state, 'state')).toBe('closed');
    expect(await slotsTaken(sub.id)).toBe(0);
    expect(await w.h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: sub.id } })).toMatchObject({ breakerState: 'closed' });
  } finally {
    await row.release();
    redis.disconnect();
  }
});
