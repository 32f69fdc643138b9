// The egress proxy (WEBHOOK_EGRESS_PROXY) with a real one: Debian's tinyproxy, with credentials, whose outgoing
// connections leave from their own source address (127.0.0.2) as a proxy's fixed addresses would. Every delivery
// goes through it as a CONNECT to the checked address (never a name), TLS stays end to end (SNI and certificate
// of the receiver's host name, verified by the worker inside the tunnel), a target resolving to a private address
// is refused before the proxy is asked anything, and a failing proxy is a failed attempt that says why.
import type { Lookup } from '@svc/net';
import { seal } from '@svc/db';
import { createRedis } from '@svc/queue';
import { credentialDestination } from '@svc/webhooks';
import { createEntraTokens } from '../src/http/entra-token';
import { createPostWebhook } from '../src/http/post';
import { outcomeOfHttp } from '../src/http/outcome';
import { trustedSecureContext } from '../src/http/trust';
import { freePort } from '../../../test-support/private-services';
import { startReceiver, type Receiver } from './support/receiver';
import { RECEIVER_HOSTNAME, makeServerCertificate } from './support/tls';
import { PROXY_PASSWORD, PROXY_SOURCE_ADDRESS, PROXY_USER, startTinyproxy, type Tinyproxy } from './support/tinyproxy';
import { createWorld, poll, type World } from './support/world';
import { fakeGitHub } from './support/trackers';
import { bearer, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { insertFinding } from '../../api/test/support/domain';
import { CLIENT_ID, CLIENT_SECRET, TENANT_ID, startEntra } from './support/entra';

const INTERNAL_HOSTNAME = 'internal.receiver.test';
const UNTRUSTED_HOSTNAME = 'untrusted.receiver.test';

const testLookup: Lookup = async (hostname) => {
  if (hostname === RECEIVER_HOSTNAME || hostname === UNTRUSTED_HOSTNAME) return [{ address: '127.0.0.1', family: 4 }];
  if (hostname === INTERNAL_HOSTNAME) return [{ address: '10.20.30.40', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let proxy: Tinyproxy;
let w: World;
let untrusted: Receiver;

beforeAll(async () => {
  proxy = await startTinyproxy();
  w = await createWorld({
    lookup: testLookup,
    env: {
      // The receivers are allow-listed (they are on loopback); the internal name is not.
      WEBHOOK_ALLOWED_HOSTS: `127.0.0.1,${RECEIVER_HOSTNAME},${UNTRUSTED_HOSTNAME}`,
      WEBHOOK_EGRESS_PROXY: proxy.url,
      WEBHOOK_MAX_ATTEMPTS: '1',
      WEBHOOK_HEC_ACK_POLL_MS: '100',
      WEBHOOK_HEC_ACK_TIMEOUT_MS: '1500',
    },
  });
  // A receiver whose certificate no trusted CA signed: only a client that checks the certificate itself notices.
  const selfSigned = await makeServerCertificate();
  untrusted = await startReceiver({ key: selfSigned.private, cert: selfSigned.cert });
}, 60_000);

afterAll(async () => {
  await untrusted?.close();
  await w?.close();
  await proxy?.close();
});

/** The stored URL points at a name the API's system DNS does not know: set it directly. */
async function subscribeTo(url: string, name: string) {
  const sub = await w.subscribe({ name, url: w.receiver.url('/placeholder'), events: ['report.ready'] });
  await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url } });
  return sub;
}

it('sends every delivery through the proxy, as a CONNECT to the checked address, TLS end to end to the host name', async () => {
  const sub = await subscribeTo(`https://${RECEIVER_HOSTNAME}:${w.receiver.port}/proxied`, 'proxied');
  for (let i = 0; i < 3; i += 1) {
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: `rep_${i}` } });
    expect(delivery.status).toBe('succeeded');
  }
  const received = w.receiver.requests('/proxied');
  expect(received).toHaveLength(3);
  // What receivers see: the proxy's source address, and the TLS session the worker opened for their host name.
  expect(received.map((r) => r.remoteAddress)).toEqual(Array(3).fill(PROXY_SOURCE_ADDRESS));
  expect(received.map((r) => r.servername)).toEqual(Array(3).fill(RECEIVER_HOSTNAME));
  // What the proxy saw: CONNECT to the checked address, never the name; kept-alive tunnels are reused.
  const targets = proxy.connectTargets();
  expect(targets.length).toBeGreaterThanOrEqual(1);
  expect(new Set(targets)).toEqual(new Set([`127.0.0.1:${w.receiver.port}`]));
  expect(proxy.log()).not.toContain(RECEIVER_HOSTNAME);
});

it("sends an issue export's create request and its lookup for the marker through the proxy, to the checked address", async () => {
  // A GitHub Enterprise that creates the issue and answers 502; with one attempt (WEBHOOK_MAX_ATTEMPTS) the export
  // fails, and exporting again looks for the issue (a GET of the repository's issues) before creating one.
  const tracker = fakeGitHub(w.receiver, '/ghe-proxied/api/v3', 'acme/proxied', 'ghp_proxiedToken', {
    answer: (n, normal) => (n === 1 ? { status: 502, body: 'bad gateway' } : normal),
  });
  const project = await insertProject(w.h, w.org.id);
  const finding = await insertFinding(w.h, await insertAssessment(w.h, w.org.id, project.id), { title: 'Proxied' });
  const target = await w.api().post('/api/v1/issue-export-targets').set(bearer(w.org.admin.token)).send({ name: 'proxied', ...tracker.targetFields });
  expect(target.status).toBe(201);
  // The tracker as it would be configured by name (its credentials bound to that name, as the API does).
  const baseUrl = `https://${RECEIVER_HOSTNAME}:${w.receiver.port}/ghe-proxied/api/v3`;
  await w.h.deps.prisma.issueExportTarget.update({ where: { id: target.body.id }, data: { baseUrl, credentialDestination: credentialDestination(baseUrl) } });
  const exportOnce = async () => {
    const res = await w.api().post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(w.org.admin.token)).send({ target_id: target.body.id });
    expect(res.status).toBe(202);
    return poll(() => w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id: res.body.id } }), (e) => e.status !== 'pending', 20_000, 'the export');
  };
  expect(await exportOnce()).toMatchObject({ status: 'failed', lastError: 'all 1 attempts failed; last: HTTP 502' });
  expect(await exportOnce()).toMatchObject({ status: 'succeeded', externalKey: 'acme/proxied#1' });
  expect(tracker.issues).toHaveLength(1);
  const sent = [...tracker.creates(), ...tracker.lookups()];
  expect(sent.map((r) => r.method).sort()).toEqual(['GET', 'POST']);
  expect(sent.map((r) => r.remoteAddress)).toEqual([PROXY_SOURCE_ADDRESS, PROXY_SOURCE_ADDRESS]);
  expect(sent.map((r) => r.servername)).toEqual([RECEIVER_HOSTNAME, RECEIVER_HOSTNAME]);
  expect(proxy.log()).not.toContain(RECEIVER_HOSTNAME);
});

it('refuses a target that resolves to a private address without asking the proxy anything', async () => {
  const asked = proxy.connectTargets().length;
  const sub = await subscribeTo(`https://${INTERNAL_HOSTNAME}:${w.receiver.port}/internal`, 'internal');
  const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_internal' } });
  expect(delivery.status).toBe('failed');
  expect(delivery.attempts).toEqual([expect.objectContaining({ outcome: 'unsafe_url', responseStatus: null })]);
  expect(delivery.attempts[0].error).toMatch(/not a public address \(private\)/);
  expect(proxy.connectTargets()).toHaveLength(asked);
  expect(proxy.log()).not.toContain('10.20.30.40');
  expect(await w.subscription(sub.id)).toMatchObject({ status: 'disabled' });
});

it('verifies the receiver certificate inside the tunnel: a certificate no trusted CA signed fails the attempt', async () => {
  const sub = await subscribeTo(`https://${UNTRUSTED_HOSTNAME}:${untrusted.port}/untrusted`, 'untrusted');
  const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_untrusted' } });
  expect(delivery.status).toBe('failed');
  expect(delivery.attempts).toEqual([expect.objectContaining({ outcome: 'tls_error', responseStatus: null })]);
  expect(proxy.connectTargets()).toContain(`127.0.0.1:${untrusted.port}`);
  expect(untrusted.requests()).toHaveLength(0);
});

describe('Splunk HEC indexer acknowledgement (hec_ack) polls', () => {
  const CHANNEL = '0f8fad5b-d9cb-469f-a165-70867728950e';
  let indexed = true;
  beforeAll(() => {
    w.receiver.script('/services/collector/event', () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: '{"text":"Success","code":0,"ackId":0}' }));
    w.receiver.script('/services/collector/ack', () => ({ status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ acks: { 0: indexed } }) }));
  });

  async function hecSubscription(host: string, name: string) {
    const sub = await w.subscribe({
      name, url: w.receiver.url('/services/collector/event'), events: ['report.ready'],
      payload_format: 'splunk_hec', splunk_channel: CHANNEL, authorization: 'Splunk hec-token', hec_ack: true,
    });
    const url = `https://${host}:${w.receiver.port}/services/collector/event`;
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url, credentialDestination: credentialDestination(url) } });
    return sub;
  }

  it('go through the proxy too, as a CONNECT to the checked address, TLS to the host name', async () => {
    indexed = true;
    const sub = await hecSubscription(RECEIVER_HOSTNAME, 'hec-proxied');
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_hec' } });
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    const [ack] = w.receiver.requests('/services/collector/ack');
    expect(ack.remoteAddress).toBe(PROXY_SOURCE_ADDRESS);
    expect(ack.servername).toBe(RECEIVER_HOSTNAME);
    expect(ack.headers).toMatchObject({ authorization: 'Splunk hec-token', 'x-splunk-request-channel': CHANNEL });
    expect(proxy.log()).not.toContain(RECEIVER_HOSTNAME);
  });

  it('are never sent to a host that turned private after the event POST: the ack times out instead', async () => {
    indexed = false;
    const sub = await hecSubscription(RECEIVER_HOSTNAME, 'hec-rebound');
    const polls = w.receiver.requests('/services/collector/ack').length;
    const published = await w.publish({ type: 'report.ready', data: { report_id: 'rep_rebound' } });
    const deliveryId = await w.deliveryFor(published, sub.id);
    await w.receiver.waitForRequests('/services/collector/event', 2);
    // The name now resolves to a private address (a DNS rebinding): every later poll is refused before the proxy.
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: `https://${INTERNAL_HOSTNAME}:${w.receiver.port}/services/collector/event` } });
    indexed = true;
    const delivery = await w.waitForDelivery(deliveryId);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts.map((a) => a.outcome)).toEqual(['ack_timeout']);
    expect(proxy.log()).not.toContain('10.20.30.40');
    expect(proxy.connectTargets().some((t) => t.startsWith('10.20.30.40'))).toBe(false);
    // At most a poll that was already on its way before the change reached the receiver.
    expect(w.receiver.requests('/services/collector/ack').length - polls).toBeLessThanOrEqual(1);
  });
});

it('records a proxy that is down as a failed attempt naming the proxy, without its credentials', async () => {
  const sub = await subscribeTo(`https://${RECEIVER_HOSTNAME}:${w.receiver.port}/proxy-down`, 'proxy-down');
  const port = proxy.port;
  await proxy.close();
  try {
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_down' } });
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts).toEqual([expect.objectContaining({ outcome: 'network_error', responseStatus: null })]);
    expect(delivery.attempts[0].error).toBe(`egress proxy 127.0.0.1:${port} unreachable: ECONNREFUSED`);
    expect(delivery.attempts[0].error).not.toContain(PROXY_PASSWORD);
    expect(w.receiver.requests('/proxy-down')).toHaveLength(0);
  } finally {
    proxy = await startTinyproxy();
  }
});

it('asks Entra ID for tokens through the proxy too, CONNECTing to the checked address of the authority', async () => {
  const entra = await startEntra({ tokenTtlSeconds: 300 });
  entra.useCertificate(w.tls);
  const config = w.h.config;
  const tokens = createEntraTokens({
    authorityHost: entra.authorityHost,
    timeoutMs: 5000,
    secureContext: trustedSecureContext(w.tls.caFile),
    proxy: { url: new URL(proxy.url), connectTimeoutMs: 5000 },
    allowedHosts: config.webhooks.allowedHosts,
    redis: () => createRedis(config.redis),
    redisPrefix: config.redisPrefix,
    key: config.encryptionKey,
  });
  try {
    const credentials = seal(JSON.stringify({ tenant_id: TENANT_ID, client_id: CLIENT_ID, client_secret: CLIENT_SECRET }), config.encryptionKey);
    const token = await tokens.token('sub_entra_proxy', credentials);
    expect(await entra.isValid(token.accessToken)).toBe(true);
    expect(proxy.connectTargets()).toContain(new URL(entra.authorityHost).host);
  } finally {
    await tokens.close();
    await entra.close();
  }
});

describe('the transport against a failing proxy', () => {
  const request = (receiver: Receiver) => ({
    url: new URL(`https://${RECEIVER_HOSTNAME}:${receiver.port}/direct`),
    address: '127.0.0.1',
    family: 4 as const,
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{}'),
  });
  const transport = (proxyUrl: string, timeoutMs = 3000) =>
    createPostWebhook({
      timeoutMs,
      secureContext: trustedSecureContext(w.tls.caFile),
      maxSocketsPerAddress: 2,
      proxy: { url: new URL(proxyUrl), connectTimeoutMs: timeoutMs },
    });

  it('fails with the proxy answer when it refuses the credentials (tinyproxy answers 401, others 407)', async () => {
    const post = transport(`http://${PROXY_USER}:wrong-password@127.0.0.1:${proxy.port}`);
    try {
      const result = await post(request(w.receiver));
      expect(result.response).toBeNull();
      expect(outcomeOfHttp(result)).toBe('network_error');
      expect(result.error?.message).toMatch(
        new RegExp(`^egress proxy 127\\.0\\.0\\.1:${proxy.port} refused CONNECT 127\\.0\\.0\\.1:${w.receiver.port}: HTTP 40[17] `),
      );
      expect(result.error?.message).not.toContain('wrong-password');
    } finally {
      post.close();
    }
  });

  it('times out on a proxy that accepts the connection and never answers', async () => {
    const { createServer } = await import('node:net');
    const silent = createServer(() => undefined);
    const port = await freePort();
    await new Promise<void>((resolve) => silent.listen(port, '127.0.0.1', resolve));
    const post = transport(`http://127.0.0.1:${port}`, 500);
    try {
      const result = await post(request(w.receiver));
      expect(result.response).toBeNull();
      expect(['timeout', 'network_error']).toContain(outcomeOfHttp(result));
      expect(result.error?.message).toMatch(/Timeout|did not open a tunnel/);
    } finally {
      post.close();
      silent.close();
    }
  });
});
