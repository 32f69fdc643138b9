// Splunk HEC indexer acknowledgement for subscriptions with hec_ack (docs/siem.md "Splunk (HTTP Event Collector)").
// An event POST that Splunk accepts with an ackId does not end the delivery: the attempt is recorded `ack_pending`,
// the ackId and deadline are saved on the delivery row, and the job goes back to the queue until the next poll (no
// worker slot waits meanwhile, and a restarted worker finds the same row). Each poll asks /services/collector/ack on
// the subscription's host, channel and token, through the worker's one transport: indexed ends the delivery
// succeeded; no ack by the deadline makes the attempt a failed `ack_timeout`, so the delivery is sent again
// (at-least-once) or fails per the retry policy. The polls of one channel that fall due while one of its polls is
// in flight go together in the next request (one request answers many ackIds, as Splunk recommends).
import { resolveWebhookTarget } from '@svc/net';
import { Coalescer } from '@svc/db';
import { nextAttempt } from '@svc/domain';
import { HEC_ACK_PATH, hecAckDecision, hecAckRequestBody, hecAckStatusOf, hecAckUrl, type HecAckStatus } from '@svc/webhooks';
import { credentialsBoundElsewhere, type DeliveryContext, type DeliveryResult, type LoadedDelivery } from './deliver';
import { notifyHealthChange } from './health-notify';
import type { DeliveryRef } from '@svc/outbox';
import { postponeAckPoll, settleAck, type AwaitedAck, type SubscriptionEffect } from './record';
import { USER_AGENT } from './request';
import { RetryableDeliveryError, webhookRetryPolicy } from './retry';

/** Whether an accepted POST of this delivery waits for Splunk's indexer acknowledgement. */
export function awaitsHecAck(delivery: LoadedDelivery): boolean {
  return delivery.payloadFormat === 'splunk_hec' && delivery.subscription.hecAck && delivery.subscription.splunkChannel !== null;
}

/** The message of an accepted POST without an ackId while hec_ack is on (the token has no indexer acknowledgement). */
export const ACK_MISSING_ERROR =
  'hec_ack is on but Splunk answered without an ackId: turn on indexer acknowledgement for the HEC token, or turn hec_ack off';

/** One delivery's poll of its awaited ackId, with the job's context and the delivery as that job loaded it. */
interface AckPoll {
  ctx: DeliveryContext;
  delivery: LoadedDelivery;
  ackId: number;
  /** The order in which the polls of its AckPolls entry were asked (1, 2, ...). */
  seq: number;
}

/**
 * One request to the ack endpoint for these polls of one subscription, URL, channel and token (an AckPolls key);
 * each answer is `unknown` unless the endpoint said something readable about that ackId (polled again then). Each
 * poll is checked against its own job's snapshot of the subscription (a poll whose credentials are bound elsewhere
 * is not sent), and the request is made and logged by the batch's first poll that may go, under its own job.
 */
async function askSplunk(polls: AckPoll[]): Promise<{ answers: HecAckStatus[]; failed: boolean }> {
  const answers: HecAckStatus[] = polls.map(() => 'unknown');
  // The URL moved since the POST without the token given again: the token stays where it was given (the next
  // attempt, after the ack deadline, fails as unsafe and says why).
  const going: number[] = [];
  polls.forEach(({ ctx, delivery }, i) => {
    if (credentialsBoundElsewhere(delivery.subscription, delivery.subscription.url)) {
      ctx.logger.info('HEC ack poll not sent', { delivery_id: delivery.id, reason: 'credentials bound elsewhere' });
    } else {
      going.push(i);
    }
  });
  if (going.length === 0) return { answers, failed: false };
  const { ctx, delivery } = polls[going[0]];
  const { subscription } = delivery;
  const ackIds = going.map((i) => polls[i].ackId);
  const deliveryIds = going.map((i) => polls[i].delivery.id);
  const check = await resolveWebhookTarget(hecAckUrl(subscription.url), { allowedHosts: ctx.config.webhooks.allowedHosts, lookup: ctx.lookup });
  if (!check.ok) {
    ctx.logger.info('HEC ack poll not sent', { subscription_id: subscription.id, delivery_ids: deliveryIds, reason: check.reason });
    return { answers, failed: false };
  }
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': USER_AGENT,
    ...(subscription.authorizationEnc && { Authorization: ctx.openSealed(subscription.authorizationEnc) }),
    ...(subscription.splunkChannel && { 'X-Splunk-Request-Channel': subscription.splunkChannel }),
  };
  const { target } = check;
  const result = await ctx.post({ url: target.url, address: target.address, family: target.family, headers, body: hecAckRequestBody(ackIds) });
  const status = result.response?.status;
  if (status === undefined || status < 200 || status >= 300) {
    ctx.logger.info('HEC ack poll failed', {
      subscription_id: subscription.id,
      delivery_ids: deliveryIds,
      path: HEC_ACK_PATH,
      response_status: status ?? null,
      error: result.error?.message,
    });
    return { answers, failed: true };
  }
  going.forEach((i) => (answers[i] = hecAckStatusOf(result.body, polls[i].ackId)));
  return { answers, failed: false };
}

/** ackIds one request asks about at most. */
const ACKS_PER_POLL = 100;

interface ChannelPolls {
  polls: Coalescer<AckPoll, HecAckStatus>;
  callers: number;
  /** Polls asked so far (the last `seq`). */
  asked: number;
  /** Polls up to this `seq` took the answer of a request that failed (no answer, or not a 2xx). */
  failedUpTo: number;
}

/**
 * A batch of one entry: the polls that fell due while a request that then failed was in flight take its failure
 * (`unknown`, polled again after WEBHOOK_HEC_ACK_POLL_MS) rather than a request of their own, so that no poll waits
 * for more than one request: behind a hung endpoint each would otherwise hold its job for two request timeouts.
 */
async function askFor(entry: ChannelPolls, polls: AckPoll[]): Promise<HecAckStatus[]> {
  const answers: HecAckStatus[] = polls.map(() => 'unknown');
  const fresh = polls.flatMap((poll, i) => (poll.seq > entry.failedUpTo ? [i] : []));
  if (fresh.length === 0) return answers;
  const asked = await askSplunk(fresh.map((i) => polls[i]));
  if (asked.failed) entry.failedUpTo = entry.asked;
  fresh.forEach((i, j) => (answers[i] = asked.answers[j]));
  return answers;
}

/**
 * The polls in flight of each channel (a subscription as loaded: same URL, channel and token), and the ackIds that
 * wait for them. An entry lives while it has callers; each of its requests is made for the polls it carries (their
 * jobs, their snapshots), never for the poll that happened to open the entry.
 */
export class AckPolls {
  private readonly byChannel = new Map<string, ChannelPolls>();

  /** What Splunk says about the delivery's awaited ackId, in the channel's next request. */
  async ask(ctx: DeliveryContext, delivery: LoadedDelivery, ackId: number): Promise<HecAckStatus> {
    const { subscription } = delivery;
    const key = [subscription.id, subscription.url, subscription.splunkChannel, subscription.authorizationEnc].join('\n');
    let entry = this.byChannel.get(key);
    if (!entry) {
      const created: ChannelPolls = { polls: null!, callers: 0, asked: 0, failedUpTo: 0 };
      created.polls = new Coalescer((polls: AckPoll[]) => askFor(created, polls), 1, ACKS_PER_POLL);
      this.byChannel.set(key, (entry = created));
    }
    entry.callers += 1;
    entry.asked += 1;
    try {
      return await entry.polls.run({ ctx, delivery, ackId, seq: entry.asked });
    } finally {
      entry.callers -= 1;
      if (entry.callers === 0) this.byChannel.delete(key);
    }
  }

  /** Channels with polls in flight or waiting (for tests). */
  get size(): number {
    return this.byChannel.size;
  }
}

/** A poll of the delivery's awaited ack, and what follows from the answer. */
export async function pollHecAck(ctx: DeliveryContext, delivery: LoadedDelivery): Promise<DeliveryResult> {
  const awaited: AwaitedAck = {
    deliveryId: delivery.id,
    subscriptionId: delivery.subscriptionId,
    number: delivery.attemptCount,
    ackId: delivery.hecAckId!,
  };
  const ackId = Number(awaited.ackId);
  const deadline = delivery.hecAckDeadline ?? ctx.clock.now();
  const status = await ctx.ackPolls.ask(ctx, delivery, ackId);
  const now = ctx.clock.now();
  const decision = hecAckDecision(status, deadline, now, ctx.config.webhooks.hecAck.pollMs);
  if (decision.action === 'poll') {
    await postponeAckPoll(ctx.prisma, awaited, decision.at);
    return { status: 'awaiting_ack', until: decision.at };
  }
  if (decision.action === 'succeed') {
    const published: DeliveryRef[] = [];
    const { settled } = await settleAck(ctx.prisma, awaited, { outcome: 'success', delivery: { status: 'succeeded' } }, now, published);
    await ctx.enqueueEvents(published);
    if (!settled) return { status: 'conflict' };
    ctx.logger.debug('HEC ack: indexed', { delivery_id: delivery.id, attempt: awaited.number });
    return { status: 'succeeded', attempt: awaited.number, outcome: 'success' };
  }
  return giveUp(ctx, awaited, ackId, now);
}

/** No ack by the deadline: attempt N failed; the delivery is sent again after the backoff, or fails. */
async function giveUp(ctx: DeliveryContext, awaited: AwaitedAck, ackId: number, now: Date): Promise<DeliveryResult> {
  const error = `Splunk did not report ackId ${ackId} indexed within ${ctx.config.webhooks.hecAck.timeoutMs} ms`;
  const decision = nextAttempt(awaited.number, { status: null, retryAfter: null, now }, webhookRetryPolicy(ctx.config));
  const last = { outcome: 'ack_timeout', responseStatus: null, error };
  ctx.logger.info('Webhook attempt', { delivery_id: awaited.deliveryId, subscription_id: awaited.subscriptionId, attempt: awaited.number, outcome: 'ack_timeout', error });
  if (decision.action === 'stop') {
    const effect: SubscriptionEffect = { kind: 'terminal_failure', rules: ctx.config.webhooks.health };
    const reason = `${decision.detail}; last: ack_timeout: ${error}`;
    const published: DeliveryRef[] = [];
    const { settled, change } = await settleAck(ctx.prisma, awaited, { outcome: 'ack_timeout', error, delivery: { status: 'failed', reason }, effect }, now, published);
    await ctx.enqueueEvents(published);
    if (!settled) return { status: 'conflict' };
    if (change) await notifyHealthChange(ctx, change, last);
    return { status: 'failed', attempt: awaited.number, outcome: 'ack_timeout' };
  }
  const nextAttemptAt = new Date(now.getTime() + decision.delayMs);
  const update = { outcome: 'ack_timeout' as const, error, delivery: { status: 'pending' as const, nextAttemptAt }, effect: { kind: 'none' as const } };
  const { settled } = await settleAck(ctx.prisma, awaited, update, now);
  if (!settled) return { status: 'conflict' };
  throw new RetryableDeliveryError(`Attempt ${awaited.number} not acknowledged by Splunk; sending again in ${decision.delayMs} ms`, decision.delayMs);
}
