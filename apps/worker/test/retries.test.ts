// Outcomes and their consequences: retry with backoff then success, eight failures then terminal failure,
// redirects and timeouts as failures, subscription health (failing, disabled, reset), the 256 KiB cap, and a
// URL found unsafe at delivery time.
import type { Lookup } from '@svc/net';
import { verifySignature } from '@svc/webhooks';
import { bearer } from '../../api/test/support/fixtures';
import { createWorld, type CreatedSubscription, type World } from './support/world';

const internalLookup: Lookup = async (hostname) => {
  if (hostname === 'internal.example.test') return [{ address: '10.1.2.3', family: 4 }];
  if (hostname === 'azure-platform.example.test') return [{ address: '168.63.129.16', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let w: World;
beforeAll(async () => {
  w = await createWorld({ env: { WEBHOOK_TIMEOUT_MS: '500' }, lookup: internalLookup });
});
afterAll(() => w?.close());
afterEach(() => w.h.clock.reset());

const status = (code: number, body = `status ${code}`) => ({ status: code, headers: { 'content-type': 'text/plain' }, body });

async function subscribe(path: string, extra: Record<string, unknown> = {}): Promise<CreatedSubscription> {
  return w.subscribe({ name: path, url: w.receiver.url(path), events: ['report.ready', 'finding.created'], ...extra });
}

function deliver(sub: CreatedSubscription, data: Record<string, unknown> = { report_id: 'rep_1' }) {
  return w.publishTo(sub.id, { type: 'report.ready', data });
}

describe('retries', () => {
  it('retries a 500 with backoff and succeeds on the third attempt, sending the same bytes each time', async () => {
    w.receiver.script('/flaky', (_req, n) => (n <= 2 ? status(500, 'try again') : status(200)));
    const sub = await subscribe('/flaky');
    const delivery = await deliver(sub);

    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 3, nextAttemptAt: null, failureReason: null });
    expect(delivery.attempts.map((a) => [a.number, a.outcome, a.responseStatus])).toEqual([
      [1, 'http_error', 500],
      [2, 'http_error', 500],
      [3, 'success', 200],
    ]);
    expect(delivery.attempts[0].responseBody).toBe('try again');
    const requests = w.receiver.requests('/flaky');
    expect(requests).toHaveLength(3);
    expect(new Set(requests.map((r) => r.headers['x-service-delivery']))).toEqual(new Set([delivery.id]));
    expect(requests.every((r) => r.body.equals(requests[0].body))).toBe(true);
    for (const r of requests) {
      expect(verifySignature(r.body, r.headers['x-service-signature'] as string, sub.secret).ok).toBe(true);
    }
    // Backoff: the second attempt waits at least the base delay (50 ms, -20 % jitter) after the first ends.
    const gap = delivery.attempts[1].startedAt.getTime() - (delivery.attempts[0].startedAt.getTime() + delivery.attempts[0].durationMs);
    expect(gap).toBeGreaterThanOrEqual(35);
  });

  it('fails a delivery for good after 8 failed attempts, keeping the first 4 KiB of each response', async () => {
    w.receiver.script('/down', () => status(503, 'x'.repeat(10_000)));
    const sub = await subscribe('/down');
    const delivery = await deliver(sub);

    expect(delivery.status).toBe('failed');
    expect(delivery.attemptCount).toBe(8);
    expect(delivery.completedAt).not.toBeNull();
    expect(delivery.failureReason).toMatch(/8 attempts failed.*HTTP 503/);
    expect(delivery.attempts.map((a) => a.number)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(delivery.attempts.every((a) => a.outcome === 'http_error' && a.responseStatus === 503)).toBe(true);
    expect(delivery.attempts[0].responseBody).toHaveLength(4096);
    expect(delivery.attempts[0].responseHeaders).toMatchObject({ 'content-type': 'text/plain', 'content-length': '10000' });
    await new Promise((r) => setTimeout(r, 500));
    expect(w.receiver.requests('/down')).toHaveLength(8);
    const health = await w.subscription(sub.id);
    expect(health).toMatchObject({ status: 'active', consecutiveFailures: 1 });
    expect(health.firstFailureAt).not.toBeNull();
  });

  it('does not follow a redirect: a 3xx is a failed attempt', async () => {
    w.receiver.script('/moved', (_req, n) => (n === 1 ? { status: 302, headers: { location: w.receiver.url('/elsewhere') } } : status(204, '')));
    const delivery = await deliver(await subscribe('/moved'));
    expect(delivery.attempts.map((a) => [a.outcome, a.responseStatus])).toEqual([['redirect', 302], ['success', 204]]);
    expect(delivery.attempts[0].responseHeaders).toMatchObject({ location: w.receiver.url('/elsewhere') });
    expect(w.receiver.requests('/elsewhere')).toHaveLength(0);
  });

  it('gives up on a response slower than the configured timeout and records a timeout', async () => {
    w.receiver.script('/slow', (_req, n) => (n === 1 ? { ...status(200), delayMs: 2_000 } : status(200)));
    const delivery = await deliver(await subscribe('/slow'));
    expect(delivery.status).toBe('succeeded');
    const [first, second] = delivery.attempts;
    expect(first).toMatchObject({ outcome: 'timeout', responseStatus: null });
    expect(first.error).toMatch(/timeout/i);
    expect(first.durationMs).toBeGreaterThanOrEqual(450);
    expect(first.durationMs).toBeLessThan(1_500);
    expect(second.outcome).toBe('success');
  });

  it('records a network error when nothing listens', async () => {
    const sub = await w.subscribe({ name: 'closed', url: 'https://127.0.0.1:1/closed', events: ['report.ready'] });
    const delivery = await deliver(sub);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts[0]).toMatchObject({ outcome: 'network_error', responseStatus: null });
    expect(delivery.attempts[0].error).toMatch(/ECONNREFUSED/);
  });
});

describe('subscription health', () => {
  async function failTerminally(sub: CreatedSubscription, count: number) {
    const deliveries = await Promise.all(Array.from({ length: count }, (_, i) => deliver(sub, { report_id: `rep_${i}` })));
    expect(deliveries.every((d) => d.status === 'failed' && d.attemptCount === 8)).toBe(true);
  }

  it('turns failing after 3 terminal failures, and disabled after 10 only once they span 24 hours', async () => {
    w.receiver.script('/broken', () => status(500));
    const sub = await subscribe('/broken');

    await failTerminally(sub, 2);
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'active', consecutiveFailures: 2 });
    await failTerminally(sub, 1);
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'failing', consecutiveFailures: 3 });

    // Failing subscriptions still receive deliveries.
    await failTerminally(sub, 7);
    const tenWithinADay = await w.subscription(sub.id);
    expect(tenWithinADay).toMatchObject({ status: 'failing', consecutiveFailures: 10 });

    w.h.clock.advance(24 * 3600 * 1000 + 60_000);
    await failTerminally(sub, 1);
    const disabled = await w.subscription(sub.id);
    expect(disabled).toMatchObject({ status: 'disabled', consecutiveFailures: 11 });
    expect(disabled.disabledReason).toMatch(/11 consecutive failed deliveries/);
    expect(disabled.firstFailureAt).toEqual(tenWithinADay.firstFailureAt);

    // Disabled subscriptions receive nothing.
    const before = w.receiver.requests('/broken').length;
    const published = await w.publish({ type: 'report.ready', data: { report_id: 'after' } });
    expect(await w.h.deps.prisma.webhookDelivery.count({ where: { eventId: published.eventId, subscriptionId: sub.id } })).toBe(0);
    expect(w.receiver.requests('/broken')).toHaveLength(before);
  });

  it('returns a failing subscription to active, with a zero count, on its next success', async () => {
    let healthy = false;
    w.receiver.script('/recovering', () => (healthy ? status(200) : status(500)));
    const sub = await subscribe('/recovering');
    await failTerminally(sub, 3);
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'failing', consecutiveFailures: 3 });

    healthy = true;
    expect((await deliver(sub)).status).toBe('succeeded');
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'active', consecutiveFailures: 0, firstFailureAt: null });
  });

  it('stops retrying a pending delivery once its subscription is disabled', async () => {
    w.receiver.script('/switched-off', () => status(500));
    const sub = await subscribe('/switched-off');
    w.h.clock.reset();
    const published = await w.publish({ type: 'report.ready', data: { report_id: 'r' } });
    await w.receiver.waitForRequests('/switched-off', 1);
    const off = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(w.org.admin.token)).send({ active: false });
    expect(off.status).toBe(200);
    const delivery = await w.waitForDelivery(await w.deliveryFor(published, sub.id));
    expect(delivery.status).toBe('failed');
    expect(delivery.failureReason).toMatch(/subscription disabled/);
    expect(delivery.attemptCount).toBeLessThan(8);
  });
});

describe('payload size cap', () => {
  it('fails a delivery over 256 KiB at once, sends nothing, and leaves the subscription alone', async () => {
    const sub = await subscribe('/big');
    const delivery = await deliver(sub, { report_id: 'big', notes: 'n'.repeat(300 * 1024) });
    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(delivery.failureReason).toMatch(/payload too large/);
    expect(delivery.attempts).toEqual([expect.objectContaining({ number: 1, outcome: 'payload_too_large', responseStatus: null })]);
    expect(delivery.attempts[0].error).toMatch(/over the 262144-byte limit/);
    expect(w.receiver.requests('/big')).toHaveLength(0);
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'active', consecutiveFailures: 0, firstFailureAt: null });
  });
});

describe('URL safety at delivery time', () => {
  async function expectDisabledWithoutRequest(sub: CreatedSubscription, path: string) {
    const delivery = await deliver(sub);
    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(delivery.attempts).toEqual([expect.objectContaining({ outcome: 'unsafe_url', responseStatus: null, responseBody: null })]);
    expect(delivery.attempts[0].error).toMatch(/not a public address \(private\)/);
    const after = await w.subscription(sub.id);
    expect(after.status).toBe('disabled');
    expect(after.disabledReason).toMatch(/URL became unsafe/);
    expect(w.receiver.requests(path)).toHaveLength(0);
  }

  it('disables the subscription at once when its stored URL now names a private address', async () => {
    const sub = await subscribe('/private-literal');
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: 'https://10.0.0.1/hook' } });
    await expectDisabledWithoutRequest(sub, '/private-literal');
  });

  it('disables the subscription at once when its host now resolves to a private address', async () => {
    const sub = await subscribe('/private-dns');
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: 'https://internal.example.test/hook' } });
    await expectDisabledWithoutRequest(sub, '/private-dns');
  });

  it("disables the subscription at once when its host now resolves to Azure's platform address (cloud metadata)", async () => {
    const sub = await subscribe('/azure-platform');
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: 'https://azure-platform.example.test/hook' } });
    const delivery = await deliver(sub);
    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(delivery.attempts).toEqual([expect.objectContaining({ outcome: 'unsafe_url', responseStatus: null, responseBody: null })]);
    expect(delivery.attempts[0].error).toMatch(/not a public address \(cloud metadata\)/);
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'disabled', disabledReason: expect.stringMatching(/URL became unsafe/) });
  });

  it('treats a host that does not resolve as a network error to retry, not as unsafe', async () => {
    const sub = await subscribe('/unresolvable');
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: 'https://nowhere.example.test/hook' } });
    const delivery = await deliver(sub);
    expect(delivery.attempts).toHaveLength(8);
    expect(delivery.attempts.every((a) => a.outcome === 'network_error')).toBe(true);
    expect((await w.subscription(sub.id)).status).toBe('active');
  });
});
