// Splunk HEC indexer acknowledgement at the edges (review of 8866d90 and 663a683): a URL moved while the last allowed
// attempt waits for its ack, and a worker's SIGTERM while an ack request is on the wire. Real PostgreSQL, Redis,
// BullMQ workers and loopback HTTPS "Splunk" hosts that number their ackIds per channel and report an ackId true once.
import { randomUUID } from 'node:crypto';
import { bearer } from '../../api/test/support/fixtures';
import { startWorker } from '../src/worker';
import { HecHost, HEC_ACK_PATH as ACK_PATH, HEC_EVENT_PATH as EVENT_PATH, HEC_TOKEN as TOKEN, onChannel } from './support/hec-host';
import { startReceiver } from './support/receiver';
import { createWorld, levelBase, poll, type World } from './support/world';

describe('a URL moved while the LAST allowed attempt waits for its ack (WEBHOOK_MAX_ATTEMPTS=1)', () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld({
      env: { WEBHOOK_HEC_ACK_TIMEOUT_MS: '1500', WEBHOOK_HEC_ACK_POLL_MS: '100', WEBHOOK_MAX_ATTEMPTS: '1', WEBHOOK_FAILING_AFTER_FAILURES: '1' },
    });
  });
  afterAll(() => w?.close());

  // Before, the move ended the last attempt as the endpoint's failure: the delivery failed with a terminal_failure
  // health effect, and the freshly moved subscription turned `failing` (its operators notified) for an endpoint never
  // tried. The move is the operator's doing: the delivery fails saying so, the subscription's health is untouched, and
  // a resend delivers the event to the new URL.
  it('fails the delivery without counting the move against the subscription; a resend goes to the new URL', async () => {
    const channel = randomUUID();
    const oldHost = new HecHost(() => false);
    const newHost = new HecHost(() => true);
    oldHost.serve(w.receiver);
    const elsewhere = await startReceiver(w.tls);
    try {
      newHost.serve(elsewhere);
      const sub = await w.subscribe({
        name: 'hec moved last', url: w.receiver.url(EVENT_PATH), events: ['assessment.completed'],
        payload_format: 'splunk_hec', splunk_channel: channel, authorization: TOKEN, hec_ack: true,
      });
      const deliveryId = await w.deliveryFor(await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_1', project_id: 'prj_1' } }), sub.id);
      await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll on the old host');
      const moved = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(w.org.admin.token))
        .send({ url: elsewhere.url(EVENT_PATH), authorization: TOKEN });
      expect(moved.status).toBe(200);

      const delivery = await w.waitForDelivery(deliveryId, 15_000);
      expect(delivery.attempts[0].error).toMatch(/moved from .* after the event POST/);
      const stored = await w.subscription(sub.id);
      expect({
        eventsAtNewUrl: elsewhere.requests(EVENT_PATH).filter(onChannel(channel)).length,
        delivery: delivery.status,
        subscription: stored.status,
        consecutiveFailures: stored.consecutiveFailures,
      }).toEqual({ eventsAtNewUrl: 0, delivery: 'failed', subscription: 'active', consecutiveFailures: 0 });
      const row = await w.h.deps.prisma.webhookDelivery.findUniqueOrThrow({ where: { id: deliveryId } });
      expect(row.failureReason).toMatch(/not counted against the subscription; resend the delivery/);

      const resent = await w.api().post(`${levelBase()}/deliveries/${deliveryId}/resend`).set(bearer(w.org.admin.token));
      expect(resent.status).toBe(202);
      expect(await w.waitForDelivery(resent.body.id, 15_000)).toMatchObject({ status: 'succeeded' });
      expect(elsewhere.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(1);
    } finally {
      await elsewhere.close();
    }
  }, 30_000);
});

describe("a worker's SIGTERM while a slow ack request carrying an indexed ackId is in flight (663a683)", () => {
  let w: World;
  beforeAll(async () => {
    w = await createWorld({
      env: {
        WEBHOOK_HEC_ACK_TIMEOUT_MS: '4000', WEBHOOK_HEC_ACK_POLL_MS: '2000', WEBHOOK_SLOW_ATTEMPT_MS: '100', WEBHOOK_MAX_ATTEMPTS: '3',
      },
    });
  });
  afterAll(() => w?.close());

  // Before, the worker's close destroyed the transport (BullMQ's 'closed') before it waited for anything: an ack
  // request still in flight (a slow endpoint is why answers come late) was cut off, and its 'indexed' answer, which
  // Splunk gives once, was lost: the restarted worker was told false and the event was sent again.
  it('keeps the one indexed answer: the delivery succeeds on its one event POST', async () => {
    const channel = randomUUID();
    const host = new HecHost(() => true, 1_200);
    host.serve(w.receiver);
    const sub = await w.subscribe({
      name: 'hec sigterm', url: w.receiver.url(EVENT_PATH), events: ['assessment.completed'],
      payload_format: 'splunk_hec', splunk_channel: channel, authorization: TOKEN, hec_ack: true,
    });
    const deliveryId = await w.deliveryFor(await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_1', project_id: 'prj_1' } }), sub.id);
    await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'the first ack request');
    // Its poll stops waiting after WEBHOOK_SLOW_ATTEMPT_MS; the request (answered 'true' by Splunk) is still on its way.
    await new Promise((r) => setTimeout(r, 300));
    await w.worker!.close(); // what main.ts's SIGTERM does before prisma.$disconnect()
    // Settled by the closing worker, before its database could be closed.
    expect(await w.h.deps.prisma.webhookDelivery.findUniqueOrThrow({ where: { id: deliveryId } })).toMatchObject({ status: 'succeeded' });
    w.worker = await startWorker(w.workerDeps, { schedule: false });

    const delivery = await w.waitForDelivery(deliveryId, 20_000);
    expect({
      eventPosts: w.receiver.requests(EVENT_PATH).filter(onChannel(channel)).length,
      outcomes: delivery.attempts.map((a) => a.outcome),
    }).toEqual({ eventPosts: 1, outcomes: ['success'] });
  }, 40_000);
});
