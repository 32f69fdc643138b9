// The opt-in Standard Webhooks signatures (signature_scheme standard_webhooks) as a receiver sees them: the
// reference verifier (the `standardwebhooks` package) accepts the request with the `whsec_` string shown at creation,
// during a rotation with either secret and afterwards with the new one only; SPEC's X-Service-Signature still comes
// along (the stripe verifier accepts it); a subscription on the default scheme gets no webhook-* headers.
import Stripe from 'stripe';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { bearer } from '../../api/test/support/fixtures';
import type { ReceivedRequest } from './support/receiver';
import { createWorld, type World } from './support/world';

const stripe = new Stripe('sk_test_x');

let w: World;
beforeAll(async () => {
  w = await createWorld({ env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' } });
});
afterAll(() => w?.close());
afterEach(() => w.h.clock.reset());

const REPORT = { report_id: 'rep_1' };

/** The reference verifier, run with its clock at the worker's (the library reads Date.now() itself). */
function referenceAccepts(request: ReceivedRequest, secret: string): boolean {
  const clock = jest.spyOn(Date, 'now').mockReturnValue(w.h.clock.now().getTime());
  try {
    new StandardWebhook(secret).verify(request.body, request.headers as Record<string, string>, { jsonParse: false });
    return true;
  } catch {
    return false;
  } finally {
    clock.mockRestore();
  }
}

function stripeAccepts(request: ReceivedRequest, secret: string): boolean {
  try {
    return stripe.webhooks.signature!.verifyHeader(request.body, request.headers['x-service-signature'] as string, secret, 300, undefined, w.h.clock.now().getTime());
  } catch {
    return false;
  }
}

function patch(id: string, body: Record<string, unknown>) {
  return w.api().patch(`/api/v1/webhooks/subscriptions/${id}`).set(bearer(w.org.admin.token)).send(body);
}

describe('signature_scheme standard_webhooks', () => {
  it('signs so that the reference verifier accepts the whsec_ string shown at creation, and keeps X-Service-Signature', async () => {
    const path = '/standard';
    const sub = await w.subscribe({ name: 'standard', url: w.receiver.url(path), events: ['report.ready'], signature_scheme: 'standard_webhooks' });
    expect(sub.signature_scheme).toBe('standard_webhooks');
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: REPORT });
    expect(delivery.status).toBe('succeeded');
    const [request] = await w.receiver.waitForRequests(path, 1);

    expect(request.headers['webhook-id']).toBe(delivery.id);
    expect(request.headers['webhook-timestamp']).toBe(request.headers['x-service-timestamp']);
    expect(request.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(referenceAccepts(request, sub.secret)).toBe(true);
    expect(referenceAccepts(request, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).toBe(false);
    // SPEC's headers stay, so a receiver may switch verifiers on its own schedule.
    expect(request.headers['x-service-delivery']).toBe(delivery.id);
    expect(request.headers['x-service-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(stripeAccepts(request, sub.secret)).toBe(true);
  });

  it('signs with both secrets, space-separated, for 72 hours after a rotation, then with the new one only', async () => {
    const path = '/standard-rotation';
    const sub = await w.subscribe({ name: 'rotation', url: w.receiver.url(path), events: ['report.ready'], signature_scheme: 'standard_webhooks' });
    const rotated = await w.api().post(`/api/v1/webhooks/subscriptions/${sub.id}/rotate-secret`).set(bearer(w.org.admin.token));
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.secret as string;

    await w.publishTo(sub.id, { type: 'report.ready', data: REPORT });
    const [during] = await w.receiver.waitForRequests(path, 1);
    expect((during.headers['webhook-signature'] as string).split(' ')).toHaveLength(2);
    expect(referenceAccepts(during, newSecret)).toBe(true);
    expect(referenceAccepts(during, sub.secret)).toBe(true);

    w.h.clock.advance(72 * 3600 * 1000 + 60_000);
    await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_2' } });
    const after = (await w.receiver.waitForRequests(path, 2))[1];
    expect((after.headers['webhook-signature'] as string).split(' ')).toHaveLength(1);
    expect(referenceAccepts(after, newSecret)).toBe(true);
    expect(referenceAccepts(after, sub.secret)).toBe(false);
  });

  it('keeps one webhook-id for every attempt of a delivery (receivers deduplicate on it)', async () => {
    const path = '/standard-retry';
    w.receiver.script(path, (_req, n) => (n === 1 ? { status: 503, headers: { 'content-type': 'text/plain' }, body: 'busy' } : { status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' }));
    const sub = await w.subscribe({ name: 'retry', url: w.receiver.url(path), events: ['report.ready'], signature_scheme: 'standard_webhooks' });
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: REPORT });
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 2 });
    const requests = w.receiver.requests(path);
    expect(requests.map((r) => r.headers['webhook-id'])).toEqual([delivery.id, delivery.id]);
    expect(requests.every((r) => referenceAccepts(r, sub.secret))).toBe(true);
  });
});

describe('signature_scheme service (the default) and switching', () => {
  it('sends no webhook-* headers by default; a PATCH to standard_webhooks adds them from the next attempt on', async () => {
    const path = '/switch';
    const sub = await w.subscribe({ name: 'switch', url: w.receiver.url(path), events: ['report.ready'] });
    expect(sub.signature_scheme).toBe('service');
    await w.publishTo(sub.id, { type: 'report.ready', data: REPORT });
    const [before] = await w.receiver.waitForRequests(path, 1);
    expect(Object.keys(before.headers).filter((h) => h.startsWith('webhook-'))).toEqual([]);
    expect(stripeAccepts(before, sub.secret)).toBe(true);

    const switched = await patch(sub.id, { signature_scheme: 'standard_webhooks' });
    expect(switched.status).toBe(200);
    expect(switched.body.signature_scheme).toBe('standard_webhooks');
    await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_2' } });
    const after = (await w.receiver.waitForRequests(path, 2))[1];
    expect(referenceAccepts(after, sub.secret)).toBe(true);
    expect(stripeAccepts(after, sub.secret)).toBe(true);

    const back = await patch(sub.id, { signature_scheme: 'service' });
    expect(back.body.signature_scheme).toBe('service');
    await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_3' } });
    const last = (await w.receiver.waitForRequests(path, 3))[2];
    expect(last.headers['webhook-signature']).toBeUndefined();
  });

  it('signs for an older base64url secret with the same key bytes, which the verifier takes once re-encoded', async () => {
    const path = '/legacy-secret';
    const sub = await w.subscribe({ name: 'legacy', url: w.receiver.url(path), events: ['report.ready'], signature_scheme: 'standard_webhooks' });
    // A secret as made before this scheme existed: base64url, with the characters standard base64 lacks.
    const key = Buffer.from('fb-_'.repeat(10) + 'abc', 'base64url');
    const legacy = `whsec_${key.toString('base64url')}`;
    const { seal } = await import('@svc/db');
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { secretEnc: seal(legacy, w.h.deps.config.encryptionKey) } });
    await w.publishTo(sub.id, { type: 'report.ready', data: REPORT });
    const [request] = await w.receiver.waitForRequests(path, 1);
    expect(referenceAccepts(request, `whsec_${key.toString('base64')}`)).toBe(true);
    expect(stripeAccepts(request, legacy)).toBe(true);
  });
});
