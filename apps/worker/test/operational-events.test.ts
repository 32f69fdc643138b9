// Operational events end to end (docs/webhooks.md "Operational events"): real HTTPS receivers on loopback, the real API and an
// in-process BullMQ worker. A subscription's own trouble (failing, disabled, recovered, a delivery exhausted, its
// breaker opening and closing) reaches the organization's other subscriptions and notification targets as events,
// published in the transaction that records the change; never the subscription it is about, never a secret or the
// URL's path, and no loop between two dead receivers.
import { bearer } from '../../api/test/support/fixtures';
import { OPERATIONAL_EVENT_TYPES } from '@svc/webhooks';
import { createWorld, poll, type CreatedSubscription, type World } from './support/world';
import type { ReceivedRequest } from './support/receiver';
import { publishEvent } from '@svc/outbox';
import type { DeliveryRef } from '@svc/outbox';
import { recordAttempt, attemptRecorder } from '../src/record';

const ok = () => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' });

interface Envelope {
  id: string;
  type: string;
  data: Record<string, unknown>;
}

const envelopeOf = (request: ReceivedRequest) => JSON.parse(request.body.toString('utf8')) as Envelope;

/** A subscription that listens to the operational events, at /ops-<tag> (its query carries a token). */
async function observe(w: World, tag: string): Promise<{ path: string; subscription: CreatedSubscription }> {
  const path = `/ops-${tag}`;
  w.receiver.script(path, ok);
  const subscription = await w.subscribe({ name: `observer ${tag}`, url: w.receiver.url(path), events: [...OPERATIONAL_EVENT_TYPES] });
  return { path, subscription };
}

/** The operational events an observer received about a subscription, in arrival order. */
function eventsAbout(w: World, path: string, subscriptionId: string): Envelope[] {
  return w.receiver.requests(path).map(envelopeOf).filter((e) => e.data.subscription_id === subscriptionId);
}

async function waitForEvent(w: World, path: string, subscriptionId: string, type: string, count = 1): Promise<Envelope[]> {
  return poll(
    async () => eventsAbout(w, path, subscriptionId).filter((e) => e.type === type),
    (events) => events.length >= count,
    20_000,
    `${count} ${type} about ${subscriptionId} at ${path}`,
  );
}

/** A subscription to report.ready and to every operational event (so it could receive events about itself). */
async function subject(w: World, path: string): Promise<CreatedSubscription> {
  return w.subscribe({
    name: `subject ${path}`,
    url: `${w.receiver.url(path)}?token=query-credential-${path.slice(1)}`,
    events: ['report.ready', ...OPERATIONAL_EVENT_TYPES],
  });
}

const publishReport = (w: World, subscriptionId: string, tag: string) =>
  w.publishTo(subscriptionId, { type: 'report.ready', projectId: null, assessmentId: null, data: { report_id: `rep_${tag}` } });

function expectNoCredential(event: Envelope, sub: CreatedSubscription, path: string): void {
  const text = JSON.stringify(event);
  expect(text).not.toContain(sub.secret);
  expect(text).not.toContain('query-credential');
  expect(text).not.toContain(path);
}

describe('subscription health', () => {
  let w: World;
  let observer: { path: string; subscription: CreatedSubscription };
  beforeAll(async () => {
    w = await createWorld({
      env: {
        WEBHOOK_MAX_ATTEMPTS: '2',
        WEBHOOK_FAILING_AFTER_FAILURES: '2',
        WEBHOOK_DISABLE_AFTER_FAILURES: '3',
        WEBHOOK_DISABLE_MIN_SPAN_HOURS: '0',
      },
    });
    observer = await observe(w, 'health');
  });
  afterAll(() => w?.close());

  it('tells the organization a delivery exhausted its attempts, the subscription is failing, then recovered; never the subject itself', async () => {
    let down = true;
    w.receiver.script('/flaky', () => (down ? { status: 503, body: 'try later' } : ok()));
    w.receiver.script('/slack/T0/B0/target-secret', ok);
    const target = await w
      .api()
      .post('/api/v1/notification-targets')
      .set(bearer(w.org.admin.token))
      .send({ kind: 'slack', name: 'Ops channel', url: w.receiver.url('/slack/T0/B0/target-secret'), events: ['webhook.subscription_failing'] });
    expect(target.status).toBe(201);
    const flaky = await subject(w, '/flaky');

    const first = await publishReport(w, flaky.id, 'flaky-1');
    expect(first).toMatchObject({ status: 'failed', attemptCount: 2 });
    const [exhausted] = await waitForEvent(w, observer.path, flaky.id, 'webhook.delivery_exhausted');
    expect(exhausted.data).toEqual({
      kind: 'webhook.delivery_exhausted',
      subscription_id: flaky.id,
      subscription_kind: 'webhook',
      level: 'organization',
      project_id: null,
      assessment_id: null,
      url_host: `127.0.0.1:${w.receiver.port}`,
      last_error: 'HTTP 503',
      exhausted_delivery_id: first.id,
      exhausted_event_id: first.eventId,
      exhausted_event_type: 'report.ready',
      attempts: 2,
    });
    expectNoCredential(exhausted, flaky, '/flaky');

    await publishReport(w, flaky.id, 'flaky-2');
    const [failing] = await waitForEvent(w, observer.path, flaky.id, 'webhook.subscription_failing');
    expect(failing.data).toMatchObject({ subscription_id: flaky.id, level: 'organization', last_error: 'HTTP 503', consecutive_failures: 2 });
    expect(typeof failing.data.first_failure_at).toBe('string');
    expectNoCredential(failing, flaky, '/flaky');
    expect((await w.subscription(flaky.id)).status).toBe('failing');

    // The notification target gets the same event as a message for people, with the host and not the path.
    const [slack] = await w.receiver.waitForRequests('/slack/T0/B0/target-secret', 1);
    const message = JSON.parse(slack.body.toString('utf8'));
    expect(message.text).toBe(`Webhook subscription to 127.0.0.1:${w.receiver.port} is failing`);
    expect(JSON.stringify(message)).not.toContain('query-credential');

    down = false;
    expect(await publishReport(w, flaky.id, 'flaky-3')).toMatchObject({ status: 'succeeded' });
    // Recorded with the success, in its transaction: the moment the delivery shows succeeded, so do these.
    expect(await w.subscription(flaky.id)).toMatchObject({ status: 'active', consecutiveFailures: 0 });
    expect(await w.h.deps.prisma.event.count({ where: { type: 'webhook.subscription_recovered', data: { path: ['subscription_id'], equals: flaky.id } } })).toBe(1);
    const [recovered] = await waitForEvent(w, observer.path, flaky.id, 'webhook.subscription_recovered');
    expect(recovered.data).toMatchObject({ subscription_id: flaky.id, last_error: null });
    expect((await w.subscription(flaky.id))).toMatchObject({ status: 'active', consecutiveFailures: 0 });

    // The subject never received an event about itself (only its report.ready deliveries reached it), and no
    // delivery of one was even made for it.
    const toSubject = w.receiver.requests('/flaky').map(envelopeOf);
    expect(new Set(toSubject.map((e) => e.type))).toEqual(new Set(['report.ready']));
    const own = await w.h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId: flaky.id, eventType: { startsWith: 'webhook.' } } });
    expect(own).toEqual([]);
    // One event per transition: recovered once, failing once.
    const events = await w.h.deps.prisma.event.findMany({ where: { organizationId: w.org.id, type: { startsWith: 'webhook.subscription_' } } });
    const aboutFlaky = events.filter((e) => (e.data as Record<string, unknown>).subscription_id === flaky.id).map((e) => e.type).sort();
    expect(aboutFlaky).toEqual(['webhook.subscription_failing', 'webhook.subscription_recovered']);
  });

  it('tells the organization a subscription was disabled by 410 Gone, with the reason', async () => {
    w.receiver.script('/gone', () => ({ status: 410, body: 'gone' }));
    const gone = await subject(w, '/gone');
    const delivery = await publishReport(w, gone.id, 'gone');
    expect(delivery.status).toBe('failed');
    const [disabled] = await waitForEvent(w, observer.path, gone.id, 'webhook.subscription_disabled');
    expect(disabled.data).toMatchObject({
      subscription_id: gone.id,
      url_host: `127.0.0.1:${w.receiver.port}`,
      last_error: 'HTTP 410',
      disabled_reason: expect.stringMatching(/410/),
    });
    expectNoCredential(disabled, gone, '/gone');
    expect((await w.subscription(gone.id)).status).toBe('disabled');
    expect(w.receiver.requests('/gone').map(envelopeOf).every((e) => e.type === 'report.ready')).toBe(true);
  });

  it('tells the organization a subscription was disabled after too many failures', async () => {
    w.receiver.script('/dead', () => ({ status: 500, body: 'broken' }));
    const dead = await subject(w, '/dead');
    for (const tag of ['a', 'b', 'c']) expect((await publishReport(w, dead.id, `dead-${tag}`)).status).toBe('failed');
    const [disabled] = await waitForEvent(w, observer.path, dead.id, 'webhook.subscription_disabled');
    expect(disabled.data).toMatchObject({
      subscription_id: dead.id,
      last_error: 'HTTP 500',
      disabled_reason: expect.stringMatching(/3 consecutive failed deliveries/),
      consecutive_failures: 3,
    });
    await waitForEvent(w, observer.path, dead.id, 'webhook.subscription_failing');
    await waitForEvent(w, observer.path, dead.id, 'webhook.delivery_exhausted', 3);
    expect(w.receiver.requests('/dead').map(envelopeOf).every((e) => e.type === 'report.ready')).toBe(true);
  });

  it('recovers, with its event, a subscription that turned failing after its successful delivery was loaded', async () => {
    w.receiver.script('/raced', ok);
    const raced = await subject(w, '/raced');
    // A delivery that no worker runs (published without an enqueue), then the subscription turns failing.
    const event = await w.h.deps.prisma.$transaction((tx) =>
      publishEvent(tx, { type: 'report.ready', organizationId: w.org.id, projectId: null, assessmentId: null, data: { report_id: 'rep_raced' } }),
    );
    const deliveryId = await w.deliveryFor(event, raced.id);
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: raced.id }, data: { status: 'failing', consecutiveFailures: 2, firstFailureAt: new Date() } });
    const published: DeliveryRef[] = [];
    const now = w.h.clock.now();
    await recordAttempt(
      w.h.deps.prisma,
      {
        deliveryId,
        subscriptionId: raced.id,
        attempt: { number: 1, startedAt: now, durationMs: 5, outcome: 'success', responseStatus: 200, responseHeaders: {}, responseBody: 'ok', error: null, retryAfterMs: null },
        delivery: { status: 'succeeded' },
        subscription: { kind: 'success' },
        now,
      },
      attemptRecorder(w.h.deps.prisma),
      published,
    );
    expect(await w.subscription(raced.id)).toMatchObject({ status: 'active', consecutiveFailures: 0, firstFailureAt: null });
    const recovered = await w.h.deps.prisma.event.findMany({ where: { type: 'webhook.subscription_recovered', data: { path: ['subscription_id'], equals: raced.id } } });
    expect(recovered).toHaveLength(1);
    expect(published.map((d) => d.subscriptionId)).toContain(observer.subscription.id);
    expect(published.map((d) => d.subscriptionId)).not.toContain(raced.id);
  });

  it('does not loop between two dead receivers that listen to each other', async () => {
    w.receiver.script('/dead-a', () => ({ status: 500 }));
    w.receiver.script('/dead-b', () => ({ status: 500 }));
    const a = await subject(w, '/dead-a');
    const b = await w.subscribe({ name: 'dead b', url: w.receiver.url('/dead-b'), events: [...OPERATIONAL_EVENT_TYPES] });
    expect((await publishReport(w, a.id, 'loop')).status).toBe('failed');
    await waitForEvent(w, observer.path, a.id, 'webhook.delivery_exhausted');
    // B gets A's exhausted event, fails to take it, and that failure publishes no further exhausted event.
    const toB = await poll(() => w.deliveriesOf(b.id), (ds) => ds.length >= 1 && ds.every((d) => d.status !== 'pending'), 20_000, 'B to fail');
    expect(toB.map((d) => d.status)).toEqual(['failed']);
    await new Promise((r) => setTimeout(r, 1_000));
    const exhaustedAboutB = await w.h.deps.prisma.event.count({
      where: { organizationId: w.org.id, type: 'webhook.delivery_exhausted', data: { path: ['subscription_id'], equals: b.id } },
    });
    expect(exhaustedAboutB).toBe(0);
    expect(await w.deliveriesOf(a.id)).toHaveLength(1);
  });
});

describe('circuit breaker', () => {
  let w: World;
  let observer: { path: string; subscription: CreatedSubscription };
  beforeAll(async () => {
    w = await createWorld({
      env: {
        WEBHOOK_TIMEOUT_MS: '400',
        WEBHOOK_CONNECT_TIMEOUT_MS: '400',
        WEBHOOK_MIN_IN_FLIGHT: '2',
        WEBHOOK_MAX_IN_FLIGHT: '8',
        WEBHOOK_BREAKER_FAILURES: '2',
        WEBHOOK_BREAKER_OPEN_MS: '600',
        WEBHOOK_BREAKER_MAX_OPEN_MS: '1200',
        WEBHOOK_BACKOFF_BASE_MS: '200',
        WEBHOOK_BACKOFF_MAX_MS: '400',
      },
    });
    observer = await observe(w, 'breaker');
  });
  afterAll(() => w?.close());

  it('tells the organization the breaker opened and closed again', async () => {
    let hung = true;
    w.receiver.script('/tarpit', () => (hung ? { hang: true } : ok()));
    const tarpit = await subject(w, '/tarpit');
    for (let i = 0; i < 4; i++) await w.publish({ type: 'report.ready', projectId: null, assessmentId: null, data: { report_id: `rep_tarpit_${i}` } });

    const [opened] = await waitForEvent(w, observer.path, tarpit.id, 'webhook.breaker_opened');
    expect(opened.data).toMatchObject({ subscription_id: tarpit.id, url_host: `127.0.0.1:${w.receiver.port}`, last_error: 'timeout' });
    expect(Date.parse(String(opened.data.probe_at))).not.toBeNaN();
    expectNoCredential(opened, tarpit, '/tarpit');

    hung = false;
    const [closed] = await waitForEvent(w, observer.path, tarpit.id, 'webhook.breaker_closed');
    expect(closed.data).toMatchObject({ subscription_id: tarpit.id, level: 'organization', last_error: null });
    expect(w.receiver.requests('/tarpit').map(envelopeOf).every((e) => e.type === 'report.ready')).toBe(true);
  });
});
