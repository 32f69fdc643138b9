// What a receiver gets: each payload format's exact body bytes and headers, signatures that our verifySignature
// and the `stripe` package both accept, during and after the 72-hour rotation window, the Authorization value,
// TLS verified against the configured CA, and the connection made to the checked address under the URL's name.
import Stripe from 'stripe';
import { PAYLOAD_FORMATS, renderPayload, verifySignature, type Envelope, type PayloadFormat } from '@svc/webhooks';
import type { Lookup } from '@svc/net';
import { bearer } from '../../api/test/support/fixtures';
import { startReceiver, type ReceivedRequest, type Receiver } from './support/receiver';
import { RECEIVER_HOSTNAME, makeServerCertificate } from './support/tls';
import { createWorld, type World } from './support/world';

const stripe = new Stripe('sk_test_x');

const lookups: string[] = [];
const testLookup: Lookup = async (hostname) => {
  lookups.push(hostname);
  if (hostname === RECEIVER_HOSTNAME) return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let w: World;
beforeAll(async () => {
  w = await createWorld({ env: { WEBHOOK_ALLOWED_HOSTS: `127.0.0.1,${RECEIVER_HOSTNAME}` }, lookup: testLookup });
});
afterAll(() => w?.close());
afterEach(() => w.h.clock.reset());

const FINDING = { finding_id: 'fnd_01', project_id: 'prj_01', assessment_id: 'asm_01', severity: 'high', status: 'open', title: 'SQL injection | in "login"' };

function nowMs(): number {
  return w.h.clock.now().getTime();
}

function signatureParts(header: string): { t: string; v1: string[] } {
  const parts = header.split(',').map((p) => p.split('='));
  return { t: parts.find(([k]) => k === 't')![1], v1: parts.filter(([k]) => k === 'v1').map(([, v]) => v) };
}

/** Both independent checks of SPEC "Signing" against the receiver's clock. */
function expectSignedWith(request: ReceivedRequest, secret: string): void {
  const header = request.headers['x-service-signature'] as string;
  expect(verifySignature(request.body, header, secret, { now: nowMs() })).toEqual({ ok: true, timestamp: Number(signatureParts(header).t) });
  expect(stripe.webhooks.signature!.verifyHeader(request.body, header, secret, 300, undefined, nowMs())).toBe(true);
}

function expectNotSignedWith(request: ReceivedRequest, secret: string): void {
  const header = request.headers['x-service-signature'] as string;
  expect(verifySignature(request.body, header, secret, { now: nowMs() })).toEqual({ ok: false, reason: 'signature_mismatch' });
  expect(() => stripe.webhooks.signature!.verifyHeader(request.body, header, secret, 300, undefined, nowMs())).toThrow(/No signatures found/);
}

async function deliverOnce(path: string, body: Record<string, unknown>, data: Record<string, unknown> = FINDING, query = '') {
  const sub = await w.subscribe({ name: path, url: w.receiver.url(path) + query, events: ['finding.created'], ...body });
  const delivery = await w.publishTo(sub.id, { type: 'finding.created', data });
  const [request] = await w.receiver.waitForRequests(path, 1);
  return { sub, delivery, request };
}

describe.each(PAYLOAD_FORMATS)('payload format %s', (format: PayloadFormat) => {
  let result: Awaited<ReturnType<typeof deliverOnce>>;
  beforeAll(async () => {
    const splunkIndex = format === 'splunk_hec' ? { splunk_index: 'security' } : {};
    // A microsoft_sentinel URL must have the Logs Ingestion shape.
    const path = format === 'microsoft_sentinel' ? `/dataCollectionRules/dcr-${'0'.repeat(32)}/streams/Custom-Format` : `/format-${format}`;
    const query = format === 'microsoft_sentinel' ? '?api-version=2023-01-01' : '';
    result = await deliverOnce(path, { payload_format: format, ...splunkIndex }, FINDING, query);
  });

  it('sends the rendered bytes of the payload snapshot, exactly', () => {
    const { delivery, request, sub } = result;
    expect(delivery.status).toBe('succeeded');
    const expected = renderPayload(format, delivery.payload as unknown as Envelope, { splunkIndex: (sub.splunk_index as string) ?? null });
    expect(request.method).toBe('POST');
    expect(request.body.equals(expected.body)).toBe(true);
    expect(request.headers['content-length']).toBe(String(expected.body.length));
  });

  it('carries the six SPEC headers', () => {
    const { delivery, request } = result;
    const expectedType = format === 'cef' ? /^text\/plain; charset=utf-8$/ : /^application\/json$/;
    expect(request.headers['content-type']).toMatch(expectedType);
    expect(request.headers['x-service-event']).toBe('finding.created');
    expect(request.headers['x-service-delivery']).toBe(delivery.id);
    expect(request.headers['x-service-format']).toBe(format);
    const header = request.headers['x-service-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(request.headers['x-service-timestamp']).toBe(signatureParts(header).t);
    expect(Math.abs(Number(signatureParts(header).t) * 1000 - delivery.attempts[0].startedAt.getTime())).toBeLessThan(1000);
    expect(request.headers['user-agent']).toMatch(/^Service-Webhooks\//);
    expect(request.headers.authorization).toBeUndefined();
  });

  it('is signed so that verifySignature and the stripe package both accept it', () => {
    expectSignedWith(result.request, result.sub.secret);
    expectNotSignedWith(result.request, 'whsec_not_the_secret');
  });

  it('has the shape of its format', () => {
    const { request, delivery } = result;
    const text = request.body.toString('utf8');
    const envelope = delivery.payload as unknown as Envelope;
    switch (format) {
      case 'service':
        expect(JSON.parse(text)).toEqual(envelope);
        expect(envelope).toMatchObject({ id: delivery.id, type: 'finding.created', data: { kind: 'finding.created', severity: 'high' } });
        break;
      case 'splunk_hec': {
        const event = JSON.parse(text);
        expect(event).toMatchObject({ event: envelope, index: 'security', fields: { event_type: 'finding.created', severity: 'high' } });
        expect(Object.values(event.fields).every((v) => typeof v === 'string')).toBe(true);
        expect(text).toMatch(/"time":\d+\.\d{3}[,}]/);
        break;
      }
      case 'microsoft_sentinel': {
        const records = JSON.parse(text);
        expect(records).toHaveLength(1);
        expect(records[0].TimeGenerated).toBe(envelope.created_at);
        expect(Object.values(records[0]).every((v) => v === null || typeof v !== 'object')).toBe(true);
        break;
      }
      case 'cef':
        expect(text).toMatch(/^CEF:0\|[^\n]*\|finding\.created\|[^\n]*\|8\|/);
        expect(text).not.toContain('\n');
        expect(text).toContain(`externalId=${envelope.event_id}`);
        break;
    }
  });
});

describe('secret rotation', () => {
  it('signs with both secrets for 72 hours after a rotation, then with the new one only', async () => {
    const path = '/rotation';
    const sub = await w.subscribe({ name: 'rotation', url: w.receiver.url(path), events: ['report.ready'] });
    const rotated = await w.api().post(`/api/v1/webhooks/subscriptions/${sub.id}/rotate-secret`).set(bearer(w.org.admin.token));
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.secret as string;
    expect(newSecret).not.toBe(sub.secret);

    await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_1' } });
    const [during] = await w.receiver.waitForRequests(path, 1);
    expect(signatureParts(during.headers['x-service-signature'] as string).v1).toHaveLength(2);
    expectSignedWith(during, newSecret);
    expectSignedWith(during, sub.secret);

    w.h.clock.advance(72 * 3600 * 1000 + 60_000);
    await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_2' } });
    const after = (await w.receiver.waitForRequests(path, 2))[1];
    expect(signatureParts(after.headers['x-service-signature'] as string).v1).toHaveLength(1);
    expect(Number(after.headers['x-service-timestamp']) * 1000).toBeGreaterThan(Date.now() + 71 * 3600 * 1000);
    expectSignedWith(after, newSecret);
    expectNotSignedWith(after, sub.secret);
  });
});

describe('request details', () => {
  it('sends the subscription authorization value (e.g. a Splunk HEC token) as the Authorization header', async () => {
    const { request, delivery } = await deliverOnce('/with-authorization', { payload_format: 'splunk_hec', authorization: 'Splunk 0f3c-token' });
    expect(delivery.status).toBe('succeeded');
    expect(request.headers.authorization).toBe('Splunk 0f3c-token');
  });

  it('connects to the address that passed the check while keeping the hostname for Host and TLS (SNI, certificate)', async () => {
    const sub = await w.subscribe({ name: 'by-name', url: w.receiver.url('/by-name'), events: ['report.ready'] });
    // The API resolves with the system DNS, which knows no receiver.test: point the stored URL at the name directly.
    const byName = w.receiver.url('/by-name', RECEIVER_HOSTNAME);
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: byName } });
    lookups.length = 0;
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'r' } });
    expect(delivery.status).toBe('succeeded');
    const [request] = await w.receiver.waitForRequests('/by-name', 1);
    expect(request.headers.host).toBe(`${RECEIVER_HOSTNAME}:${w.receiver.port}`);
    expect(request.servername).toBe(RECEIVER_HOSTNAME);
    // One resolution, by the safety check; the connection used its answer rather than asking again.
    expect(lookups).toEqual([RECEIVER_HOSTNAME]);
  });

  describe('with a receiver whose certificate no trusted CA signed', () => {
    let untrusted: Receiver;
    beforeAll(async () => {
      const selfSigned = await makeServerCertificate();
      untrusted = await startReceiver({ key: selfSigned.private, cert: selfSigned.cert });
    });
    afterAll(() => untrusted.close());

    it('refuses the TLS connection: every attempt is a tls_error and nothing is sent', async () => {
      const sub = await w.subscribe({ name: 'untrusted', url: untrusted.url('/x'), events: ['report.ready'] });
      const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'r' } });
      expect(delivery.status).toBe('failed');
      expect(delivery.attempts).toHaveLength(8);
      expect(new Set(delivery.attempts.map((a) => a.outcome))).toEqual(new Set(['tls_error']));
      expect(delivery.attempts[0].error).toMatch(/certificate/i);
      expect(untrusted.requests()).toHaveLength(0);
      expect((await w.subscription(sub.id)).consecutiveFailures).toBe(1);
    });
  });
});

describe('the payload format of a delivery', () => {
  it('is fixed when the delivery is created: after a PATCH of the format, a pending retry still sends the old bytes', async () => {
    const path = '/format-fixed-per-delivery';
    let patched: Promise<{ status: number }> | undefined;
    // The first attempt fails; while it is in flight the subscription is switched to CEF.
    w.receiver.script(path, (_req, n) => {
      if (n === 1) {
        patched = w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(w.org.admin.token)).send({ payload_format: 'cef' }).then((r) => r);
        return { status: 500, headers: { 'content-type': 'text/plain' }, body: 'later', delayMs: 500 };
      }
      return { status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' };
    });
    const sub = await w.subscribe({ name: path, url: w.receiver.url(path), events: ['finding.created'], payload_format: 'service' });
    const delivery = await w.publishTo(sub.id, { type: 'finding.created', data: FINDING });

    expect((await patched)?.status).toBe(200);
    expect((await w.subscription(sub.id)).payloadFormat).toBe('cef');
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 2, payloadFormat: 'service' });
    const [first, retry] = w.receiver.requests(path);
    const serviceBytes = renderPayload('service', delivery.payload as unknown as Envelope).body;
    for (const request of [first, retry]) {
      expect(request.body.equals(serviceBytes)).toBe(true);
      expect(request.headers['x-service-format']).toBe('service');
      expect(request.headers['content-type']).toBe('application/json');
    }

    // A delivery created after the PATCH uses the new format.
    const later = await w.publishTo(sub.id, { type: 'finding.created', data: FINDING });
    expect(later.payloadFormat).toBe('cef');
    const last = w.receiver.requests(path).at(-1)!;
    expect(last.body.equals(renderPayload('cef', later.payload as unknown as Envelope).body)).toBe(true);
    expect(last.headers['x-service-format']).toBe('cef');
  });
});
