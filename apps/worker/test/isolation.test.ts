// Delivery isolation (docs/webhooks.md "Delivery isolation"): one receiver's trouble stays its own. Two real BullMQ workers on
// one queue, real HTTPS receivers on loopback: one that never answers, one that answers 503, one that is slow, one
// healthy. Timings are shrunk; how fast things go is the bench's business, what happens is asserted here.
import { bearer } from '../../api/test/support/fixtures';
import { startWorker, type RunningWorker } from '../src/worker';
import { buildWorker, spawnWorker, type ChildWorker } from './support/child-worker';
import { outboxDeps, withOutbox } from '@svc/outbox';
import { deliveriesPostponed } from '../src/metrics';
import { createWorld, poll, type CreatedSubscription, type World } from './support/world';

const ISOLATION_ENV = {
  WEBHOOK_TIMEOUT_MS: '400',
  WEBHOOK_CONNECT_TIMEOUT_MS: '400',
  WEBHOOK_MIN_IN_FLIGHT: '2',
  WEBHOOK_MAX_IN_FLIGHT: '8',
  WEBHOOK_SLOW_ATTEMPT_MS: '200',
  WEBHOOK_BREAKER_FAILURES: '2',
  WEBHOOK_BREAKER_OPEN_MS: '600',
  WEBHOOK_BREAKER_MAX_OPEN_MS: '1200',
  WEBHOOK_BACKOFF_BASE_MS: '200',
  WEBHOOK_BACKOFF_MAX_MS: '400',
};

let w: World;
let second: RunningWorker;
beforeAll(async () => {
  w = await createWorld({ env: ISOLATION_ENV });
  // A second worker process's worth of workers on the same queue and Redis state.
  second = await startWorker(w.workerDeps, { schedule: false });
});
afterAll(async () => {
  await second?.close();
  await w?.close();
});

const ok = () => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' });

async function subscribe(path: string, extra: Record<string, unknown> = {}): Promise<CreatedSubscription> {
  return w.subscribe({ name: path, url: w.receiver.url(path), events: ['report.ready'], ...extra });
}

async function publishMany(count: number, tag: string): Promise<void> {
  for (let i = 0; i < count; i++) await w.publish({ type: 'report.ready', data: { report_id: `rep_${tag}_${i}` } });
}

const getSubscription = async (id: string) =>
  (await w.api().get(`${w.levelBase()}/subscriptions/${id}`).set(bearer(w.org.admin.token))).body as {
    breaker: { state: string; until: string | null };
    status: string;
    rate_limit: number | null;
  };

function deliveredIds(path: string): Set<string> {
  return new Set(w.receiver.requests(path).map((r) => String(r.headers['x-service-delivery'])));
}

describe('a receiver that never answers', () => {
  it('is postponed behind an open breaker while healthy deliveries arrive, then gets everything after it recovers', async () => {
    let hung = true;
    const answered = new Set<number>();
    w.receiver.script('/tarpit', (_req, n) => {
      if (hung) return { hang: true };
      answered.add(n);
      return ok();
    });
    w.receiver.script('/quiet', ok);
    const tarpit = await subscribe('/tarpit');
    const quiet = await subscribe('/quiet');

    await publishMany(12, 'noisy');
    // Every one of Quiet's deliveries arrives while the tarpit holds its few slots.
    await w.receiver.waitForRequests('/quiet', 12, 15_000);

    const opened = await poll(() => getSubscription(tarpit.id), (s) => s.breaker.state === 'open', 10_000, 'the breaker to open');
    expect(opened.breaker.until).not.toBeNull();
    const audit = await w.h.deps.prisma.auditEvent.findMany({ where: { action: 'webhook.breaker_opened', targetId: tarpit.id } });
    expect(audit.length).toBeGreaterThanOrEqual(1);
    expect(audit[0]).toMatchObject({ actorType: 'system' });

    // Held back, not attempted: far fewer requests reached the tarpit than it has deliveries, and the waiting
    // deliveries say why.
    const tarpitDeliveries = await w.deliveriesOf(tarpit.id);
    expect(tarpitDeliveries).toHaveLength(12);
    expect(w.receiver.requests('/tarpit').length).toBeLessThan(12);
    const waiting = await poll(
      () => w.deliveriesOf(tarpit.id),
      (ds) => ds.some((d) => d.waitReason === 'breaker_open'),
      5_000,
      'a delivery postponed behind the breaker',
    );
    for (const d of waiting.filter((x) => x.waitReason === 'breaker_open')) {
      expect(d.status).toBe('pending');
      expect(d.nextAttemptAt).not.toBeNull();
    }

    hung = false;
    const done = await poll(
      () => w.deliveriesOf(tarpit.id),
      (ds) => ds.every((d) => d.status === 'succeeded'),
      30_000,
      'every tarpit delivery to succeed after recovery',
    );
    for (const d of done) expect(d.attemptCount).toBeLessThanOrEqual(8);
    const seen = deliveredIds('/tarpit');
    for (const d of done) expect(seen.has(d.id)).toBe(true);
    expect(answered.size).toBeGreaterThanOrEqual(12);
    const closed = await poll(() => getSubscription(tarpit.id), (s) => s.breaker.state === 'closed', 5_000, 'the breaker to close');
    expect(closed.breaker.until).toBeNull();
    expect(closed.status).toBe('active');
  });
});

describe('a receiver that answers 503 at once', () => {
  it('is retried with backoff (real attempts) and does not open the breaker', async () => {
    w.receiver.script('/busy', (_req, n) => (n <= 2 ? { status: 503, body: 'busy' } : ok()));
    const busy = await subscribe('/busy');
    const delivery = await w.publishTo(busy.id, { type: 'report.ready', data: { report_id: 'rep_busy' } });
    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts.map((a) => a.responseStatus)).toEqual([503, 503, 200]);
    expect((await getSubscription(busy.id)).breaker.state).toBe('closed');
  });
});

describe('a slow receiver', () => {
  it('gets its deliveries, a few at a time, without opening the breaker', async () => {
    let inFlight = 0;
    let most = 0;
    w.receiver.script('/slow', () => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      setTimeout(() => (inFlight -= 1), 300);
      return { status: 200, body: 'ok', delayMs: 300 };
    });
    const slow = await subscribe('/slow');
    await publishMany(8, 'slow');
    await poll(() => w.deliveriesOf(slow.id), (ds) => ds.length === 8 && ds.every((d) => d.status === 'succeeded'), 30_000, 'slow deliveries');
    // Answers that take longer than WEBHOOK_SLOW_ATTEMPT_MS keep the receiver at WEBHOOK_MIN_IN_FLIGHT, across both workers.
    expect(most).toBeLessThanOrEqual(2);
    expect((await getSubscription(slow.id)).breaker.state).toBe('closed');
  });

  it('shows the deliveries waiting for a slot as waiting, with why and until when, without an attempt', async () => {
    w.receiver.script('/slots', () => ({ status: 200, body: 'ok', delayMs: 300 }));
    const sub = await subscribe('/slots');
    await publishMany(12, 'slots');
    // Two at a time (300 ms answers keep it at WEBHOOK_MIN_IN_FLIGHT): the others are held back and say so.
    const seen = await poll(
      () => w.deliveriesOf(sub.id),
      (ds) => ds.some((d) => d.status === 'pending' && d.waitReason === 'in_flight_cap'),
      10_000,
      'a delivery shown waiting for a slot',
    );
    for (const d of seen.filter((x) => x.status === 'pending' && x.waitReason === 'in_flight_cap')) {
      expect(d.attemptCount).toBe(0);
      expect(d.nextAttemptAt).not.toBeNull();
    }
    const done = await poll(() => w.deliveriesOf(sub.id), (ds) => ds.length === 12 && ds.every((d) => d.status === 'succeeded'), 30_000, 'every delivery');
    expect(Math.max(...done.map((d) => d.attemptCount))).toBe(1);
  });
});

describe('rate_limit', () => {
  it('is validated, shown and editable on every level', async () => {
    const bad = await w.api().post(`${w.levelBase()}/subscriptions`).set(bearer(w.org.admin.token))
      .send({ name: 'x', url: w.receiver.url('/x'), events: ['report.ready'], rate_limit: 0 });
    expect(bad.status).toBe(400);
    const sub = await subscribe('/throttled-api', { rate_limit: 3 });
    expect((await getSubscription(sub.id)).rate_limit).toBe(3);
    const patched = await w.api().patch(`${w.levelBase()}/subscriptions/${sub.id}`).set(bearer(w.org.admin.token)).send({ rate_limit: null });
    expect(patched.status).toBe(200);
    expect(patched.body.rate_limit).toBeNull();
  });

  it('holds the receiver to its rate within 10 % across two workers, and waiting is not an attempt', async () => {
    w.receiver.script('/throttled', ok);
    const sub = await subscribe('/throttled', { rate_limit: 5 });
    await publishMany(12, 'throttle');
    const requests = await w.receiver.waitForRequests('/throttled', 12, 20_000);
    const at = requests.map((r) => r.at).sort((a, b) => a - b);
    const perSecond = (at.length - 1) / ((at[at.length - 1] - at[0]) / 1000);
    expect(perSecond).toBeLessThanOrEqual(5 * 1.1);
    const deliveries = await poll(() => w.deliveriesOf(sub.id), (ds) => ds.every((d) => d.status === 'succeeded'), 10_000, 'throttled');
    for (const d of deliveries) expect(d.attemptCount).toBe(1);
  });
});

describe('a delivery held back past its retry window', () => {
  let local: World;
  beforeAll(async () => {
    // A tiny backoff makes the retry window (all 8 attempts' waits) a fraction of a second, shorter than the breaker.
    local = await createWorld({
      env: {
        ...ISOLATION_ENV,
        WEBHOOK_BACKOFF_BASE_MS: '20',
        WEBHOOK_BACKOFF_MAX_MS: '40',
        WEBHOOK_BREAKER_FAILURES: '1',
        WEBHOOK_BREAKER_OPEN_MS: '5000',
        WEBHOOK_BREAKER_MAX_OPEN_MS: '5000',
        WEBHOOK_FAILING_AFTER_FAILURES: '3',
      },
    });
  });
  afterAll(() => local?.close());

  it('fails terminally, says why, and counts toward failing', async () => {
    local.receiver.script('/dead', () => ({ hang: true }));
    const sub = await local.subscribe({ name: 'dead', url: local.receiver.url('/dead'), events: ['report.ready'] });
    for (let i = 0; i < 6; i++) await local.publish({ type: 'report.ready', data: { report_id: `rep_dead_${i}` } });
    const ended = await poll(
      () => local.deliveriesOf(sub.id),
      (ds) => ds.every((d) => d.status === 'failed'),
      30_000,
      'every held-back delivery to fail',
    );
    const heldBack = ended.filter((d) => /held back/.test(d.failureReason ?? ''));
    expect(heldBack.length).toBeGreaterThanOrEqual(3);
    for (const d of ended) expect(d.attemptCount).toBeLessThanOrEqual(8);
    expect((await local.subscription(sub.id)).status).toBe('failing');
  });
});

describe('across a worker SIGKILL', () => {
  let local: World;
  let child: ChildWorker | null = null;
  let rescuer: RunningWorker | null = null;
  // A retry window (all 8 attempts' backoff) of about a minute: the kill and the takeover fit well inside it.
  const env = {
    ...ISOLATION_ENV,
    WEBHOOK_BREAKER_OPEN_MS: '1500',
    WEBHOOK_BREAKER_MAX_OPEN_MS: '1500',
    WEBHOOK_BACKOFF_BASE_MS: '1000',
    WEBHOOK_BACKOFF_MAX_MS: '8000',
  };
  beforeAll(async () => {
    buildWorker();
    local = await createWorld({ env, worker: false });
  });
  afterAll(async () => {
    child?.process.kill('SIGKILL');
    await rescuer?.close();
    await local?.close();
  });

  it('keeps postponed deliveries and sends them all once the endpoint recovers', async () => {
    let hung = true;
    local.receiver.script('/flaky', () => (hung ? { hang: true } : ok()));
    const sub = await local.subscribe({ name: 'flaky', url: local.receiver.url('/flaky'), events: ['report.ready'] });
    child = spawnWorker(local, env);
    await child.waitForLog('Worker started');
    for (let i = 0; i < 8; i++) await local.publish({ type: 'report.ready', data: { report_id: `rep_kill_${i}` } });
    await poll(() => local.subscription(sub.id), (s) => s.breakerState === 'open', 20_000, 'the breaker to open');
    child.process.kill('SIGKILL');
    await child.exited;
    child = null;
    hung = false;
    // Another worker takes over; jobs the dead one held come back when its locks run out (the stalled check).
    rescuer = await startWorker(local.workerDeps, { schedule: false, delivery: { stalledInterval: 500 } });
    const done = await poll(
      () => local.deliveriesOf(sub.id),
      (ds) => ds.length === 8 && ds.every((d) => d.status === 'succeeded'),
      60_000,
      'every delivery to succeed after the restart',
    );
    for (const d of done) expect(d.attemptCount).toBeLessThanOrEqual(8);
  }, 90_000);
});

describe('deliveries published while the breaker is open', () => {
  let local: World;
  // A long open period, so that the deliveries published while it is open are certainly held back at enqueue, inside
  // a retry window (all 8 attempts' backoff) of about a minute.
  const env = {
    ...ISOLATION_ENV,
    WEBHOOK_BREAKER_OPEN_MS: '3000',
    WEBHOOK_BREAKER_MAX_OPEN_MS: '3000',
    WEBHOOK_BACKOFF_BASE_MS: '1000',
    WEBHOOK_BACKOFF_MAX_MS: '8000',
  };
  beforeAll(async () => {
    local = await createWorld({ env, worker: false });
  });
  afterAll(() => local?.close());

  const publishVia = (deps: ReturnType<typeof outboxDeps>, tag: string, n: number) =>
    withOutbox(deps, async (_tx, p) => {
      for (let i = 0; i < n; i++) await p({ type: 'report.ready', organizationId: local.org.id, data: { report_id: `rep_${tag}_${i}` } });
    });

  // 4 before: two in flight open the breaker, one of the two waiting probes. 2 before: nothing waits when it opens,
  // so the first delivery held back at enqueue is the one that probes.
  it.each([4, 2])('are enqueued held back, no worker touching them, and go as soon as the probe succeeds (%i before)', async (before) => {
    let hung = true;
    const path = `/down${before}`;
    local.receiver.script(path, () => (hung ? { hang: true } : ok()));
    const sub = await local.subscribe({ name: 'down', url: local.receiver.url(path), events: ['report.ready'] });
    const deps = outboxDeps({ ...local.h.deps, config: local.h.config }, local.h.deps.deliveryQueue);
    const worker = await startWorker(local.workerDeps, { schedule: false });
    try {
      await publishVia(deps, 'before', before);
      await poll(() => local.subscription(sub.id), (s) => s.breakerState === 'open', 10_000, 'the breaker to open');
      const postponedBefore = await postponedCount('breaker_open');

      await publishVia(deps, 'during', 6);
      const during = (await local.deliveriesOf(sub.id)).filter((d) => /rep_during/.test(JSON.stringify(d.payload)));
      expect(during).toHaveLength(6);
      for (const d of during) {
        // Shown as waiting behind the breaker from the start, and their jobs delayed: not run by a worker.
        expect(d).toMatchObject({ status: 'pending', attemptCount: 0, waitReason: 'breaker_open' });
        expect(d.nextAttemptAt!.getTime()).toBeGreaterThan(Date.now());
        expect(await local.h.deps.deliveryQueue.getJobState(d.id)).toBe('delayed');
      }
      expect(await postponedCount('breaker_open')).toBe(postponedBefore);

      // The endpoint recovers: the probe at the end of the open period closes the breaker, which wakes the held
      // deliveries at once (not at their far wake-up, minutes away).
      hung = false;
      const done = await poll(
        () => local.deliveriesOf(sub.id),
        (ds) => ds.length === before + 6 && ds.every((d) => d.status === 'succeeded'),
        20_000,
        'every delivery to succeed once the probe has closed the breaker',
      );
      for (const d of done.filter((x) => during.some((h) => h.id === x.id))) expect(d.attemptCount).toBe(1);
    } finally {
      await worker.close();
    }
  });

  it('go at once when the breaker has closed meanwhile (the row still showing it open)', async () => {
    local.receiver.script('/fine', ok);
    const sub = await local.subscribe({ name: 'fine', url: local.receiver.url('/fine'), events: ['report.ready'] });
    // The row's mirror says open; Redis, where the breaker lives, has no such state: the deliveries are not held.
    await local.h.deps.prisma.webhookSubscription.update({
      where: { id: sub.id },
      data: { breakerState: 'open', breakerUntil: new Date(Date.now() + 60_000) },
    });
    const deps = outboxDeps({ ...local.h.deps, config: local.h.config }, local.h.deps.deliveryQueue);
    const worker = await startWorker(local.workerDeps, { schedule: false });
    try {
      await publishVia(deps, 'stale', 3);
      await local.receiver.waitForRequests('/fine', 3, 10_000);
    } finally {
      await worker.close();
    }
  });
});

async function postponedCount(reason: string): Promise<number> {
  const metric = await deliveriesPostponed.get();
  return metric.values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

describe('a fair share of a backlog', () => {
  let local: World;
  beforeAll(async () => {
    local = await createWorld({ env: { ...ISOLATION_ENV, WEBHOOK_FAIR_SHARE_PER_SECOND: '2' }, worker: false });
  });
  afterAll(() => local?.close());

  it("lets another subscription's fresh events go before a large backlog", async () => {
    local.receiver.script('/backlog', ok);
    local.receiver.script('/fresh', ok);
    await local.subscribe({ name: 'backlog', url: local.receiver.url('/backlog'), events: ['report.ready'] });
    await local.subscribe({ name: 'fresh', url: local.receiver.url('/fresh'), events: ['spend.threshold_crossed'] });
    const deps = outboxDeps({ ...local.h.deps, config: local.h.config }, local.h.deps.deliveryQueue);
    const publish = (type: 'report.ready' | 'spend.threshold_crossed', data: Record<string, unknown>) =>
      withOutbox(deps, (_tx, p) => p({ type, organizationId: local.org.id, data }));
    for (let i = 0; i < 150; i++) await publish('report.ready', { report_id: `rep_backlog_${i}` });
    for (let i = 0; i < 3; i++) await publish('spend.threshold_crossed', { threshold: i });

    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      await local.receiver.waitForRequests('/fresh', 3, 20_000);
      // The backlog beyond its share went behind: the fresh events arrived long before the backlog was through.
      expect(local.receiver.requests('/backlog').length).toBeLessThan(60);
      await local.receiver.waitForRequests('/backlog', 150, 30_000);
    } finally {
      await worker.close();
    }
  });

  it("puts a new subscription's sudden burst behind another's events from its first deliveries on", async () => {
    local.receiver.script('/burst', ok);
    local.receiver.script('/steady', ok);
    await local.subscribe({ name: 'burst', url: local.receiver.url('/burst'), events: ['finding.confirmed'] });
    await local.subscribe({ name: 'steady', url: local.receiver.url('/steady'), events: ['monitoring.regression'] });
    const deps = outboxDeps({ ...local.h.deps, config: local.h.config }, local.h.deps.deliveryQueue);
    // 8 deliveries at once from a subscription never seen before: 8 a second against a share of 2. (Averaged over
    // the decay's whole 5 s, as the first version did, they read 1.6 a second and queued ahead with no priority.)
    await withOutbox(deps, async (_tx, p) => {
      for (let i = 0; i < 8; i++) await p({ type: 'finding.confirmed', organizationId: local.org.id, data: { finding_id: `fnd_burst_${i}` } });
    });
    await withOutbox(deps, (_tx, p) => p({ type: 'monitoring.regression', organizationId: local.org.id, data: { n: 1 } }));

    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      await local.receiver.waitForRequests('/steady', 1, 20_000);
      await local.receiver.waitForRequests('/burst', 8, 20_000);
      const arrivals = local.receiver.requests().map((r) => r.path).filter((path) => path === '/steady' || path === '/burst');
      expect(arrivals.indexOf('/steady')).toBe(0);
    } finally {
      await worker.close();
    }
  });
  it('counts each subscription of one enqueued batch at its own rate', async () => {
    local.receiver.script('/batch-heavy', ok);
    local.receiver.script('/batch-light', ok);
    await local.subscribe({ name: 'batch heavy', url: local.receiver.url('/batch-heavy'), events: ['assessment.completed'] });
    await local.subscribe({ name: 'batch light', url: local.receiver.url('/batch-light'), events: ['pr_review.completed'] });
    const deps = outboxDeps({ ...local.h.deps, config: local.h.config }, local.h.deps.deliveryQueue);
    // One transaction, so one enqueue (and one rate script) for both subscriptions: 8 for one, 1 for the other.
    await withOutbox(deps, async (_tx, p) => {
      for (let i = 0; i < 8; i++) await p({ type: 'assessment.completed', organizationId: local.org.id, data: { assessment_id: `asm_${i}` } });
      await p({ type: 'pr_review.completed', organizationId: local.org.id, data: { pr_number: 1 } });
    });

    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      await local.receiver.waitForRequests('/batch-heavy', 8, 20_000);
      await local.receiver.waitForRequests('/batch-light', 1, 20_000);
      const arrivals = local.receiver.requests().map((r) => r.path).filter((path) => path.startsWith('/batch-'));
      expect(arrivals.indexOf('/batch-light')).toBe(0);
    } finally {
      await worker.close();
    }
  });
});

describe('a subscription whose deliveries are held back', () => {
  let local: World;
  beforeAll(async () => {
    // The default fair share (50/s): the few deliveries below never exceed it. The breaker never opens here.
    local = await createWorld({ env: { ...ISOLATION_ENV, WEBHOOK_BREAKER_FAILURES: '50' }, worker: false });
  });
  afterAll(() => local?.close());

  it("goes behind another subscription's fresh events at enqueue, whatever its rate", async () => {
    let hung = true;
    local.receiver.script('/held', () => (hung ? { hang: true } : ok()));
    local.receiver.script('/held-fine', ok);
    await local.subscribe({ name: 'held', url: local.receiver.url('/held'), events: ['report.ready'] });
    await local.subscribe({ name: 'held fine', url: local.receiver.url('/held-fine'), events: ['spend.threshold_crossed'] });
    const deps = outboxDeps({ ...local.h.deps, config: local.h.config }, local.h.deps.deliveryQueue);
    const publishReports = (tag: string, n: number) =>
      withOutbox(deps, async (_tx, p) => {
        for (let i = 0; i < n; i++) await p({ type: 'report.ready', organizationId: local.org.id, data: { report_id: `rep_${tag}_${i}` } });
      });

    // Two attempts hang in the subscription's two slots; the third delivery is postponed for a slot.
    const first = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 4 } });
    const postponedBefore = await postponedCount('in_flight_cap');
    await publishReports('first', 3);
    await poll(() => postponedCount('in_flight_cap'), (n) => n > postponedBefore, 10_000, 'a delivery postponed for a slot');
    await first.close();
    hung = false;

    // Ten more for it, enqueued before one for another subscription; a worker with one slot then takes them.
    await publishReports('after', 10);
    await withOutbox(deps, (_tx, p) => p({ type: 'spend.threshold_crossed', organizationId: local.org.id, data: { threshold: 1 } }));
    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      const [fine] = await local.receiver.waitForRequests('/held-fine', 1, 20_000);
      const after = await poll(
        async () => local.receiver.requests('/held').filter((r) => r.body.toString('utf8').includes('rep_after_')),
        (rs) => rs.length === 10,
        30_000,
        'the ten later deliveries',
      );
      expect(Math.min(...after.map((r) => r.at))).toBeGreaterThanOrEqual(fine.at);
    } finally {
      await worker.close();
    }
  });
});
