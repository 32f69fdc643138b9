// A Splunk HEC subscription moved to another host while a delivery waits for its indexer acknowledgement (review of
// 935f5fd: the stored channel alone did not cover it). Real PostgreSQL, Redis, BullMQ worker and two loopback HTTPS
// "Splunk" hosts, each counting its ackIds per channel as Splunk does.
import { randomUUID } from 'node:crypto';
import { bearer } from '../../api/test/support/fixtures';
import { HecHost, HEC_ACK_PATH as ACK_PATH, HEC_EVENT_PATH as EVENT_PATH, HEC_TOKEN as TOKEN, onChannel } from './support/hec-host';
import { startReceiver } from './support/receiver';
import { createWorld, poll, type World } from './support/world';

let w: World;
beforeAll(async () => {
  // The ack timeout leaves the PATCH room to land while the first attempt still waits (at 1.5 s a loaded machine
  // let it run out first, and the attempt ended as a plain ack timeout); the move ends the wait at the next poll.
  w = await createWorld({ env: { WEBHOOK_HEC_ACK_TIMEOUT_MS: '8000', WEBHOOK_HEC_ACK_POLL_MS: '100', WEBHOOK_MAX_ATTEMPTS: '3' } });
});
afterAll(() => w?.close());

describe("a subscription's URL PATCHed to another Splunk host (token given again, splunk_channel kept) while its delivery waits for the ack", () => {
  // Before hec_ack_destination, the polls followed the subscription's URL to the new host, which numbers its own
  // ackIds on the same channel from 0: its answer about its own event settled the old host's event as indexed.
  it("does not take the new host's answer about its own ackId 0 for the old host's event", async () => {
    const channel = randomUUID();
    const oldHost = new HecHost(() => false); // never indexes the delivery's event
    const newHost = new HecHost(() => true); // indexes everything it received
    oldHost.serve(w.receiver);
    const elsewhere = await startReceiver(w.tls);
    try {
      newHost.serve(elsewhere);
      const sub = await w.subscribe({
        name: 'hec moved', url: w.receiver.url(EVENT_PATH), events: ['assessment.completed'],
        payload_format: 'splunk_hec', splunk_channel: channel, authorization: TOKEN, hec_ack: true,
      });
      const deliveryId = await w.deliveryFor(await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_1', project_id: 'prj_1' } }), sub.id);
      await poll(async () => w.receiver.requests(ACK_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'a first ack poll on the old host');

      // The operator moves HEC to a new host: a new URL on another destination, the token given again (the API's
      // credential-binding rule is met), the channel GUID unchanged.
      const moved = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(w.org.admin.token))
        .send({ url: elsewhere.url(EVENT_PATH), authorization: TOKEN });
      expect(moved.status).toBe(200);
      const movedAt = Date.now();
      // The subscription's next event goes to the new host on the same channel: ackId 0 there, indexed.
      await w.publish({ type: 'assessment.completed', data: { assessment_id: 'asm_2', project_id: 'prj_1' } });
      await poll(async () => elsewhere.requests(EVENT_PATH).filter(onChannel(channel)).length, (n) => n >= 1, 10_000, 'the event on the new host');

      const delivery = await w.waitForDelivery(deliveryId, 15_000);
      // The old host never said its ackId 0 was indexed: attempt 1 must not be a success (it was never indexed).
      expect(delivery.attempts[0].outcome).toBe('ack_timeout');
      expect(delivery.attempts[0].error).toMatch(/moved from https:\/\/127\.0\.0\.1:\d+ to https:\/\/127\.0\.0\.1:\d+ after the event POST/);
      // Sent again to the new host, where it is indexed; the old host was not asked after the move.
      expect(delivery).toMatchObject({ status: 'succeeded' });
      expect(elsewhere.requests(EVENT_PATH).filter(onChannel(channel))).toHaveLength(2);
      // (A poll already on its way at the PATCH may still arrive.)
      expect(w.receiver.requests(ACK_PATH).filter((r) => r.at > movedAt + 500)).toEqual([]);
    } finally {
      await elsewhere.close();
    }
  }, 30_000);
});
