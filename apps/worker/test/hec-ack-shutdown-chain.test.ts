// The delivery worker's close waits for the Splunk ack requests in flight (AckPolls.settled), and for those only: it
// starts no new one for the polls queued behind them (their jobs have moved on and poll again after the restart), so
// a shutdown takes one WEBHOOK_TIMEOUT_MS at most however many deliveries wait on a slow channel (review of d8dc729:
// it chained the queued polls into new requests, 100 ackIds each, one after another). Real HTTPS receivers on
// loopback, the real transport; the second test with real PostgreSQL, Redis and BullMQ workers.
import { randomUUID } from 'node:crypto';
import { credentialDestination } from '@svc/webhooks';
import { AckPolls } from '../src/hec-ack';
import type { DeliveryContext, LoadedDelivery } from '../src/deliver';
import { createPostWebhook } from '../src/http/post';
import { trustedSecureContext } from '../src/http/trust';
import { startReceiver, type ReceivedRequest, type Receiver } from './support/receiver';
import { createTestTls, type TestTls } from './support/tls';
import { createWorld, poll, type World } from './support/world';

const EVENT_PATH = '/services/collector/event';
const ACK_PATH = '/services/collector/ack';
const TOKEN = 'Splunk 11111111-2222-3333-4444-555555555555';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const onChannel = (channel: string) => (r: ReceivedRequest) => r.headers['x-splunk-request-channel'] === channel;

describe('AckPolls.settled() at shutdown, behind a slow (not failing) ack endpoint with many deliveries waiting', () => {
  let tls: TestTls;
  let receiver: Receiver;
  beforeAll(async () => {
    tls = await createTestTls();
    receiver = await startReceiver(tls);
  });
  afterAll(() => receiver?.close());

  // Before: 250 deliveries queued on a channel answering in 0.8 s of its 1 s timeout made three more requests (100,
  // 100, 49 ackIds) and a close of ~3.2 s; with thousands awaiting, minutes.
  it('resolves within two request timeouts, sending no new request after it was called', async () => {
    const TIMEOUT_MS = 1_000;
    const sent: Array<{ at: number; count: number }> = [];
    receiver.script(ACK_PATH, (request) => {
      const { acks } = JSON.parse(request.body.toString('utf8')) as { acks: number[] };
      sent.push({ at: performance.now(), count: acks.length });
      const body = JSON.stringify({ acks: Object.fromEntries(acks.map((id) => [String(id), false])) });
      return { status: 200, headers: { 'content-type': 'application/json' }, body, delayMs: 800 };
    });
    const post = createPostWebhook({ timeoutMs: TIMEOUT_MS, connectTimeoutMs: 500, secureContext: trustedSecureContext(tls.caFile), maxSocketsPerAddress: 4 });
    try {
      const url = receiver.url(EVENT_PATH);
      const delivery = (i: number) =>
        ({
          id: `whdel_${i}`,
          subscriptionId: 'whsub_1',
          hecAckId: BigInt(i),
          hecAckChannel: '11111111-2222-3333-4444-555555555555',
          subscription: {
            id: 'whsub_1', url, splunkChannel: '11111111-2222-3333-4444-555555555555', authorizationEnc: 'v1.sealed',
            azureCredentialsEnc: null, credentialDestination: credentialDestination(url),
          },
        }) as unknown as LoadedDelivery;
      const polls = new AckPolls(100, async () => false);
      const log = () => undefined;
      const ctx = {
        logger: { info: log, warn: log, debug: log, error: log },
        config: { webhooks: { allowedHosts: ['127.0.0.1'] } },
        openSealed: () => TOKEN,
        post,
        ackPolls: polls,
      } as unknown as DeliveryContext;
      // 250 deliveries awaiting their acks poll (each job lets go after the 100 ms wait): the first opens a request,
      // the others are queued for the channel's next one. Then the worker closes (its jobs have all returned).
      for (let i = 0; i < 250; i += 1) expect(await polls.ask(ctx, delivery(i), i)).toBe('unknown');
      while (sent.length === 0) await sleep(5);
      const closing = performance.now();
      await polls.settled();
      const took = performance.now() - closing;
      const after = sent.filter((s) => s.at >= closing);
      expect({ newRequestsAfterClose: after.map((s) => s.count), withinTwoTimeouts: took < 2 * TIMEOUT_MS }).toEqual({
        newRequestsAfterClose: [],
        withinTwoTimeouts: true,
      });
    } finally {
      post.close();
    }
  }, 20_000);
});

describe("a worker's close while its Splunk channel's ack request is slow and the delivery polled again meanwhile", () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld({
      env: {
        WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_SLOW_ATTEMPT_MS: '100', WEBHOOK_HEC_ACK_POLL_MS: '200',
        WEBHOOK_HEC_ACK_TIMEOUT_MS: '30000', WEBHOOK_MAX_ATTEMPTS: '3',
      },
    });
  });
  afterAll(() => w?.close());

  // Before: the delivery's re-polls during the slow request queued its ackId again, and the end of that request during
  // close() sent a new one and waited for it (one delivery: ~4.5 s instead of ~2 s).
  it('waits for the ack request in flight only: no ack request goes out after close() was called', async () => {
    const channel = randomUUID();
    const ackIds = new Map<string, number>();
    w.receiver.script(EVENT_PATH, (req) => {
      const ch = req.headers['x-splunk-request-channel'] as string;
      const ackId = ackIds.get(ch) ?? 0;
      ackIds.set(ch, ackId + 1);
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ text: 'Success', code: 0, ackId }) };
    });
    w.receiver.script(ACK_PATH, (req) => {
      const { acks } = JSON.parse(req.body.toString('utf8')) as { acks: number[] };
      const body = JSON.stringify({ acks: Object.fromEntries(acks.map((id) => [String(id), false])) });
      return { status: 200, headers: { 'content-type': 'application/json' }, body, delayMs: 2_500 };
    });
    const sub = await w.subscribe({
      name: 'hec slow close', url: w.receiver.url(EVENT_PATH), events: ['assessment.completed'],
      payload_format: 'splunk_hec', splunk_channel: channel, authorization: TOKEN, hec_ack: true,
    });
    await w.deliveryFor(await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_1', project_id: 'prj_1' } }), sub.id);
    await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'the first ack request');
    // The job polls again every 200 ms while that request is on the wire (not waiting: it is past the 100 ms wait).
    await sleep(700);
    const closing = Date.now();
    await w.worker!.close();
    const took = Date.now() - closing;
    w.worker = null;
    const sentAfterClose = w.receiver.requests(ACK_PATH).filter(onChannel(channel)).filter((r) => r.at >= closing).length;
    expect({ sentAfterClose, closeUnderOneTimeout: took < 3_000 }).toEqual({ sentAfterClose: 0, closeUnderOneTimeout: true });
  }, 30_000);
});
