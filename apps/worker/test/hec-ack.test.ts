// Splunk HEC indexer acknowledgement (hec_ack) against a loopback HTTPS receiver that speaks HEC's shapes: the
// event endpoint answers {"text":"Success","code":0,"ackId":N} per channel, the ack endpoint {"acks":{"N":bool}}.
// A delivery succeeds only once Splunk says indexed; an ack that stays false re-sends it (at-least-once), each
// timeout a failed attempt; the wait holds no worker slot, and survives a worker restart.
import { randomUUID } from 'node:crypto';
import { bearer } from '../../api/test/support/fixtures';
import { startReceiver, type ReceivedRequest } from './support/receiver';
import { createWorld, poll, type World } from './support/world';
import { startWorker } from '../src/worker';

const EVENT_PATH = '/services/collector/event';
const ACK_PATH = '/services/collector/ack';
const TOKEN = 'Splunk 11111111-2222-3333-4444-555555555555';
const OTHER_TOKEN = 'Splunk 66666666-7777-8888-9999-000000000000';

/** What the fake indexer says about one ackId at its n-th poll (1-based). */
type Indexing = (ackId: number, poll: number) => boolean;

/** A fake HEC: ackIds counted per channel (as Splunk does), indexing decided per channel by the test. */
class FakeHec {
  private readonly channels = new Map<string, { nextAckId: number; indexing: Indexing; polls: Map<number, number> }>();
  /** Answer of the event endpoint per channel, when a test wants something else than an ackId. */
  readonly eventAnswer = new Map<string, string>();
  /** How long the ack endpoint takes to answer, per channel (a slow indexer). */
  readonly ackDelayMs = new Map<string, number>();
  /** The token each ackId was issued under, by `channel:ackId`. */
  readonly tokenOfAck = new Map<string, string>();
  /** Channels that say true about an ackId once and then forget it, as Splunk does (later asks answer false). */
  readonly trueOnce = new Set<string>();
  private readonly reported = new Set<string>();

  channel(indexing: Indexing): string {
    const id = randomUUID();
    this.channels.set(id, { nextAckId: 0, indexing, polls: new Map() });
    return id;
  }

  setIndexing(channel: string, indexing: Indexing): void {
    this.channels.get(channel)!.indexing = indexing;
  }

  event(request: ReceivedRequest) {
    const channel = this.channels.get(request.headers['x-splunk-request-channel'] as string);
    if (!channel) return json(400, { text: 'Data channel is missing', code: 10 });
    const custom = this.eventAnswer.get(request.headers['x-splunk-request-channel'] as string);
    if (custom) return { status: 200, headers: { 'content-type': 'application/json' }, body: custom };
    const ackId = channel.nextAckId;
    channel.nextAckId += 1;
    this.tokenOfAck.set(`${request.headers['x-splunk-request-channel']}:${ackId}`, request.headers.authorization as string);
    return json(200, { text: 'Success', code: 0, ackId });
  }

  ack(request: ReceivedRequest) {
    const channel = this.channels.get(request.headers['x-splunk-request-channel'] as string);
    if (!channel || ![TOKEN, OTHER_TOKEN].includes(request.headers.authorization as string)) return json(401, { text: 'Invalid token', code: 4 });
    const { acks } = JSON.parse(request.body.toString('utf8')) as { acks: number[] };
    const answer: Record<string, boolean> = {};
    for (const id of acks) {
      const n = (channel.polls.get(id) ?? 0) + 1;
      channel.polls.set(id, n);
      const key = `${request.headers['x-splunk-request-channel']}:${id}`;
      const once = this.trueOnce.has(request.headers['x-splunk-request-channel'] as string);
      answer[String(id)] = channel.indexing(id, n) && !(once && this.reported.has(key));
      if (answer[String(id)] && once) this.reported.add(key);
    }
    const delayMs = this.ackDelayMs.get(request.headers['x-splunk-request-channel'] as string);
    return { ...json(200, { acks: answer }), ...(delayMs && { delayMs }) };
  }
}

function json(status: number, body: unknown) {
  return { status, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) };
}

const ENV = {
  WEBHOOK_HEC_ACK_TIMEOUT_MS: '1500',
  WEBHOOK_HEC_ACK_POLL_MS: '100',
  WEBHOOK_MAX_ATTEMPTS: '3',
};

let w: World;
const hec = new FakeHec();
beforeAll(async () => {
  w = await createWorld({ env: ENV });
  w.receiver.script(EVENT_PATH, (req) => hec.event(req));
  w.receiver.script(ACK_PATH, (req) => hec.ack(req));
});
afterAll(() => w?.close());

const onChannel = (channel: string) => (r: ReceivedRequest) => r.headers['x-splunk-request-channel'] === channel;

async function hecSubscription(channel: string, world: World = w, events = ['finding.created'], authorization = TOKEN) {
  return world.subscribe({
    name: `hec ${channel.slice(0, 8)}`,
    url: world.receiver.url(EVENT_PATH),
    events,
    payload_format: 'splunk_hec',
    splunk_channel: channel,
    authorization,
    hec_ack: true,
  });
}

const FINDING = { finding_id: 'fnd_1', project_id: 'prj_1', assessment_id: 'asm_1', severity: 'high', status: 'open', title: 'XSS' };

describe('an ack that turns true after a few polls', () => {
  it('keeps the delivery pending (wait_reason hec_ack) until Splunk says indexed, then succeeds with one POST', async () => {
    // Not indexed until the test has looked at the waiting delivery, and then only from the third poll on.
    let looked = false;
    const channel = hec.channel((_id, n) => looked && n >= 3);
    const sub = await hecSubscription(channel);
    expect(sub.hec_ack).toBe(true);
    const published = await w.publish({ type: 'finding.created', data: FINDING });
    const deliveryId = await w.deliveryFor(published, sub.id);

    // While Splunk has not indexed it, the API shows the delivery waiting on the ack, its attempt accepted.
    await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
    const waiting = await w.api().get(`/api/v1/webhooks/deliveries/${deliveryId}`).set(bearer(w.org.admin.token));
    expect(waiting.body).toMatchObject({ status: 'pending', attempt_count: 1, wait_reason: 'hec_ack' });
    const attempts = await w.api().get(`/api/v1/webhooks/deliveries/${deliveryId}/attempts`).set(bearer(w.org.admin.token));
    expect(attempts.body.data).toMatchObject([{ number: 1, outcome: 'ack_pending', response_status: 200 }]);
    looked = true;

    const delivery = await w.waitForDelivery(deliveryId);
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1, hecAckId: null, hecAckDeadline: null });
    expect(delivery.attempts).toMatchObject([{ number: 1, outcome: 'success', error: null }]);
    expect(w.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(1);
    const polls = w.receiver.requests(ACK_PATH).filter(onChannel(channel));
    expect(polls.length).toBeGreaterThanOrEqual(3);
    for (const request of polls) {
      // Same host, channel and token as the events; HEC's request shape.
      expect(request.method).toBe('POST');
      expect(request.headers.authorization).toBe(TOKEN);
      expect(request.headers['content-type']).toBe('application/json');
      expect(JSON.parse(request.body.toString())).toEqual({ acks: [0] });
    }
    expect((await w.subscription(sub.id)).consecutiveFailures).toBe(0);
  });
});

describe('polls of one channel that fall due together', () => {
  it('go in one request carrying their ackIds while another poll is in flight; every delivery succeeds once indexed', async () => {
    const channel = hec.channel((_id, n) => n >= 2);
    hec.ackDelayMs.set(channel, 300);
    const sub = await hecSubscription(channel);
    const published = await Promise.all(Array.from({ length: 6 }, (_, i) => w.publish({ type: 'finding.created', data: { ...FINDING, finding_id: `fnd_batch_${i}` } })));
    const deliveryIds = await Promise.all(published.map((p) => w.deliveryFor(p, sub.id)));
    for (const id of deliveryIds) expect(await w.waitForDelivery(id, 15_000)).toMatchObject({ status: 'succeeded', attemptCount: 1 });

    const asked = w.receiver.requests(ACK_PATH).filter(onChannel(channel)).map((r) => (JSON.parse(r.body.toString()) as { acks: number[] }).acks);
    // Each ackId asked until indexed (twice at least), in fewer requests than ackIds asked: polls went together.
    const perAck = new Map<number, number>();
    for (const acks of asked) for (const id of acks) perAck.set(id, (perAck.get(id) ?? 0) + 1);
    expect([...perAck.keys()].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const n of perAck.values()) expect(n).toBeGreaterThanOrEqual(2);
    expect(Math.max(...asked.map((acks) => acks.length))).toBeGreaterThan(1);
    expect(asked.length).toBeLessThan([...perAck.values()].reduce((a, b) => a + b, 0));
    for (const acks of asked) expect(new Set(acks).size).toBe(acks.length);
  });

  it("never carry another subscription's ackIds, even on the same channel and host: each request asks under its own token", async () => {
    const channel = hec.channel((_id, n) => n >= 2);
    hec.ackDelayMs.set(channel, 300);
    const mine = await hecSubscription(channel, w, ['finding.created'], TOKEN);
    const theirs = await hecSubscription(channel, w, ['finding.created'], OTHER_TOKEN);
    const published = await Promise.all(Array.from({ length: 4 }, (_, i) => w.publish({ type: 'finding.created', data: { ...FINDING, finding_id: `fnd_shared_${i}` } })));
    for (const p of published) {
      for (const sub of [mine, theirs]) expect(await w.waitForDelivery(await w.deliveryFor(p, sub.id), 15_000)).toMatchObject({ status: 'succeeded' });
    }
    const requests = w.receiver.requests(ACK_PATH).filter(onChannel(channel));
    expect(requests.some((r) => (JSON.parse(r.body.toString()) as { acks: number[] }).acks.length > 1)).toBe(true);
    for (const r of requests) {
      for (const id of (JSON.parse(r.body.toString()) as { acks: number[] }).acks) {
        expect(hec.tokenOfAck.get(`${channel}:${id}`)).toBe(r.headers.authorization);
      }
    }
  });
});

describe('an ack that stays false', () => {
  it('re-sends the delivery after each timeout, each a failed ack_timeout attempt, and fails it after the last', async () => {
    const channel = hec.channel(() => false);
    const sub = await hecSubscription(channel);
    const delivery = await w.publishTo(sub.id, { type: 'finding.created', data: FINDING });
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts.map((a) => a.outcome)).toEqual(['ack_timeout', 'ack_timeout', 'ack_timeout']);
    expect(delivery.attempts[0].error).toMatch(/Splunk did not report ackId 0 indexed within 1500 ms/);
    expect(delivery.failureReason).toMatch(/all 3 attempts failed; last: ack_timeout/);
    // At-least-once: the same event sent three times, each under a new ackId.
    const sent = w.receiver.requests(EVENT_PATH).filter(onChannel(channel));
    expect(sent).toHaveLength(3);
    expect(new Set(sent.map((r) => r.body.toString()))).toEqual(new Set([sent[0].body.toString()]));
    const asked = w.receiver.requests(ACK_PATH).filter(onChannel(channel)).map((r) => JSON.parse(r.body.toString()).acks[0]);
    expect(new Set(asked)).toEqual(new Set([0, 1, 2]));
    expect((await w.subscription(sub.id)).consecutiveFailures).toBe(1);
  });

  it('succeeds on the re-send once Splunk indexes that one', async () => {
    const channel = hec.channel((ackId) => ackId === 1);
    const sub = await hecSubscription(channel);
    const delivery = await w.publishTo(sub.id, { type: 'finding.created', data: FINDING });
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 2 });
    expect(delivery.attempts.map((a) => a.outcome)).toEqual(['ack_timeout', 'success']);
    expect(w.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(2);
  });
});

describe('a subscription disabled while its delivery waits for the ack', () => {
  it('ends the delivery failed at the next poll, without a re-send', async () => {
    const channel = hec.channel(() => false);
    const sub = await hecSubscription(channel);
    const deliveryId = await w.deliveryFor(await w.publish({ type: 'finding.created', data: FINDING }), sub.id);
    await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
    const off = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(w.org.admin.token)).send({ active: false });
    expect(off.status).toBe(200);
    const delivery = await w.waitForDelivery(deliveryId);
    expect(delivery).toMatchObject({ status: 'failed', hecAckId: null, hecAckDeadline: null });
    expect(delivery.failureReason).toMatch(/subscription disabled/);
    expect(w.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(1);
  });
});

describe('a subscription URL moved behind the API while its delivery waits for the ack', () => {
  it('sends the token to no ack endpoint of the new destination (credentials stay where they were given)', async () => {
    const elsewhere = await startReceiver(w.tls);
    try {
      elsewhere.script(ACK_PATH, (req) => hec.ack(req));
      const channel = hec.channel(() => false);
      const sub = await hecSubscription(channel);
      const deliveryId = await w.deliveryFor(await w.publish({ type: 'finding.created', data: FINDING }), sub.id);
      await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
      // Another port is another destination; the API refuses such a move without the token, a database edit does not.
      await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: elsewhere.url(EVENT_PATH) } });
      const delivery = await w.waitForDelivery(deliveryId);
      expect(delivery.status).toBe('failed');
      expect(elsewhere.requests(ACK_PATH)).toHaveLength(0);
      expect(elsewhere.requests(EVENT_PATH)).toHaveLength(0);
    } finally {
      await elsewhere.close();
    }
  });
});

describe('an accepted POST without an ackId', () => {
  it('is a failed attempt naming the cause (the HEC token has no indexer acknowledgement)', async () => {
    const channel = hec.channel(() => true);
    hec.eventAnswer.set(channel, '{"text":"Success","code":0}');
    const sub = await hecSubscription(channel);
    const delivery = await w.publishTo(sub.id, { type: 'finding.created', data: FINDING });
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts.map((a) => a.outcome)).toEqual(['ack_missing', 'ack_missing', 'ack_missing']);
    expect(delivery.attempts[0].error).toMatch(/turn on indexer acknowledgement/);
  });
});

describe('hec_ack off', () => {
  it('keeps the old rule: a 2xx from HEC is a success, no ack asked', async () => {
    const channel = hec.channel(() => false);
    const sub = await w.subscribe({
      name: 'no ack', url: w.receiver.url(EVENT_PATH), events: ['finding.created'], payload_format: 'splunk_hec', splunk_channel: channel, authorization: TOKEN,
    });
    expect(sub.hec_ack).toBe(false);
    const delivery = await w.publishTo(sub.id, { type: 'finding.created', data: FINDING });
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    expect(w.receiver.requests(ACK_PATH).filter(onChannel(channel))).toHaveLength(0);
  });
});

describe('the API rules of hec_ack', () => {
  const create = (body: Record<string, unknown>) =>
    w.api().post('/api/v1/webhooks/subscriptions').set(bearer(w.org.admin.token))
      .send({ name: 'rules', url: w.receiver.url(EVENT_PATH), events: ['finding.created'], ...body });

  it.each([
    ['without a splunk_channel', { payload_format: 'splunk_hec', hec_ack: true }],
    ['on another payload format', { payload_format: 'cef', hec_ack: true }],
  ])('refuses hec_ack %s with 422 and creates nothing', async (_label, body) => {
    const before = await w.h.deps.prisma.webhookSubscription.count();
    const res = await create(body);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/hec_ack requires payload_format splunk_hec and a splunk_channel/);
    expect(await w.h.deps.prisma.webhookSubscription.count()).toBe(before);
  });

  it('refuses a PATCH that would leave hec_ack on without its channel or format; turning it off with the change is fine', async () => {
    const sub = await hecSubscription(hec.channel(() => true));
    const url = `/api/v1/webhooks/subscriptions/${sub.id}`;
    const patch = (body: Record<string, unknown>) => w.api().patch(url).set(bearer(w.org.admin.token)).send(body);
    expect((await patch({ splunk_channel: null })).status).toBe(422);
    expect((await patch({ payload_format: 'cef' })).status).toBe(422);
    const read = await w.api().get(url).set(bearer(w.org.admin.token));
    expect(read.body).toMatchObject({ hec_ack: true, splunk_channel: sub.splunk_channel, payload_format: 'splunk_hec' });
    const off = await patch({ hec_ack: false, splunk_channel: null });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ hec_ack: false, splunk_channel: null });
    expect((await patch({ hec_ack: true })).status).toBe(422);
  });
});

// A world of its own whose workers each test starts (one slot; a restart).
describe('waiting for an ack', () => {
  let local: World;
  const lhec = new FakeHec();
  beforeAll(async () => {
    local = await createWorld({ env: { ...ENV, WEBHOOK_HEC_ACK_TIMEOUT_MS: '5000' }, worker: false });
    local.receiver.script(EVENT_PATH, (req) => lhec.event(req));
    local.receiver.script(ACK_PATH, (req) => lhec.ack(req));
  });
  afterAll(() => local?.close());

  it('holds no worker slot: with one slot, a second delivery is sent while the first one waits for its ack', async () => {
    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      // Splunk indexes the first delivery's event only once the second delivery's event has arrived.
      const second = lhec.channel(() => true);
      const first = lhec.channel(() => local.receiver.requests(EVENT_PATH).some(onChannel(second)));
      const subFirst = await hecSubscription(first, local, ['finding.created']);
      const subSecond = await hecSubscription(second, local, ['report.ready']);
      const firstId = await local.deliveryFor(await local.publish({ type: 'finding.created', data: FINDING }), subFirst.id);
      await poll(async () => local.receiver.requests(EVENT_PATH).filter(onChannel(first)).length, (n) => n === 1, 10_000, 'the first event');
      const secondId = await local.deliveryFor(await local.publish({ type: 'report.ready', data: { report_id: 'rep_1' } }), subSecond.id);
      const [one, two] = await Promise.all([local.waitForDelivery(firstId), local.waitForDelivery(secondId)]);
      // Had the only slot waited with the first delivery, the second would have gone out only after the first's
      // ack timed out (a failed attempt and a re-send).
      expect(one).toMatchObject({ status: 'succeeded', attemptCount: 1 });
      expect(one.attempts.map((a) => a.outcome)).toEqual(['success']);
      expect(two).toMatchObject({ status: 'succeeded', attemptCount: 1 });
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(first))).toHaveLength(1);
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(second))).toHaveLength(1);
    } finally {
      await worker.close();
    }
  });

  it('survives a worker restart: the new worker polls the saved ackId and the delivery succeeds without a re-send', async () => {
    let indexed = false;
    const channel = lhec.channel(() => indexed);
    let second: Awaited<ReturnType<typeof startWorker>> | null = null;
    try {
      const first = await startWorker(local.workerDeps, { schedule: false });
      const sub = await hecSubscription(channel, local, ['assessment.completed']);
      const published = await local.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_1', project_id: 'prj_1' } });
      const deliveryId = await local.deliveryFor(published, sub.id);
      await poll(async () => local.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
      await first.close();
      const saved = await local.h.deps.prisma.webhookDelivery.findUniqueOrThrow({ where: { id: deliveryId } });
      expect(saved).toMatchObject({ status: 'pending', attemptCount: 1, hecAckId: 0n, waitReason: 'hec_ack' });

      indexed = true;
      second = await startWorker(local.workerDeps, { schedule: false });
      const delivery = await local.waitForDelivery(deliveryId);
      expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
      expect(delivery.attempts.map((a) => a.outcome)).toEqual(['success']);
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(1);
    } finally {
      await second?.close();
    }
  });
});

describe('a channel whose ack endpoint hangs', () => {
  let local: World;
  const lhec = new FakeHec();
  beforeAll(async () => {
    // Long enough that the awaiting deliveries keep polling through the test; each hung poll request ends at the
    // transport's 8 s timeout.
    local = await createWorld({ env: { ...ENV, WEBHOOK_HEC_ACK_TIMEOUT_MS: '60000', WEBHOOK_TIMEOUT_MS: '8000' }, worker: false });
    local.receiver.script(EVENT_PATH, (req) => lhec.event(req));
    local.receiver.script(ACK_PATH, (req) => lhec.ack(req));
    local.receiver.script('/healthy', () => ({ status: 200, body: 'ok' }));
  });
  afterAll(() => local?.close());

  it("leaves the worker's slots to the other subscriptions: their deliveries go out at once while its polls wait", async () => {
    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 4 } });
    try {
      const channel = lhec.channel(() => false);
      lhec.ackDelayMs.set(channel, 600_000);
      const sub = await hecSubscription(channel, local, ['finding.created']);
      for (let i = 0; i < 12; i += 1) await local.publish({ type: 'finding.created', data: { ...FINDING, finding_id: `fnd_${i}` } });
      await poll(async () => local.receiver.requests(EVENT_PATH).filter(onChannel(channel)).length, (n) => n === 12, 15_000, 'the 12 HEC events');
      await poll(async () => local.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first (hung) ack poll');
      // Let every awaiting delivery fall due for its poll while that request hangs.
      await new Promise((r) => setTimeout(r, 500));

      const healthy = await local.subscribe({ name: 'healthy', url: local.receiver.url('/healthy'), events: ['report.ready'] });
      const started = Date.now();
      const ids = [];
      for (let i = 0; i < 8; i += 1) ids.push(await local.deliveryFor(await local.publish({ type: 'report.ready', data: { report_id: `rep_${i}` } }), healthy.id));
      const delivered = await Promise.all(ids.map((id) => local.waitForDelivery(id, 30_000)));
      expect(delivered.map((d) => d.status)).toEqual(Array(8).fill('succeeded'));
      // Had the polls held the four slots while the ack request hung, these would have waited for its 8 s timeout.
      const slowest = Math.max(...local.receiver.requests('/healthy').map((r) => r.at)) - started;
      expect(slowest).toBeLessThan(4_000);
      // One request at a time asks the hung channel, whatever the number of polls.
      expect(local.receiver.requests(ACK_PATH).filter(onChannel(channel)).length).toBeLessThanOrEqual(2);

      // The endpoint comes back: each awaiting delivery succeeds on the event it sent, without a re-send.
      lhec.ackDelayMs.delete(channel);
      lhec.setIndexing(channel, () => true);
      const awaiting = await local.h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId: sub.id } });
      expect(awaiting).toHaveLength(12);
      const settled = await Promise.all(awaiting.map((d) => local.waitForDelivery(d.id, 30_000)));
      expect(settled.map((d) => [d.status, d.attemptCount])).toEqual(Array(12).fill(['succeeded', 1]));
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(12);
    } finally {
      await worker.close();
    }
  }, 60_000);
});

describe('a channel whose ack endpoint answers, but slower than the wait', () => {
  let local: World;
  const lhec = new FakeHec();
  beforeAll(async () => {
    // Polls wait 300 ms at most (WEBHOOK_SLOW_ATTEMPT_MS); the endpoint takes 800 ms to answer.
    local = await createWorld({ env: { ...ENV, WEBHOOK_HEC_ACK_TIMEOUT_MS: '30000', WEBHOOK_SLOW_ATTEMPT_MS: '300' }, worker: false });
    local.receiver.script(EVENT_PATH, (req) => lhec.event(req));
    local.receiver.script(ACK_PATH, (req) => lhec.ack(req));
  });
  afterAll(() => local?.close());

  it('still settles each delivery on its one POST: an answer that comes after its poll stopped waiting is kept for its next poll', async () => {
    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 4 } });
    try {
      const channel = lhec.channel((_id, n) => n >= 2);
      lhec.ackDelayMs.set(channel, 800);
      const sub = await hecSubscription(channel, local, ['finding.created']);
      const ids = [];
      for (let i = 0; i < 6; i += 1) ids.push(await local.deliveryFor(await local.publish({ type: 'finding.created', data: { ...FINDING, finding_id: `fnd_${i}` } }), sub.id));
      const settled = await Promise.all(ids.map((id) => local.waitForDelivery(id, 30_000)));
      expect(settled.map((d) => [d.status, d.attemptCount])).toEqual(Array(6).fill(['succeeded', 1]));
      expect(settled.flatMap((d) => d.attempts.map((a) => a.outcome))).toEqual(Array(6).fill('success'));
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(6);
    } finally {
      await worker.close();
    }
  }, 60_000);
});

// Review: Splunk reports an ackId true once (a later ask answers false); an 'indexed' answer kept in one worker's
// memory is lost to every other worker.
describe('a slow ack endpoint that reports each ackId true once (as Splunk does), with the job taken by another worker', () => {
  let local: World;
  const lhec = new FakeHec();
  beforeAll(async () => {
    // Polls wait 300 ms at most; the endpoint takes 800 ms; one poll every 1.5 s, 6 s to be acknowledged.
    local = await createWorld({
      env: { ...ENV, WEBHOOK_HEC_ACK_TIMEOUT_MS: '6000', WEBHOOK_HEC_ACK_POLL_MS: '1500', WEBHOOK_SLOW_ATTEMPT_MS: '300' },
      worker: false,
    });
    local.receiver.script(EVENT_PATH, (req) => lhec.event(req));
    local.receiver.script(ACK_PATH, (req) => lhec.ack(req));
  });
  afterAll(() => local?.close());

  it("settles the delivery on its one POST: Splunk's one 'indexed' answer is not lost in the worker that asked", async () => {
    const first = await startWorker(local.workerDeps, { schedule: false });
    let second: Awaited<ReturnType<typeof startWorker>> | null = null;
    try {
      const channel = lhec.channel(() => true);
      lhec.trueOnce.add(channel);
      lhec.ackDelayMs.set(channel, 800);
      const sub = await hecSubscription(channel, local, ['finding.created']);
      const deliveryId = await local.deliveryFor(await local.publish({ type: 'finding.created', data: FINDING }), sub.id);
      // The first worker's poll goes out; Splunk answers 'indexed' 800 ms later, after the poll stopped waiting.
      await poll(async () => local.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
      await new Promise((r) => setTimeout(r, 1_000));
      // The job's next poll is taken by another live worker (the first one takes no more jobs).
      await first.deliveryWorker.pause();
      second = await startWorker(local.workerDeps, { schedule: false });
      const delivery = await local.waitForDelivery(deliveryId, 20_000);
      expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
      expect(delivery.attempts.map((a) => a.outcome)).toEqual(['success']);
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(1);
    } finally {
      await second?.close();
      await first.close();
    }
  }, 60_000);
});

// Review: the last poll (on the deadline) of a slow channel does not wait for the request that carries its ackId.
describe('a slow ack endpoint whose event is indexed shortly before the ack deadline', () => {
  let local: World;
  const lhec = new FakeHec();
  beforeAll(async () => {
    // Polls wait 300 ms at most; the endpoint takes 800 ms; a poll every 500 ms, 2 s to be acknowledged.
    local = await createWorld({
      env: { ...ENV, WEBHOOK_HEC_ACK_TIMEOUT_MS: '2000', WEBHOOK_HEC_ACK_POLL_MS: '500', WEBHOOK_SLOW_ATTEMPT_MS: '300' },
      worker: false,
    });
    local.receiver.script(EVENT_PATH, (req) => lhec.event(req));
    local.receiver.script(ACK_PATH, (req) => lhec.ack(req));
  });
  afterAll(() => local?.close());

  // Review of 011df28: the poll on the deadline gave up on an ackId whose request was still out (attemptCount 3).
  it('succeeds on its one POST when Splunk says indexed about an ackId asked before the deadline', async () => {
    const worker = await startWorker(local.workerDeps, { schedule: false });
    try {
      // Indexed 1.5 s after its POST (ackIds are counted per channel: ackId n is the channel's n-th event).
      const posted = (ackId: number) => local.receiver.requests(EVENT_PATH).filter(onChannel(channel))[ackId]?.at;
      const channel: string = lhec.channel((ackId) => posted(ackId) !== undefined && Date.now() - posted(ackId)! >= 1_500);
      lhec.ackDelayMs.set(channel, 800);
      const sub = await hecSubscription(channel, local, ['finding.created']);
      const deliveryId = await local.deliveryFor(await local.publish({ type: 'finding.created', data: FINDING }), sub.id);
      const delivery = await local.waitForDelivery(deliveryId, 20_000);
      // Before 011df28 the poll at 1.8 s waited for its request (asked at 1.8 s, indexed): succeeded, attempt 1.
      // Since, the poll on the deadline (2 s) gives up without waiting for the request that carries its ackId.
      expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1 });
      expect(local.receiver.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(1);
    } finally {
      await worker.close();
    }
  }, 60_000);
});

// Review: WEBHOOK_SLOW_ATTEMPT_MS bounds a poll's wait (docs/operations.md) with WEBHOOK_ISOLATION off too.
describe('a hung ack endpoint with WEBHOOK_ISOLATION=false and WEBHOOK_SLOW_ATTEMPT_MS set', () => {
  let local: World;
  const lhec = new FakeHec();
  beforeAll(async () => {
    local = await createWorld({
      env: { ...ENV, WEBHOOK_ISOLATION: 'false', WEBHOOK_SLOW_ATTEMPT_MS: '200', WEBHOOK_HEC_ACK_TIMEOUT_MS: '30000', WEBHOOK_TIMEOUT_MS: '8000' },
      worker: false,
    });
    local.receiver.script(EVENT_PATH, (req) => lhec.event(req));
    local.receiver.script(ACK_PATH, (req) => lhec.ack(req));
    local.receiver.script('/healthy', () => ({ status: 200, body: 'ok' }));
  });
  afterAll(() => local?.close());

  it("holds the worker's one slot for WEBHOOK_SLOW_ATTEMPT_MS at most, not the 2 s default", async () => {
    const worker = await startWorker(local.workerDeps, { schedule: false, delivery: { concurrency: 1 } });
    try {
      const channel = lhec.channel(() => false);
      lhec.ackDelayMs.set(channel, 600_000);
      const sub = await hecSubscription(channel, local, ['finding.created']);
      const healthy = await local.subscribe({ name: 'healthy', url: local.receiver.url('/healthy'), events: ['report.ready'] });
      await local.deliveryFor(await local.publish({ type: 'finding.created', data: FINDING }), sub.id);
      // The first poll of the (new, not yet slow) channel waits for its hung request: the one slot is taken.
      await poll(async () => local.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
      const started = Date.now();
      const id = await local.deliveryFor(await local.publish({ type: 'report.ready', data: { report_id: 'rep_1' } }), healthy.id);
      expect(await local.waitForDelivery(id, 10_000)).toMatchObject({ status: 'succeeded' });
      const at = local.receiver.requests('/healthy')[0].at;
      expect(at - started).toBeLessThan(1_000);
    } finally {
      await worker.close();
    }
  }, 60_000);
});

// Review: ackIds are counted per channel; the delivery keeps its ackId and, since hec_ack_channel, the channel the
// event POST went on (before, its polls asked the subscription's new channel about the old channel's ackId).
describe("a subscription's splunk_channel PATCHed while its delivery waits for the ack", () => {
  it("does not take the new channel's answer about the same ackId number for the delivery's event", async () => {
    // The old channel never indexes the delivery's event; the new one indexes every event it has received.
    const oldChannel = hec.channel(() => false);
    const newChannel = hec.channel((id) => w.receiver.requests(EVENT_PATH).filter(onChannel(newChannel)).length > id);
    const sub = await hecSubscription(oldChannel, w, ['assessment.completed']);
    const deliveryId = await w.deliveryFor(await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_9', project_id: 'prj_1' } }), sub.id);
    await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(oldChannel)).length, (n) => n >= 1, 10_000, 'a first ack poll');
    const patched = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(w.org.admin.token)).send({ splunk_channel: newChannel });
    expect(patched.status).toBe(200);
    // The subscription's next event goes to the new channel, where it is ackId 0 too, and is indexed.
    await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_10', project_id: 'prj_1' } });
    await poll(async () => w.receiver.requests(EVENT_PATH).filter(onChannel(newChannel)).length, (n) => n >= 1, 10_000, 'the event on the new channel');
    const delivery = await w.waitForDelivery(deliveryId, 15_000);
    // Splunk never said the first event (old channel, ackId 0) was indexed: not a success on its first attempt.
    expect(delivery.attempts[0].outcome).toBe('ack_timeout');
  }, 30_000);
});
