// The processor of one delivery job: one attempt at one delivery. Load it, render the payload snapshot in the
// subscription's format, check the URL again, sign, POST to the checked address, then record the attempt, the
// delivery's state and the subscription's health in one transaction. A failure that will be retried throws a
// RetryableDeliveryError carrying the wait; everything else returns normally.
import { randomUUID } from 'node:crypto';
import { resolveWebhookTarget, describeTargetRejection, type ResolvedTarget } from '@svc/net';
import { chatUrlOf, Coalescer, memoizedUnseal, Prisma, queryRows, type WebhookDelivery, type WebhookSubscription } from '@svc/db';
import {
  credentialBoundElsewhere,
  credentialDestination,
  hecAckIdOf,
  hecAckSchedule,
  isNotificationKind,
  isPayloadFormat,
  renderNotification,
  renderPayload,
  type Envelope,
  type RenderedPayload,
} from '@svc/webhooks';
import type { WorkerDeps } from './deps';
import { createPostWebhook, type HttpResult, type PostWebhook } from './http/post';
import { outcomeOfHttp, recordedHeaders, type AttemptOutcome } from './http/outcome';
import { trustedSecureContext } from './http/trust';
import { createEntraTokens, type EntraTokens } from './http/entra-token';
import { hecErrorOf } from './http/hec-error';
import { sendNotificationMail } from './http/mail-send';
import { mailErrorForLog } from '@svc/mail';
import { sendAuthorized, type AuthorizedResult } from './http/receiver-auth';
import {
  AttemptConflictError,
  attemptRecorder,
  failHeldBackDelivery,
  failPendingDelivery,
  recordAttempt,
  recordAwaitingAck,
  type AttemptRecord,
  type AttemptRecorder,
  type AttemptWrite,
  type DeliveryUpdate,
  type SubscriptionEffect,
} from './record';
import { deliveryHeaders } from './request';
import { nextAttempt, postponeOrFail, wakeJitterMs, type BreakerState, type PostponeDecision, type WaitReason } from '@svc/domain';
import { RetryableDeliveryError, webhookRetryPolicy } from './retry';
import { attemptSignatures, signatureTimestamp, type OpenSealed } from './signing';
import { observeAttempt } from './attempt-metrics';
import { notifyHealthChange } from './health-notify';
import { PostponementWriter, recordBreakerTransition, scheduleProbe } from './isolation/effects';
import type { Queue } from 'bullmq';
import { IsolationState, bullPrefix, wakeDeliveryJobs, type DeliveryJobData, type Release, type SubscriptionRef } from '@svc/queue';
import { enqueueAfterCommit, heldBackMarker, outboxDeps, type DeliveryRef } from '@svc/outbox';
import { ACK_MISSING_ERROR, AckPolls, awaitsHecAck, pollHecAck, recordLateIndexed } from './hec-ack';

export interface DeliveryContext extends WorkerDeps {
  post: PostWebhook;
  entraTokens: EntraTokens;
  /** Opens sealed subscription columns (signing secrets, Authorization), memoized: every attempt needs them. */
  openSealed: OpenSealed;
  /** Per-subscription isolation shared by every worker (null when WEBHOOK_ISOLATION=false). */
  isolation: IsolationState | null;
  /** Wakes waiting deliveries and schedules a breaker's probe (the worker owns the queue). */
  onRelease: (release: Release, now: Date) => void;
  /** Shows held-back deliveries as waiting, in batches (flushed when the worker closes). */
  postponements: PostponementWriter;
  /** Loads deliveries with their subscriptions, those asked for while a load runs together in the next statement. */
  loads: Coalescer<string, LoadedDelivery | null>;
  /** Records the common attempts (successes, failures to retry) the same way. */
  recorder: AttemptRecorder;
  /** Puts a subscription whose deliveries are being held back behind everyone else's at enqueue (the fair share). */
  markHeldBack: (subscriptionId: string) => void;
  /** Enqueues the committed deliveries of operational events (without a queue: the outbox relay does). */
  enqueueEvents: (deliveries: DeliveryRef[]) => Promise<void>;
  /** Splunk HEC ack polls, those of one channel that fall due together in one request. */
  ackPolls: AckPolls;
}

/** Reads the extra CA once and builds the HTTP transport with its connection pools. */
export function createDeliveryContext(deps: WorkerDeps, deliveryQueue?: Queue<DeliveryJobData>): DeliveryContext {
  const { webhooks } = deps.config;
  const secureContext = trustedSecureContext(webhooks.extraCaFile);
  const proxy = webhooks.egressProxy && { url: webhooks.egressProxy, connectTimeoutMs: webhooks.connectTimeoutMs };
  const post = createPostWebhook({
    timeoutMs: webhooks.timeoutMs,
    connectTimeoutMs: webhooks.connectTimeoutMs,
    secureContext,
    maxSocketsPerAddress: webhooks.workerConcurrency,
    proxy,
  });
  const entraTokens = createEntraTokens({
    authorityHost: deps.config.azure.authorityHost,
    timeoutMs: webhooks.timeoutMs,
    secureContext,
    proxy,
    allowedHosts: webhooks.allowedHosts,
    lookup: deps.lookup,
    dns: webhooks.dns,
    redis: deps.redis,
    redisPrefix: deps.config.redisPrefix,
    key: deps.config.encryptionKey,
  });
  const { isolation: rules, timeoutMs } = deps.config.webhooks;
  // A slot outlives its attempt's timeout by a margin; a worker that dies mid-attempt frees it then.
  // Its connection pipelines automatically: the admissions and releases of the jobs in flight that fall in one tick
  // go to Redis in one write (no blocking command ever runs on it).
  const isolationRedis = rules ? deps.redis({ enableAutoPipelining: true }) : null;
  const isolation = rules && isolationRedis ? new IsolationState(isolationRedis, deps.config.redisPrefix, rules, timeoutMs + 5_000) : null;
  // A worker's slots count toward the cap's ceiling while it takes deliveries (a context without a queue takes none).
  // Registered again every second; a failure is logged once per streak, and once more when it goes through again.
  if (isolation && deliveryQueue) {
    // Never rejects: its failures are the `failing` event's.
    void isolation.joinWorkers(randomUUID(), webhooks.workerConcurrency, {
      failing: (err) =>
        deps.logger.warn('Could not count this worker among the live workers; retrying every second (the in-flight cap keeps its last ceiling)', {
          error: String(err),
        }),
      recovered: () => deps.logger.info('Counted among the live workers again'),
    });
  }
  // The held-back marks go through the same pipelining connection (a mark is the fair share's, under the queue's prefix).
  const markHeldBack =
    isolationRedis && webhooks.fairSharePerSecond > 0
      ? heldBackMarker(isolationRedis, bullPrefix(deps.config), (err) =>
          deps.logger.warn('Could not mark a subscription as held back', { error: String(err) }),
        )
      : () => undefined;
  const onRelease = (release: Release, now: Date) => {
    if (!deliveryQueue) return;
    const woken = release.prober
      ? scheduleProbe(deliveryQueue, release.prober, release.until ?? now, now)
      : wakeDeliveryJobs(deliveryQueue, release.wake);
    woken.catch((err: unknown) => deps.logger.warn('Could not wake waiting deliveries', { error: String(err) }));
  };
  const postponements = new PostponementWriter(deps);
  const loads = new Coalescer((ids: string[]) => loadDeliveries(deps.prisma, ids));
  const recorder = attemptRecorder(deps.prisma);
  const outbox = deliveryQueue ? outboxDeps(deps, deliveryQueue) : null;
  const enqueueEvents = async (deliveries: DeliveryRef[]) => {
    if (outbox && deliveries.length > 0) await enqueueAfterCommit(outbox, deliveries);
  };
  return {
    ...deps,
    post,
    entraTokens,
    openSealed: memoizedUnseal(deps.config.encryptionKey),
    isolation,
    onRelease,
    postponements,
    loads,
    recorder,
    markHeldBack,
    enqueueEvents,
    ackPolls: new AckPolls(deps.config.webhooks.hecAck.waitMs, recordLateIndexed),
  };
}

/** Closes what the context opened: its connection pools, the token client, the isolation connection. */
export async function closeDeliveryContext(ctx: DeliveryContext): Promise<void> {
  ctx.post.close();
  await Promise.all([ctx.entraTokens.close(), ctx.isolation?.close()]);
}

export type DeliveryResult =
  | { status: 'skipped'; reason: string }
  /** Held back without an attempt (breaker open, in-flight cap, throttle): the job waits until `until`. */
  | { status: 'postponed'; reason: WaitReason; until: Date; subscriptionId: string }
  | { status: 'conflict' }
  /** Accepted by Splunk HEC, its indexer acknowledgement awaited: the job comes back at `until` to poll (not an attempt). */
  | { status: 'awaiting_ack'; until: Date }
  | { status: 'succeeded' | 'failed'; attempt: number; outcome: AttemptOutcome };

export type LoadedDelivery = WebhookDelivery & { subscription: WebhookSubscription };

/** Facts of the attempt in progress. */
interface AttemptInProgress {
  delivery: LoadedDelivery;
  number: number;
  startedAt: Date;
  started: number;
  /** The outcome, once the attempt has one (frees the isolation slot with it). */
  outcome?: AttemptOutcome;
}

const DELIVERY_COLUMNS = [
  'id', 'organization_id', 'subscription_id', 'event_id', 'event_type', 'payload', 'payload_format', 'status', 'attempt_count',
  'next_attempt_at', 'wait_reason', 'enqueued_at', 'completed_at', 'failure_reason', 'redelivery_of', 'recovered_at', 'created_at', 'updated_at',
  'hec_ack_id', 'hec_ack_channel', 'hec_ack_destination', 'hec_ack_deadline',
] as const;
const SUBSCRIPTION_COLUMNS = [
  'id', 'organization_id', 'level', 'project_id', 'assessment_id', 'name', 'url', 'events', 'status', 'severity_filter',
  'status_filter', 'has_severity_filter', 'has_status_filter', 'payload_format', 'splunk_index', 'secret_enc',
  'previous_secret_enc', 'previous_secret_expires_at', 'authorization_enc', 'azure_credentials_enc', 'splunk_channel',
  'consecutive_failures', 'first_failure_at', 'disabled_reason', 'rate_limit', 'breaker_state', 'breaker_until', 'deleted_at',
  'created_at', 'updated_at', 'url_enc', 'credential_destination', 'signature_scheme', 'hec_ack',
] as const;
const ENUM_COLUMNS = new Set(['status', 'level']);
const column = (table: string, name: string, alias: string) =>
  ENUM_COLUMNS.has(name) ? `${table}.${name}::text AS ${alias}` : `${table}.${name} AS ${alias}`;
// Fixed text (no input): the select list of the one statement that loads a delivery with its subscription.
const LOAD_SQL =
  `SELECT ${DELIVERY_COLUMNS.map((c) => column('d', c, `d_${c}`)).join(', ')}, ` +
  `${SUBSCRIPTION_COLUMNS.map((c) => column('s', c, `s_${c}`)).join(', ')} ` +
  'FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE d.id = ANY(';
const camel = (snake: string) => snake.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
/** [model field, result column] of each selected column, worked out once. */
const fieldsOf = (prefix: string, columns: readonly string[]) => columns.map((c) => [camel(c), `${prefix}${c}`] as const);
const DELIVERY_FIELDS = fieldsOf('d_', DELIVERY_COLUMNS);
const SUBSCRIPTION_FIELDS = fieldsOf('s_', SUBSCRIPTION_COLUMNS);

function pick(row: Record<string, unknown>, fields: ReadonlyArray<readonly [string, string]>): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const [field, column] of fields) picked[field] = row[column];
  return picked;
}

/**
 * Deliveries with their subscriptions in one raw statement (a Prisma findUnique with include costs two statements
 * and the query compiler's time on every attempt), shaped as Prisma's models; straight on the pg pool when the
 * client has one (queryRows), which skips Prisma's per-query cost altogether. Answers in the order asked, null for
 * a delivery that does not exist.
 */
export async function loadDeliveries(prisma: WorkerDeps['prisma'], ids: string[]): Promise<Array<LoadedDelivery | null>> {
  const rows = await queryRows<Record<string, unknown>>(prisma, Prisma.sql`${Prisma.raw(LOAD_SQL)}${ids}::text[])`, 'worker_load_deliveries');
  const loaded = new Map<string, LoadedDelivery>();
  for (const row of rows) {
    const delivery = pick(row, DELIVERY_FIELDS) as unknown as WebhookDelivery;
    // int8 arrives as a string from pg and as a bigint from Prisma: the model's type either way.
    if (delivery.hecAckId !== null) delivery.hecAckId = BigInt(delivery.hecAckId);
    loaded.set(delivery.id, { ...delivery, subscription: pick(row, SUBSCRIPTION_FIELDS) as unknown as WebhookSubscription });
  }
  return ids.map((id) => loaded.get(id) ?? null);
}

export async function processDelivery(ctx: DeliveryContext, deliveryId: string): Promise<DeliveryResult> {
  const delivery = await ctx.loads.run(deliveryId);
  if (!delivery) return skipDelivery(ctx, deliveryId, null, 'delivery not found');
  const skip = reasonToSkip(delivery, ctx.config.webhooks.maxAttempts);
  if (skip !== null) return skipDelivery(ctx, deliveryId, delivery, skip);
  // An attempt accepted by Splunk HEC waits for its indexer acknowledgement: this run is a poll, not an attempt.
  if (delivery.hecAckId !== null) return pollHecAck(ctx, delivery);
  const held = await admit(ctx, delivery);
  if (held) return held;
  const run: AttemptInProgress = {
    delivery,
    number: delivery.attemptCount + 1,
    startedAt: ctx.clock.now(),
    started: performance.now(),
  };
  try {
    return await attempt(ctx, run);
  } catch (err) {
    if (err instanceof AttemptConflictError) {
      ctx.logger.warn('Attempt already recorded by another worker', { delivery_id: deliveryId, attempt: run.number });
      return { status: 'conflict' };
    }
    throw err;
  } finally {
    await releaseSlot(ctx, delivery, run.outcome, performance.now() - run.started);
  }
}

/**
 * Takes an isolation slot for the attempt, or holds the delivery back without one: postponed (not an attempt), or,
 * behind an open breaker only, failed for good once held back past its retry window. Null: go ahead.
 */
async function admit(ctx: DeliveryContext, delivery: LoadedDelivery): Promise<DeliveryResult | null> {
  if (!ctx.isolation) return null;
  const now = ctx.clock.now();
  const { subscription } = delivery;
  const slot = await takeSlot(ctx, subscription, delivery.id, delivery.createdAt, now);
  if (slot.transition) await ctx.enqueueEvents(await recordBreakerTransition(ctx, subscription, slot.transition, null, now));
  if (slot.admitted) return null;
  const { reason, decision } = slot;
  if (decision.action === 'fail') {
    const health = decision.countsForHealth ? ctx.config.webhooks.health : null;
    const published: DeliveryRef[] = [];
    const change = await failHeldBackDelivery(ctx.prisma, delivery, decision.detail, health, now, published);
    await ctx.enqueueEvents(published);
    ctx.logger.info('Delivery held back past its retry window: failed', { delivery_id: delivery.id, reason });
    if (change) await notifyHealthChange(ctx, change, { responseStatus: null, outcome: 'held_back', error: decision.detail });
    return { status: 'skipped', reason: decision.detail };
  }
  ctx.postponements.record(delivery, reason, decision.until, now);
  ctx.markHeldBack(subscription.id);
  return { status: 'postponed', reason, until: decision.until, subscriptionId: subscription.id };
}

async function releaseSlot(ctx: DeliveryContext, delivery: LoadedDelivery, outcome: AttemptOutcome | undefined, durationMs: number): Promise<void> {
  if (!ctx.isolation) return;
  await freeSlot(ctx, delivery.subscriptionId, delivery.id, outcome, durationMs, async (release, now) => {
    const published = await recordBreakerTransition(ctx, delivery.subscription, release.transition!, release.until, now, outcome === 'success' ? null : outcome);
    await ctx.enqueueEvents(published);
  });
}

/** The isolation's answer to one attempt on `ref` (a subscription, an issue tracker): go ahead, or the hold's decision. */
export type SlotAnswer =
  | { admitted: true; transition: BreakerState | null }
  | { admitted: false; transition: BreakerState | null; reason: WaitReason; decision: PostponeDecision };

/**
 * Takes an isolation slot on `ref` for attempt `token` (ctx.isolation must be on), or says how it is held back:
 * postponed until a jittered wake-up, or, behind an open breaker only, failed once held since `heldSince` past the
 * retry window. `slotMs`: how long the slot may be held, when an attempt is longer than one request (the default).
 */
export async function takeSlot(ctx: DeliveryContext, ref: SubscriptionRef, token: string, heldSince: Date, now: Date, slotMs?: number): Promise<SlotAnswer> {
  const admission = await ctx.isolation!.admit(ref, token, now, slotMs);
  if (admission.admitted) return admission;
  const { reason } = admission;
  const waitMs = Math.max(0, admission.until.getTime() - now.getTime());
  const wakeAt = new Date(admission.until.getTime() + (reason === 'rate_limit' ? 0 : wakeJitterMs(waitMs)));
  const hold = { reason, until: wakeAt, endpointFailures: admission.endpointFailures };
  return { admitted: false, transition: admission.transition, reason, decision: postponeOrFail(hold, heldSince, now, webhookRetryPolicy(ctx.config)) };
}

/**
 * Frees the slot `token` holds on `key` with its attempt's outcome (none: no request was made), then wakes what it
 * held back. `onTransition` runs first when the release moved the breaker.
 */
export async function freeSlot(
  ctx: DeliveryContext,
  key: string,
  token: string,
  outcome: AttemptOutcome | undefined,
  durationMs: number,
  onTransition: (release: Release, now: Date) => Promise<void>,
): Promise<void> {
  if (outcome === undefined) {
    await ctx.isolation!.abandon(key, token);
    return;
  }
  const now = ctx.clock.now();
  const release = await ctx.isolation!.release(key, token, outcome, durationMs, now);
  if (release.transition) await onTransition(release, now);
  ctx.onRelease(release, now);
}

async function attempt(ctx: DeliveryContext, run: AttemptInProgress): Promise<DeliveryResult> {
  const { subscription } = run.delivery;
  const rendered = render(ctx, run.delivery);
  if (rendered instanceof Error) {
    return finishWithoutRequest(ctx, run, 'render_error', rendered.message, { kind: 'none' });
  }
  const limit = ctx.config.webhooks.maxPayloadBytes;
  if (rendered.body.length > limit) {
    const message = `rendered body is ${rendered.body.length} bytes, over the ${limit}-byte limit`;
    return finishWithoutRequest(ctx, run, 'payload_too_large', message, { kind: 'none' });
  }
  if (run.delivery.payloadFormat === 'email') {
    // An e-mail notification target: the mail transport instead of HTTP; recorded and retried the same way.
    const mailed = await sendNotificationMail(ctx, subscription.id, rendered);
    return conclude(ctx, run, mailed, mailed.error ? 'network_error' : 'success');
  }
  const url = chatUrlOf(subscription, ctx.openSealed);
  const check = await resolveWebhookTarget(url, { allowedHosts: ctx.config.webhooks.allowedHosts, lookup: ctx.lookup, dns: ctx.config.webhooks.dns });
  if (!check.ok && check.reason === 'unresolvable') {
    return conclude(ctx, run, noResponse(run, new Error('the host does not resolve')), 'network_error');
  }
  if (!check.ok) {
    const message = describeTargetRejection(check.reason);
    return finishWithoutRequest(ctx, run, 'unsafe_url', message, { kind: 'unsafe_url', reason: message });
  }
  const elsewhere = credentialsBoundElsewhere(subscription, url);
  if (elsewhere) return finishWithoutRequest(ctx, run, 'unsafe_url', elsewhere, { kind: 'unsafe_url', reason: elsewhere });
  const sent = await send(ctx, run, rendered, check.target);
  if ('tokenError' in sent) return conclude(ctx, run, noResponse(run, new Error(sent.tokenError)), 'token_error');
  const outcome = outcomeOfHttp(sent.result);
  if (outcome === 'success' && awaitsHecAck(run.delivery)) return awaitHecAck(ctx, run, sent.result);
  return conclude(ctx, run, sent.result, outcome);
}

/**
 * Splunk accepted the events of a hec_ack subscription: the attempt is recorded `ack_pending` with the ackId kept on
 * the delivery, and the job comes back to poll (hec-ack.ts). An answer without an ackId is a failed attempt.
 */
async function awaitHecAck(ctx: DeliveryContext, run: AttemptInProgress, result: HttpResult): Promise<DeliveryResult> {
  const ackId = hecAckIdOf(result.body);
  if (ackId === null) return conclude(ctx, run, result, 'ack_missing');
  run.outcome = 'success'; // for the isolation: the receiver answered, and fast
  const record = attemptRecord(run, result, 'ack_pending');
  logAttempt(ctx, run, record);
  const now = ctx.clock.now();
  // The channel and host the POST went on: its ackId means something there only (the subscription may change).
  const { subscription } = run.delivery;
  const sentOn = { channel: subscription.splunkChannel, destination: credentialDestination(subscription.url) };
  const ack = { ackId, ...sentOn, ...hecAckSchedule(now, ctx.config.webhooks.hecAck) };
  await recordAwaitingAck(ctx.prisma, { deliveryId: run.delivery.id, subscriptionId: run.delivery.subscriptionId, attempt: record, now }, ack);
  return { status: 'awaiting_ack', until: ack.firstPollAt };
}

/** Why the subscription's stored credentials must not go to `url` (bound to another destination), or null. */
export function credentialsBoundElsewhere(subscription: WebhookSubscription, url: string): string | null {
  if (subscription.authorizationEnc === null && subscription.azureCredentialsEnc === null) return null;
  if (!credentialBoundElsewhere(subscription.credentialDestination, url)) return null;
  return `the stored credentials were given for ${subscription.credentialDestination}, not ${credentialDestination(url) ?? 'this URL'}: give them again with the URL`;
}

/** Why this delivery gets no attempt, or null when it should get one. */
function reasonToSkip(delivery: LoadedDelivery, maxAttempts: number): string | null {
  if (delivery.status !== 'pending') return `delivery already ${delivery.status}`;
  const { subscription } = delivery;
  if (subscription.deletedAt) return 'subscription deleted';
  if (subscription.status === 'disabled') {
    return `subscription disabled${subscription.disabledReason ? ` (${subscription.disabledReason})` : ''}`;
  }
  if (delivery.attemptCount >= maxAttempts && delivery.hecAckId === null) return `all ${maxAttempts} attempts made`;
  return null;
}

async function skipDelivery(
  ctx: DeliveryContext,
  deliveryId: string,
  delivery: LoadedDelivery | null,
  reason: string,
): Promise<DeliveryResult> {
  const failed = delivery?.status === 'pending' && (await failPendingDelivery(ctx.prisma, deliveryId, reason, ctx.clock.now()));
  ctx.logger.info('Delivery not attempted', { delivery_id: deliveryId, reason, marked_failed: failed });
  return { status: 'skipped', reason };
}

function render(ctx: DeliveryContext, delivery: LoadedDelivery): RenderedPayload | Error {
  const { payloadFormat } = delivery; // fixed when the delivery was created (docs/webhooks.md)
  const { splunkIndex } = delivery.subscription;
  try {
    if (isNotificationKind(payloadFormat)) {
      // A notification target (Slack, Teams, e-mail): a message for people, linking back to the dashboard.
      return renderNotification(payloadFormat, delivery.payload as unknown as Envelope, { dashboardUrl: ctx.config.publicBaseUrl });
    }
    if (!isPayloadFormat(payloadFormat)) throw new TypeError(`unknown payload format ${payloadFormat}`);
    return renderPayload(payloadFormat, delivery.payload as unknown as Envelope, { splunkIndex });
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  }
}

async function send(ctx: DeliveryContext, run: AttemptInProgress, rendered: RenderedPayload, target: ResolvedTarget): Promise<AuthorizedResult> {
  const timestamp = signatureTimestamp(run.startedAt);
  const signatures = attemptSignatures(run.delivery.id, rendered.body, timestamp, run.delivery.subscription, run.startedAt, ctx.openSealed);
  const headers = deliveryHeaders(run.delivery, run.delivery.subscription, { rendered, timestamp, ...signatures }, ctx.openSealed);
  const post = (extra: Record<string, string>) =>
    ctx.post({ url: target.url, address: target.address, family: target.family, headers: { ...headers, ...extra }, body: rendered.body });
  return sendAuthorized(ctx.entraTokens, run.delivery.subscription, post);
}

function noResponse(run: AttemptInProgress, error: Error): HttpResult {
  return { response: null, body: Buffer.alloc(0), error, durationMs: Math.round(performance.now() - run.started) };
}

function attemptRecord(run: AttemptInProgress, result: HttpResult, outcome: AttemptOutcome): AttemptRecord {
  const { response } = result;
  return {
    number: run.number,
    startedAt: run.startedAt,
    durationMs: result.durationMs,
    outcome,
    responseStatus: response?.status ?? null,
    responseHeaders: response ? recordedHeaders(response.headers) : null,
    responseBody: response ? result.body.toString('utf8') : null,
    error: describeError(result, outcome) ?? hecErrorOf(run.delivery.subscription.payloadFormat, result),
    retryAfterMs: null,
  };
}

function describeError(result: HttpResult, outcome: AttemptOutcome): string | null {
  if (result.error) {
    const code = (result.error as { code?: string }).code;
    return code && !result.error.message.includes(code) ? `${code}: ${result.error.message}` : result.error.message;
  }
  if (outcome === 'redirect') return 'redirects are not followed';
  if (outcome === 'ack_missing') return ACK_MISSING_ERROR;
  return null;
}

function describeFailure(record: AttemptRecord): string {
  if (record.responseStatus !== null) return `HTTP ${record.responseStatus}`;
  return `${record.outcome}${record.error ? `: ${record.error}` : ''}`;
}

/** Records an HTTP attempt's result and decides: succeeded, retry later (throws), or failed for good. */
async function conclude(ctx: DeliveryContext, run: AttemptInProgress, result: HttpResult, outcome: AttemptOutcome): Promise<DeliveryResult> {
  run.outcome = outcome;
  const record = attemptRecord(run, result, outcome);
  const now = ctx.clock.now();
  const write = { deliveryId: run.delivery.id, subscriptionId: run.delivery.subscriptionId, attempt: record, now };
  logAttempt(ctx, run, record);
  if (outcome === 'success') {
    const subscriptionFailing = run.delivery.subscription.status === 'failing';
    await recordAndNotify(ctx, { ...write, delivery: { status: 'succeeded' }, subscription: { kind: 'success' }, subscriptionFailing });
    return { status: 'succeeded', attempt: run.number, outcome };
  }
  const decision = nextAttempt(run.number, receiverSignals(record, now), webhookRetryPolicy(ctx.config));
  if (decision.action === 'stop') {
    const reason = `${decision.detail}; last: ${describeFailure(record)}`;
    const effect: SubscriptionEffect =
      decision.reason === 'gone' ? { kind: 'gone' } : { kind: 'terminal_failure', rules: ctx.config.webhooks.health };
    await recordAndNotify(ctx, { ...write, delivery: { status: 'failed', reason }, subscription: effect });
    return { status: 'failed', attempt: run.number, outcome };
  }
  const { delayMs } = decision;
  const update: DeliveryUpdate = { status: 'pending', nextAttemptAt: new Date(now.getTime() + delayMs) };
  await recordAndNotify(ctx, { ...write, attempt: { ...record, retryAfterMs: decision.retryAfterMs }, delivery: update, subscription: { kind: 'none' } });
  throw new RetryableDeliveryError(`Attempt ${run.number} failed (${describeFailure(record)}); retrying in ${delayMs} ms`, delayMs);
}

function receiverSignals(record: AttemptRecord, now: Date) {
  return { status: record.responseStatus, retryAfter: record.responseHeaders?.['retry-after'] ?? null, now };
}

/** An attempt that ends the delivery before any request: payload too large, unsafe URL, unrenderable. */
async function finishWithoutRequest(
  ctx: DeliveryContext,
  run: AttemptInProgress,
  outcome: AttemptOutcome,
  message: string,
  effect: SubscriptionEffect,
): Promise<DeliveryResult> {
  run.outcome = outcome;
  const record = attemptRecord(run, noResponse(run, new Error(message)), outcome);
  logAttempt(ctx, run, record);
  await recordAndNotify(ctx, {
    deliveryId: run.delivery.id,
    subscriptionId: run.delivery.subscriptionId,
    attempt: record,
    delivery: { status: 'failed', reason: `${outcome.replace(/_/g, ' ')}: ${message}` },
    subscription: effect,
    now: ctx.clock.now(),
  });
  return { status: 'failed', attempt: run.number, outcome };
}

async function recordAndNotify(ctx: DeliveryContext, write: AttemptWrite): Promise<void> {
  const published: DeliveryRef[] = [];
  const change = await recordAttempt(ctx.prisma, write, ctx.recorder, published);
  await ctx.enqueueEvents(published);
  if (change) await notifyHealthChange(ctx, change, write.attempt);
}

function logAttempt(ctx: DeliveryContext, run: AttemptInProgress, record: AttemptRecord): void {
  observeAttempt(run.delivery.createdAt, record);
  // Successes at debug (one line per delivery is the busiest log there is; the attempt log and the metrics keep
  // them), everything else at info.
  const level = record.outcome === 'success' ? 'debug' : 'info';
  if (!ctx.logger.isLevelEnabled(level)) return;
  ctx.logger.log(level, 'Webhook attempt', {
    delivery_id: run.delivery.id,
    subscription_id: run.delivery.subscriptionId,
    attempt: record.number,
    outcome: record.outcome,
    response_status: record.responseStatus,
    duration_ms: record.durationMs,
    // An e-mail target's error is its mail server's, which may quote the recipients' addresses.
    ...(record.error && { error: run.delivery.payloadFormat === 'email' ? mailErrorForLog(record.error) : record.error }),
  });
}
