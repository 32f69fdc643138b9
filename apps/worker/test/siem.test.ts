// SIEM deliveries end to end. Microsoft Sentinel: a real OAuth 2.0 server (oidc-provider, client credentials, 8 s
// tokens) stands in for Entra ID, and a Logs Ingestion stand-in checks each bearer token with it (401 when unknown,
// revoked or expired). Splunk HEC: a receiver that, like a token with indexer acknowledgement, refuses requests
// without a channel. Plus the Sentinel URL checks and the sentinel-schema route at the three levels.
import { EVENT_TYPES, isOperationalEventType, type EventType } from '@svc/webhooks';
import { findingEventData } from '@svc/domain';
import { createRedis } from '@svc/queue';
import { insertAssessment, insertProject, bearer } from '../../api/test/support/fixtures';
import { buildWorker, spawnWorker, type ChildWorker } from './support/child-worker';
import { CLIENT_ID, CLIENT_SECRET, TENANT_ID, startEntra, startSentinel, type EntraStandIn, type SentinelStandIn } from './support/entra';
import { createWorld, poll, type CreatedSubscription, type Level, type World } from './support/world';

const TOKEN_TTL_SECONDS = 8;
const MAX_ATTEMPTS = 2;

let entra: EntraStandIn;
let sentinel: SentinelStandIn;
let w: World;
let child: ChildWorker | null = null;

beforeAll(async () => {
  buildWorker();
  entra = await startEntra({ tokenTtlSeconds: TOKEN_TTL_SECONDS });
  sentinel = await startSentinel(entra);
  w = await createWorld({ env: { AZURE_AUTHORITY_HOST: entra.authorityHost, WEBHOOK_MAX_ATTEMPTS: String(MAX_ATTEMPTS) } });
  entra.useCertificate(w.tls);
  sentinel.useCertificate(w.tls);
}, 60_000);

afterAll(async () => {
  if (child && child.process.exitCode === null) {
    child.process.kill('SIGTERM');
    await child.exited;
  }
  await w?.close();
  await sentinel?.close();
  await entra?.close();
});

const FINDING = findingEventData({
  id: 'fnd_siem',
  assessmentId: 'asm_siem',
  projectId: 'prj_siem',
  title: 'Stored XSS in comments',
  severity: 'high',
  status: 'open',
  location: 'src/comments.ts:10',
  fingerprint: 'fp_siem',
});

function sentinelSub(stream: string, overrides: Record<string, unknown> = {}): Promise<CreatedSubscription> {
  return w.subscribe({
    name: stream,
    url: sentinel.url(stream),
    events: ['finding.created'],
    payload_format: 'microsoft_sentinel',
    azure_tenant_id: TENANT_ID,
    azure_client_id: CLIENT_ID,
    azure_client_secret: CLIENT_SECRET,
    ...overrides,
  });
}

// An event goes to every subscription of its type: each test's subscriptions stop receiving once it is over, so
// token counts of the next test are its own.
afterEach(async () => {
  const prisma = w.h.deps.prisma;
  await poll(() => prisma.webhookDelivery.count({ where: { status: 'pending' } }), (n) => n === 0, 20_000, 'no pending deliveries');
  await prisma.webhookSubscription.updateMany({ where: { deletedAt: null }, data: { deletedAt: new Date() } });
});

const deliver = (sub: CreatedSubscription) => w.publishTo(sub.id, { type: 'finding.created', data: FINDING });
const ingested = (stream: string) => sentinel.requests.filter((r) => r.path.endsWith(`/streams/${stream}`));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('microsoft_sentinel with Entra ID client credentials', () => {
  it('fetches a token for the first delivery and reuses it for the next ones within its lifetime', async () => {
    const sub = await sentinelSub('Custom-Reuse');
    const before = entra.tokenRequests;
    for (let i = 0; i < 3; i += 1) expect((await deliver(sub)).status).toBe('succeeded');
    expect(entra.tokenRequests - before).toBe(1);
    const requests = ingested('Custom-Reuse');
    expect(requests.map((r) => r.status)).toEqual([204, 204, 204]);
    expect(new Set(requests.map((r) => r.token)).size).toBe(1);
  });

  it('shares one token between worker processes, fetched once even when they start together', async () => {
    const sub = await sentinelSub('Custom-Shared');
    const before = entra.tokenRequests;
    await w.worker!.deliveryWorker.pause();
    child = spawnWorker(w, { AZURE_AUTHORITY_HOST: entra.authorityHost, WEBHOOK_MAX_ATTEMPTS: String(MAX_ATTEMPTS) });
    await child.waitForLog('Worker started');
    // Only the child process takes jobs: it fetches the token.
    expect((await deliver(sub)).status).toBe('succeeded');
    child.process.kill('SIGTERM');
    await child.exited;
    // Only the in-process worker is left: it uses the token the child cached.
    w.worker!.deliveryWorker.resume();
    expect((await deliver(sub)).status).toBe('succeeded');
    expect(entra.tokenRequests - before).toBe(1);
    const [first, second] = ingested('Custom-Shared');
    expect(second.token).toBe(first.token);

    // Two workers at once on a subscription with no token yet: one token request between them.
    const burst = await sentinelSub('Custom-Burst');
    child = spawnWorker(w, { AZURE_AUTHORITY_HOST: entra.authorityHost, WEBHOOK_MAX_ATTEMPTS: String(MAX_ATTEMPTS) });
    await child.waitForLog('Worker started');
    const beforeBurst = entra.tokenRequests;
    const published = await Promise.all(Array.from({ length: 8 }, () => w.publish({ type: 'finding.created', data: FINDING })));
    const deliveries = await Promise.all(published.map(async (p) => w.waitForDelivery(await w.deliveryFor(p, burst.id))));
    expect(deliveries.map((d) => d.status)).toEqual(Array(8).fill('succeeded'));
    expect(entra.tokenRequests - beforeBurst).toBe(1);
    child.process.kill('SIGTERM');
    await child.exited;
    child = null;
  }, 60_000);

  it('fetches a new token before the cached one expires, so the receiver never sees an expired one', async () => {
    const sub = await sentinelSub('Custom-Expiry');
    const before = entra.tokenRequests;
    expect((await deliver(sub)).status).toBe('succeeded');
    await sleep(TOKEN_TTL_SECONDS * 1000);
    expect((await deliver(sub)).status).toBe('succeeded');
    expect(entra.tokenRequests - before).toBe(2);
    const [first, second] = ingested('Custom-Expiry');
    expect(second.token).not.toBe(first.token);
    expect(ingested('Custom-Expiry').map((r) => r.status)).toEqual([204, 204]);
  }, 30_000);

  it('on a 401 drops the token, fetches a fresh one and sends again within the same attempt', async () => {
    const sub = await sentinelSub('Custom-Revoked');
    expect((await deliver(sub)).status).toBe('succeeded');
    const [first] = ingested('Custom-Revoked');
    await entra.revoke(first.token!);
    const before = entra.tokenRequests;
    const delivery = await deliver(sub);
    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts).toHaveLength(1);
    expect(delivery.attempts[0]).toMatchObject({ outcome: 'success', responseStatus: 204 });
    expect(entra.tokenRequests - before).toBe(1);
    const [, refused, resent] = ingested('Custom-Revoked');
    expect([refused.token, refused.status]).toEqual([first.token, 401]);
    expect(resent.status).toBe(204);
    expect(resent.token).not.toBe(first.token);
  });

  it('records a wrong client secret as a token_error attempt naming the endpoint answer, with no secret anywhere', async () => {
    const wrongSecret = 'wrong-secret-Qq7-not-the-one';
    const sub = await sentinelSub('Custom-WrongSecret', { azure_client_secret: wrongSecret });
    const delivery = await deliver(sub);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts).toHaveLength(MAX_ATTEMPTS);
    for (const attempt of delivery.attempts) {
      expect(attempt.outcome).toBe('token_error');
      expect(attempt.responseStatus).toBeNull();
      expect(attempt.error).toMatch(/^token endpoint answered HTTP 401: invalid_client/);
    }
    const everything = JSON.stringify(delivery);
    expect(everything).not.toContain(wrongSecret);
    expect(everything).not.toContain(CLIENT_SECRET);
    expect(ingested('Custom-WrongSecret')).toHaveLength(0);
  });

  it('never shows the credentials again and keeps them and the cached token sealed', async () => {
    const sub = await sentinelSub('Custom-Sealed');
    expect(sub.has_azure_credentials).toBe(true);
    expect(JSON.stringify(sub)).not.toContain(CLIENT_SECRET);
    const read = await w.api().get(`${w.levelBase()}/subscriptions/${sub.id}`).set(bearer(w.org.admin.token));
    expect(read.body.has_azure_credentials).toBe(true);
    expect(JSON.stringify(read.body)).not.toMatch(new RegExp(`${CLIENT_SECRET}|${CLIENT_ID}|${TENANT_ID}`));
    const row = await w.subscription(sub.id);
    expect(row.azureCredentialsEnc).not.toContain(CLIENT_SECRET);

    expect((await deliver(sub)).status).toBe('succeeded');
    const token = ingested('Custom-Sealed')[0].token!;
    const redis = createRedis(w.h.config.redisUrl);
    try {
      const keys = await redis.keys(`${w.h.config.redisPrefix}:entra-token:${sub.id}:*`);
      expect(keys).toHaveLength(1);
      expect(await redis.get(keys[0])).not.toContain(token);
    } finally {
      await redis.quit();
    }

    const removed = await w.api().patch(`${w.levelBase()}/subscriptions/${sub.id}`).set(bearer(w.org.admin.token))
      .send({ azure_tenant_id: null, azure_client_id: null, azure_client_secret: null });
    expect(removed.status).toBe(200);
    expect(removed.body.has_azure_credentials).toBe(false);
  });
});

describe('Sentinel URL checks', () => {
  const create = (body: Record<string, unknown>) =>
    w.api().post(`${w.levelBase()}/subscriptions`).set(bearer(w.org.admin.token))
      .send({ name: 'sentinel', events: ['finding.created'], payload_format: 'microsoft_sentinel', ...body });

  it('refuses a URL without the Logs Ingestion shape with a 422 naming what is missing, creating nothing', async () => {
    const before = await w.h.deps.prisma.webhookSubscription.count();
    const noStream = await create({ url: `https://127.0.0.1:${sentinel.port}/dataCollectionRules/dcr-${'b'.repeat(32)}?api-version=2023-01-01` });
    expect(noStream.status).toBe(422);
    expect(noStream.body.detail).toMatch(/\/streams\/<stream>/);
    const noVersion = await create({ url: sentinel.url('Custom-X').replace(/\?.*$/, '') });
    expect(noVersion.status).toBe(422);
    expect(noVersion.body.detail).toMatch(/api-version/);
    const badDcr = await create({ url: `https://127.0.0.1:${sentinel.port}/dataCollectionRules/rule1/streams/Custom-X?api-version=2023-01-01` });
    expect(badDcr.status).toBe(422);
    expect(badDcr.body.detail).toMatch(/dcr-<32 hex digits>/);
    expect(await w.h.deps.prisma.webhookSubscription.count()).toBe(before);
  });

  it('checks the URL when a subscription switches to microsoft_sentinel, and credentials only fit that format', async () => {
    const plain = await w.subscribe({ name: 'plain', url: w.receiver.url('/plain'), events: ['finding.created'] });
    const patch = (body: Record<string, unknown>) =>
      w.api().patch(`${w.levelBase()}/subscriptions/${plain.id}`).set(bearer(w.org.admin.token)).send(body);
    const switched = await patch({ payload_format: 'microsoft_sentinel' });
    expect(switched.status).toBe(422);
    expect(switched.body.detail).toMatch(/dataCollectionRules/);
    const creds = await patch({ azure_tenant_id: TENANT_ID, azure_client_id: CLIENT_ID, azure_client_secret: 'x' });
    expect(creds.status).toBe(422);
    expect(creds.body.detail).toMatch(/microsoft_sentinel only/);
    const partial = await patch({ azure_client_secret: 'x' });
    expect(partial.status).toBe(400);
    expect((await w.subscription(plain.id)).payloadFormat).toBe('service');
  });
});

describe('sentinel-schema route', () => {
  const schemaOf = (id: string, level?: Level) =>
    w.api().get(`${w.levelBase(level)}/subscriptions/${id}/sentinel-schema`).set(bearer(w.org.admin.token));

  it.each<EventType>(['webhook.test', 'finding.created'])('lists exactly the columns of the records the service sends for %s, with their types', async (type) => {
    const stream = `Custom-Schema${type.replace(/\W/g, '')}`;
    const sub = await sentinelSub(stream, { events: [type] });
    const delivery =
      type === 'webhook.test'
        ? await (async () => {
            const sent = await w.api().post(`${w.levelBase()}/subscriptions/${sub.id}/test`).set(bearer(w.org.admin.token));
            return w.waitForDelivery(sent.body.delivery_id);
          })()
        : await deliver(sub);
    expect(delivery.status).toBe('succeeded');
    const [record] = JSON.parse(ingested(stream)[0].body.toString('utf8')) as Array<Record<string, unknown>>;
    const res = await schemaOf(sub.id);
    expect(res.status).toBe(200);
    const columns = res.body.columns as Array<{ name: string; type: string }>;
    expect(columns.map((c) => c.name).sort()).toEqual(Object.keys(record).sort());
    for (const { name, type: columnType } of columns) {
      const value = record[name];
      if (name === 'TimeGenerated') expect(columnType).toBe('datetime');
      else if (typeof value === 'number') expect(columnType).toBe(Number.isInteger(value) ? 'long' : 'real');
      else expect(columnType).toBe(typeof value);
    }
    expect(res.body.stream_declarations).toEqual({ [stream]: { columns } });
    expect(res.body.data_flows).toEqual([
      { streams: [stream], destinations: ['logAnalyticsWorkspace'], transformKql: 'source', outputStream: `Custom-${stream.slice(7)}_CL` },
    ]);
  });

  // The operational events are organization-level only (docs/webhooks.md "Operational events").
  const eventsOfLevel = (level: Level) => EVENT_TYPES.filter((t) => level.level === 'organization' || !isOperationalEventType(t));

  it('covers every event type a subscription has, at all three levels, and only its own level', async () => {
    const project = await insertProject(w.h, w.org.id);
    const assessment = await insertAssessment(w.h, w.org.id, project.id);
    const levels: Level[] = [
      { level: 'organization' },
      { level: 'project', projectId: project.id },
      { level: 'assessment', assessmentId: assessment.id },
    ];
    for (const level of levels) {
      const sub = await w.subscribe(
        { name: 'all', url: sentinel.url('Custom-All'), events: eventsOfLevel(level), payload_format: 'microsoft_sentinel' },
        level,
      );
      const res = await schemaOf(sub.id, level);
      expect(res.status).toBe(200);
      const names = (res.body.columns as Array<{ name: string }>).map((c) => c.name);
      expect(names).toEqual(expect.arrayContaining(['TimeGenerated', 'EventType', 'FindingId', 'SlaDays', 'SpentCredits', 'PrNumber']));
      expect(new Set(names.map((n) => n.toLowerCase())).size).toBe(names.length);
      if (level.level !== 'organization') expect((await schemaOf(sub.id)).status).toBe(404);
    }
  });
});

describe('Splunk HEC channels and errors', () => {
  const HEC_PATH = '/services/collector/event';
  const CHANNEL = '0aeeac95-ac74-4aa9-b30d-6c4c0ac581ba';
  const MISSING = '{"text":"Data channel is missing","code":10}';

  beforeAll(() => {
    w.receiver.script(HEC_PATH, (req) =>
      req.headers['x-splunk-request-channel']
        ? { status: 200, headers: { 'content-type': 'application/json' }, body: '{"text":"Success","code":0,"ackId":0}' }
        : { status: 400, headers: { 'content-type': 'application/json' }, body: MISSING },
    );
  });

  const hecSub = (extra: Record<string, unknown>) =>
    w.subscribe({ name: 'hec', url: w.receiver.url(HEC_PATH), events: ['finding.created'], payload_format: 'splunk_hec', ...extra });

  it('sends splunk_channel as X-Splunk-Request-Channel, which a HEC token with acknowledgement requires', async () => {
    const sub = await hecSub({ splunk_channel: CHANNEL, authorization: 'Splunk 11111111-1111-1111-1111-111111111111' });
    expect(sub.splunk_channel).toBe(CHANNEL);
    const delivery = await deliver(sub);
    expect(delivery.status).toBe('succeeded');
    const request = w.receiver.requests(HEC_PATH).at(-1)!;
    expect(request.headers['x-splunk-request-channel']).toBe(CHANNEL);
  });

  it('without a channel the delivery fails, and the attempts keep HEC\'s error body as it is', async () => {
    const sub = await hecSub({});
    const delivery = await deliver(sub);
    expect(delivery.status).toBe('failed');
    for (const attempt of delivery.attempts) {
      expect(attempt).toMatchObject({ outcome: 'http_error', responseStatus: 400, error: MISSING });
    }
  });

  it('refuses a channel that is not a GUID, or on another format', async () => {
    const notGuid = await w.api().post(`${w.levelBase()}/subscriptions`).set(bearer(w.org.admin.token))
      .send({ name: 'x', url: w.receiver.url(HEC_PATH), events: ['finding.created'], payload_format: 'splunk_hec', splunk_channel: 'abc' });
    expect(notGuid.status).toBe(400);
    const otherFormat = await w.api().post(`${w.levelBase()}/subscriptions`).set(bearer(w.org.admin.token))
      .send({ name: 'x', url: w.receiver.url(HEC_PATH), events: ['finding.created'], splunk_channel: CHANNEL });
    expect(otherFormat.status).toBe(422);
  });
});
