// Splunk HEC indexer acknowledgement for subscriptions with hec_ack (docs/siem.md "Splunk (HTTP Event Collector)").
// An event POST that Splunk accepts with an ackId does not end the delivery: the attempt is recorded `ack_pending`,
// the ackId, its channel and the deadline are saved on the delivery row, and the job goes back to the queue until the
// next poll (no worker slot waits meanwhile, and a restarted worker finds the same row). Each poll asks
// /services/collector/ack on the subscription's host and token, on the channel the event POST went on (a changed
// splunk_channel does not answer for the old one's ackIds), through the worker's one transport: indexed ends the delivery
// succeeded; no ack by the deadline makes the attempt a failed `ack_timeout`, so the delivery is sent again
// (at-least-once) or fails per the retry policy. The polls of one channel that fall due while one of its polls is
// in flight go together in the next request (one request answers many ackIds, as Splunk recommends).
import { resolveWebhookTarget } from '@svc/net';
import { InFlight, nextAttempt } from '@svc/domain';
import { HEC_ACK_PATH, credentialDestination, hecAckDecision, hecAckRequestBody, hecAckStatusOf, hecAckUrl, type HecAckStatus } from '@svc/webhooks';
import { credentialsBoundElsewhere, type DeliveryContext, type DeliveryResult, type LoadedDelivery } from './deliver';
import { notifyHealthChange } from './health-notify';
import { deliveriesEnded } from './metrics';
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
export interface AckPoll {
  ctx: DeliveryContext;
  delivery: LoadedDelivery;
  ackId: number;
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
  const check = await resolveWebhookTarget(hecAckUrl(subscription.url), { allowedHosts: ctx.config.webhooks.allowedHosts, lookup: ctx.lookup, dns: ctx.config.webhooks.dns });
  if (!check.ok) {
    ctx.logger.info('HEC ack poll not sent', { subscription_id: subscription.id, delivery_ids: deliveryIds, reason: check.reason });
    return { answers, failed: false };
  }
  const channel = ackChannelOf(delivery);
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'User-Agent': USER_AGENT,
    ...(subscription.authorizationEnc && { Authorization: ctx.openSealed(subscription.authorizationEnc) }),
    ...(channel && { 'X-Splunk-Request-Channel': channel }),
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

/** How long an 'indexed' answer that arrived after its poll stopped waiting is kept for that delivery's next poll. */
const KEEP_ANSWER_MS = 10 * 60_000;

/** A job waiting for the answer about its delivery's ackId. */
interface Waiter {
  ackId: number;
  settle: (status: HecAckStatus | Error) => void;
}

/** One channel's requests (a subscription as loaded: same URL, channel and token) and the polls around them. */
interface ChannelPolls {
  /** The polls the next request carries, by delivery id: their jobs may wait for it, or may have moved on. */
  next: Map<string, AckPoll>;
  /** The jobs waiting for an answer, by delivery id. */
  waiters: Map<string, Waiter>;
  /** 'indexed' answers that arrived after their poll stopped waiting, by delivery id, for its next poll. */
  indexed: Map<string, { ackId: number; at: number }>;
  /** When the request in flight was sent (performance.now()); null while none is. */
  inFlightSince: number | null;
  /** The deliveries whose ackIds the request in flight carries. */
  asking: Map<string, number>;
}

/**
 * The polls of each channel, one request in flight per channel carrying up to 100 ackIds (Splunk's advice). A poll
 * waits for its answer only while the channel answers within `waitMs` (WEBHOOK_SLOW_ATTEMPT_MS): behind a slow or
 * hung ack endpoint it does not hold a worker slot for the request's timeout (with a few hundred deliveries awaiting
 * acks, their polls would hold every slot and starve every other subscription). Its ackId still goes in the
 * channel's next request, and an 'indexed' answer that comes later is recorded at once (`recordLate`; kept for the
 * delivery's next poll in this worker should the record fail). Each request is made for the
 * polls it carries (their jobs, their snapshots), never for the poll that happened to start it.
 */
export class AckPolls {
  private readonly byChannel = new Map<string, ChannelPolls>();
  /**
   * The channels whose last request failed or took longer than the wait, and when it ended: their polls do not wait
   * until one answers in time. Kept apart from the entries, which go once idle (a hung endpoint's entry goes after
   * each failed request: its next poll would otherwise wait again, every request timeout); forgotten after
   * KEEP_ANSWER_MS without a request.
   */
  private readonly slowSince = new Map<string, number>();
  private lastSweep = 0;
  /** The requests in flight and the late answers being recorded (`recordLate`), for `settled` at shutdown. */
  private readonly pending = new InFlight<never>();
  /** Set by `settled`: the worker is closing, no request is started any more. */
  private closing = false;

  /**
   * `recordLate`: records an 'indexed' answer that came after its poll stopped waiting (true: the delivery is settled).
   * Splunk says true about an ackId once; kept only in this worker's memory, the answer would be lost when the
   * delivery's next poll runs on another worker (or after a restart), and the delivery sent again.
   */
  constructor(
    private readonly waitMs: number,
    private readonly recordLate?: (poll: AckPoll) => Promise<boolean>,
  ) {}

  /** What Splunk says about the delivery's awaited ackId: 'unknown' when the channel did not answer within the wait. */
  async ask(ctx: DeliveryContext, delivery: LoadedDelivery, ackId: number): Promise<HecAckStatus> {
    this.sweep();
    const key = channelKey(delivery);
    const entry = this.entryFor(key);
    const kept = entry.indexed.get(delivery.id);
    entry.indexed.delete(delivery.id);
    if (kept?.ackId === ackId) {
      this.dropIfIdle(key, entry);
      return 'indexed';
    }
    if (this.closing) return 'not_asked';
    entry.next.set(delivery.id, { ctx, delivery, ackId });
    if (entry.inFlightSince === null) this.send(key, entry);
    const waitMs = this.slowSince.has(key) ? 0 : entry.inFlightSince! + this.waitMs - performance.now();
    if (waitMs <= 0) return 'unknown';
    return this.waitForAnswer(entry, delivery.id, ackId, waitMs);
  }

  /** Whether a request in flight or the channel's next one carries this delivery's ackId (its answer is to come). */
  awaitsAnswer(delivery: LoadedDelivery, ackId: number): boolean {
    const entry = this.byChannel.get(channelKey(delivery));
    return entry !== undefined && (entry.asking.get(delivery.id) === ackId || entry.next.get(delivery.id)?.ackId === ackId);
  }

  /**
   * Starts no request any more, and resolves once the requests in flight have ended (within the transport's timeout:
   * one WEBHOOK_TIMEOUT_MS at most, however many polls wait) and their late answers are written (or failed). The
   * worker's close awaits it after its last job and before it closes the transport and the database: Splunk reports an
   * ackId true once, so an answer cut off on the wire or in its write would be lost, and its event sent again. The
   * polls still queued for a channel's next request are asked again by their jobs after the restart.
   */
  async settled(): Promise<void> {
    this.stopAsking();
    await this.pending.settled();
  }

  /** The worker is closing: no request is started any more (a poll asked now is answered 'not_asked'). */
  stopAsking(): void {
    this.closing = true;
  }

  /** Channels with requests in flight, polls waiting or answers kept (for tests). */
  get size(): number {
    return this.byChannel.size;
  }

  private entryFor(key: string): ChannelPolls {
    let entry = this.byChannel.get(key);
    if (!entry) {
      entry = { next: new Map(), waiters: new Map(), indexed: new Map(), inFlightSince: null, asking: new Map() };
      this.byChannel.set(key, entry);
    }
    return entry;
  }

  private waitForAnswer(entry: ChannelPolls, deliveryId: string, ackId: number, waitMs: number): Promise<HecAckStatus> {
    return new Promise<HecAckStatus>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (entry.waiters.get(deliveryId) === waiter) entry.waiters.delete(deliveryId);
        resolve('unknown');
      }, waitMs);
      timer.unref?.();
      const waiter: Waiter = {
        ackId,
        settle: (status) => {
          clearTimeout(timer);
          if (status instanceof Error) reject(status);
          else resolve(status);
        },
      };
      entry.waiters.set(deliveryId, waiter);
    });
  }

  /** Sends the channel's next request; when it ends, answers its polls and sends the next one if polls came meanwhile. */
  private send(key: string, entry: ChannelPolls): void {
    const polls = [...entry.next.values()].slice(0, ACKS_PER_POLL);
    entry.asking = new Map(polls.map((poll) => [poll.delivery.id, poll.ackId]));
    for (const poll of polls) entry.next.delete(poll.delivery.id);
    const sentAt = performance.now();
    entry.inFlightSince = sentAt;
    const request = askSplunk(polls)
      .then(
        ({ answers, failed }) => {
          this.markSlow(key, failed || performance.now() - sentAt > this.waitMs);
          polls.forEach((poll, i) => this.answer(entry, poll, answers[i]));
          // The polls that came while a failed request was in flight take its failure rather than a request of their
          // own (asked again at their next poll): a failing endpoint is not asked again at once.
          if (failed) {
            for (const poll of entry.next.values()) this.answer(entry, poll, 'unknown');
            entry.next.clear();
          }
        },
        (err: unknown) => {
          const error = err instanceof Error ? err : new Error(String(err));
          this.markSlow(key, true);
          for (const poll of [...polls, ...entry.next.values()]) this.answer(entry, poll, error);
          entry.next.clear();
        },
      )
      .finally(() => {
        entry.inFlightSince = null;
        entry.asking = new Map();
        if (entry.next.size > 0 && !this.closing) this.send(key, entry);
        else this.dropIfIdle(key, entry);
      });
    // A failure here is a defect in this bookkeeping, not Splunk's answer: logged; the polls left waiting answer
    // 'unknown' at their deadline and are asked again at their next poll.
    this.pending.keep(request).catch((err: unknown) => polls[0]?.ctx.logger.error('HEC ack: a request\'s answers could not be handled', { error: String(err) }));
  }

  private markSlow(key: string, slow: boolean): void {
    if (slow) this.slowSince.set(key, performance.now());
    else this.slowSince.delete(key);
  }

  private answer(entry: ChannelPolls, poll: AckPoll, status: HecAckStatus | Error): void {
    const id = poll.delivery.id;
    const waiter = entry.waiters.get(id);
    if (waiter && waiter.ackId === poll.ackId) {
      entry.waiters.delete(id);
      waiter.settle(status);
    } else if (status === 'indexed') {
      const kept = { ackId: poll.ackId, at: performance.now() };
      entry.indexed.set(id, kept);
      // Recorded at once; kept too, for this worker's next poll should the record fail (never rejects).
      if (!this.recordLate) return;
      const recorded = this.recordLate(poll).then(
        (settled) => {
          if (settled && entry.indexed.get(id) === kept) entry.indexed.delete(id);
        },
        () => undefined,
      );
      this.pending.keep(recorded);
    }
  }

  private dropIfIdle(key: string, entry: ChannelPolls): void {
    if (entry.inFlightSince === null && entry.next.size === 0 && entry.waiters.size === 0 && entry.indexed.size === 0) {
      this.byChannel.delete(key);
    }
  }

  /** Forgets kept answers no poll came back for (the delivery settled elsewhere, or its worker changed). */
  private sweep(): void {
    const now = performance.now();
    if (now - this.lastSweep < 1_000) return;
    this.lastSweep = now;
    for (const [key, entry] of this.byChannel) {
      for (const [id, kept] of entry.indexed) if (now - kept.at > KEEP_ANSWER_MS) entry.indexed.delete(id);
      this.dropIfIdle(key, entry);
    }
    for (const [key, since] of this.slowSince) if (now - since > KEEP_ANSWER_MS && !this.byChannel.has(key)) this.slowSince.delete(key);
  }
}

/** The AckPolls key: a subscription as loaded (its id, URL and sealed token) and the channel the ackId is from. */
function channelKey(delivery: LoadedDelivery): string {
  const { subscription } = delivery;
  return [subscription.id, subscription.url, ackChannelOf(delivery), subscription.authorizationEnc].join('\n');
}

/**
 * The channel the awaited ackId was issued on: the one the event POST went on, which the delivery keeps; the
 * subscription's channel for a row saved before it was kept (an ack is awaited only where a channel is set).
 */
function ackChannelOf(delivery: LoadedDelivery): string {
  return delivery.hecAckChannel ?? delivery.subscription.splunkChannel ?? '';
}

/** A poll of the delivery's awaited ack, and what follows from the answer. */
export async function pollHecAck(ctx: DeliveryContext, delivery: LoadedDelivery): Promise<DeliveryResult> {
  const awaited = awaitedAckOf(delivery);
  const ackId = Number(awaited.ackId);
  const deadline = delivery.hecAckDeadline ?? ctx.clock.now();
  const moved = movedSincePost(delivery, ackId);
  if (moved) return giveUp(ctx, awaited, ackId, ctx.clock.now(), moved);
  const status = await ctx.ackPolls.ask(ctx, delivery, ackId);
  const now = ctx.clock.now();
  // At the deadline, the request carrying this ackId (asked before it) gets up to one request timeout more.
  const stillAsked = ctx.ackPolls.awaitsAnswer(delivery, ackId) ? { graceMs: ctx.config.webhooks.timeoutMs } : undefined;
  const decision = hecAckDecision(status, deadline, now, ctx.config.webhooks.hecAck.pollMs, stillAsked);
  if (decision.action === 'poll') {
    await postponeAckPoll(ctx.prisma, awaited, decision.at);
    return { status: 'awaiting_ack', until: decision.at };
  }
  if (decision.action === 'succeed') {
    if (!(await recordIndexed(ctx, awaited, now))) return { status: 'conflict' };
    return { status: 'succeeded', attempt: awaited.number, outcome: 'success' };
  }
  return giveUp(ctx, awaited, ackId, now);
}

/**
 * Why the awaited ackId can no longer be asked, or null: the subscription's URL moved to another destination since
 * the event POST. That host numbers its own ackIds on the same channel (asked there, another event could read as
 * indexed), and the old host must not get the credentials given for the new one: the attempt ends at once and the
 * event is sent again, to the new URL.
 */
function movedSincePost(delivery: LoadedDelivery, ackId: number): string | null {
  const sentTo = delivery.hecAckDestination;
  const now = credentialDestination(delivery.subscription.url);
  if (sentTo === null || now === sentTo) return null;
  return `the subscription's URL moved from ${sentTo} to ${now ?? 'another destination'} after the event POST: ackId ${ackId} cannot be asked there`;
}

function awaitedAckOf(delivery: LoadedDelivery): AwaitedAck {
  return { deliveryId: delivery.id, subscriptionId: delivery.subscriptionId, number: delivery.attemptCount, ackId: delivery.hecAckId! };
}

/** Splunk said indexed: attempt N succeeded, and the delivery (false: settled already, by another poll or worker). */
async function recordIndexed(ctx: DeliveryContext, awaited: AwaitedAck, now: Date): Promise<boolean> {
  const published: DeliveryRef[] = [];
  const { settled } = await settleAck(ctx.prisma, awaited, { outcome: 'success', delivery: { status: 'succeeded' } }, now, published);
  await ctx.enqueueEvents(published);
  if (settled) ctx.logger.debug('HEC ack: indexed', { delivery_id: awaited.deliveryId, attempt: awaited.number });
  return settled;
}

/**
 * An 'indexed' answer that came after its poll stopped waiting (AckPolls): recorded at once, claimed by the attempt
 * and ackId that poll saw (nothing when the delivery moved on). The job's next poll finds the delivery settled.
 */
export async function recordLateIndexed(poll: AckPoll): Promise<boolean> {
  const { ctx, delivery } = poll;
  try {
    if (delivery.hecAckId === null || Number(delivery.hecAckId) !== poll.ackId) return false;
    const settled = await recordIndexed(ctx, awaitedAckOf(delivery), ctx.clock.now());
    if (settled) deliveriesEnded.inc({ result: 'succeeded', reason: 'success' });
    return settled;
  } catch (err) {
    ctx.logger.warn('Could not record a late HEC ack (kept for the next poll of this worker)', { delivery_id: delivery.id, error: String(err) });
    return false;
  }
}

/**
 * No ack by the deadline: attempt N failed; the delivery is sent again after the backoff, or fails. `moved`: there is
 * no ack to be had, the subscription's URL moved (the operator's doing, not the endpoint's failure): sent again at
 * once, and on the last allowed attempt the delivery fails without counting against the subscription's health.
 */
async function giveUp(ctx: DeliveryContext, awaited: AwaitedAck, ackId: number, now: Date, moved?: string): Promise<DeliveryResult> {
  const error = moved ?? `Splunk did not report ackId ${ackId} indexed within ${ctx.config.webhooks.hecAck.timeoutMs} ms`;
  const decision = nextAttempt(awaited.number, { status: null, retryAfter: null, now }, webhookRetryPolicy(ctx.config));
  const last = { outcome: 'ack_timeout', responseStatus: null, error };
  ctx.logger.info('Webhook attempt', { delivery_id: awaited.deliveryId, subscription_id: awaited.subscriptionId, attempt: awaited.number, outcome: 'ack_timeout', error });
  if (decision.action === 'stop') {
    const effect: SubscriptionEffect = moved ? { kind: 'none' } : { kind: 'terminal_failure', rules: ctx.config.webhooks.health };
    const reason = `${decision.detail}; last: ack_timeout: ${error}${moved ? ' (not counted against the subscription; resend the delivery to send it to the new URL)' : ''}`;
    const published: DeliveryRef[] = [];
    const { settled, change } = await settleAck(ctx.prisma, awaited, { outcome: 'ack_timeout', error, delivery: { status: 'failed', reason }, effect }, now, published);
    await ctx.enqueueEvents(published);
    if (!settled) return { status: 'conflict' };
    if (change) await notifyHealthChange(ctx, change, last);
    return { status: 'failed', attempt: awaited.number, outcome: 'ack_timeout' };
  }
  const delayMs = moved ? 0 : decision.delayMs;
  const nextAttemptAt = new Date(now.getTime() + delayMs);
  const update = { outcome: 'ack_timeout' as const, error, delivery: { status: 'pending' as const, nextAttemptAt }, effect: { kind: 'none' as const } };
  const { settled } = await settleAck(ctx.prisma, awaited, update, now);
  if (!settled) return { status: 'conflict' };
  throw new RetryableDeliveryError(`Attempt ${awaited.number} not acknowledged by Splunk; sending again in ${delayMs} ms`, delayMs);
}
