// Writing down what an attempt did, in ONE transaction: the attempt row, the delivery's new state and the
// subscription's health move together or not at all. The delivery row is claimed by its attempt count, so two
// workers that somehow ran the same attempt cannot both record it (the unique (delivery, number) index agrees).
import { SYSTEM_ACTOR, recordAudit } from '@svc/audit';
import { answeringOneByOneOnFailure, Coalescer, Prisma, isUniqueViolation, newId, queryRows, type Db, type Tx } from '@svc/db';
import type { DeliveryRef } from '@svc/outbox';
import type { AttemptOutcome } from './http/outcome';
import { lastErrorOf, publishDeliveryExhausted, publishOperationalEvent } from './operational-events';
import {
  healthAfterSuccess,
  healthAfterTerminalFailure,
  type HealthRules,
  healthAfterUnsafeUrl,
  healthAfterGone,
  type SubscriptionHealth,
} from '@svc/domain';

export interface AttemptRecord {
  number: number;
  startedAt: Date;
  durationMs: number;
  outcome: AttemptOutcome;
  responseStatus: number | null;
  responseHeaders: Record<string, string> | null;
  responseBody: string | null;
  error: string | null;
  /** The wait the receiver's Retry-After asked for, when the policy honoured it. */
  retryAfterMs: number | null;
}

export type DeliveryUpdate =
  | { status: 'succeeded' }
  | { status: 'pending'; nextAttemptAt: Date }
  | { status: 'failed'; reason: string };

/** What the attempt means for the subscription: nothing (payload too large), a success, a terminal failure, an unsafe URL, or 410 Gone. */
export type SubscriptionEffect =
  | { kind: 'none' }
  | { kind: 'gone' }
  | { kind: 'success' }
  | { kind: 'terminal_failure'; rules: HealthRules }
  | { kind: 'unsafe_url'; reason: string };

export interface AttemptWrite {
  deliveryId: string;
  subscriptionId: string;
  attempt: AttemptRecord;
  delivery: DeliveryUpdate;
  subscription: SubscriptionEffect;
  now: Date;
  /** The subscription was failing when the delivery was loaded: a success is recorded with its recovery, atomically. */
  subscriptionFailing?: boolean;
}

/** Another worker recorded this attempt number first; this run's result is dropped. */
export class AttemptConflictError extends Error {
  override readonly name = 'AttemptConflictError';
}

/** PostgreSQL text and jsonb refuse NUL characters; a receiver's bytes may contain them. */
export function storableText(text: string | null): string | null {
  return text === null ? null : text.replace(/\u0000/g, '\uFFFD');
}

function deliveryColumns(update: DeliveryUpdate, attemptCount: number, now: Date) {
  switch (update.status) {
    case 'succeeded':
      return { attemptCount, status: 'succeeded' as const, nextAttemptAt: null, waitReason: null, completedAt: now, failureReason: null };
    case 'pending':
      return { attemptCount, status: 'pending' as const, nextAttemptAt: update.nextAttemptAt, waitReason: 'backoff' };
    case 'failed':
      return { attemptCount, status: 'failed' as const, nextAttemptAt: null, waitReason: null, completedAt: now, failureReason: update.reason };
  }
}

function nextHealth(current: SubscriptionHealth, effect: SubscriptionEffect, now: Date): SubscriptionHealth {
  switch (effect.kind) {
    case 'none':
      return current;
    case 'success':
      return healthAfterSuccess(current);
    case 'terminal_failure':
      return healthAfterTerminalFailure(current, now, effect.rules);
    case 'unsafe_url':
      return healthAfterUnsafeUrl(current, effect.reason);
    case 'gone':
      return healthAfterGone(current);
  }
}

/** A subscription that turned failing or disabled with this attempt (to notify its organization after commit). */
export interface HealthChange {
  subscriptionId: string;
  status: 'failing' | 'disabled';
  reason: string | null;
}

/**
 * Applies an attempt's effect on the subscription's health under its row lock; a change of status publishes its
 * operational event (failing, disabled, recovered) in the same transaction, its deliveries added to `published`.
 */
async function applySubscriptionEffect(
  tx: Tx,
  subscriptionId: string,
  effect: SubscriptionEffect,
  now: Date,
  lastError: string | null = null,
  published: DeliveryRef[] = [],
): Promise<HealthChange | null> {
  if (effect.kind === 'none') return null;
  // Deliveries of one subscription finish concurrently: read-modify-write under the row lock.
  await tx.$queryRaw`SELECT id FROM webhook_subscriptions WHERE id = ${subscriptionId} FOR UPDATE`;
  const current = await tx.webhookSubscription.findUnique({
    where: { id: subscriptionId },
    select: { status: true, consecutiveFailures: true, firstFailureAt: true, disabledReason: true },
  });
  if (!current) return null;
  const next = nextHealth(current, effect, now);
  const unchanged = (Object.keys(next) as Array<keyof SubscriptionHealth>).every((k) => next[k] === current[k]);
  if (!unchanged) await tx.webhookSubscription.update({ where: { id: subscriptionId }, data: next });
  if (next.status !== current.status) await publishHealthChange(tx, subscriptionId, current, next, lastError, published, now);
  if (next.status !== current.status && (next.status === 'failing' || next.status === 'disabled')) {
    await auditHealthChange(tx, subscriptionId, next, now);
    return { subscriptionId, status: next.status, reason: next.disabledReason };
  }
  return null;
}

async function publishHealthChange(
  tx: Tx,
  subscriptionId: string,
  current: SubscriptionHealth,
  next: SubscriptionHealth,
  lastError: string | null,
  published: DeliveryRef[],
  now: Date,
): Promise<void> {
  const publish = (type: Parameters<typeof publishOperationalEvent>[1], error: string | null, extra: Record<string, unknown>) =>
    publishOperationalEvent(tx, type, subscriptionId, error, extra, published, now);
  if (next.status === 'failing') {
    await publish('webhook.subscription_failing', lastError, {
      consecutive_failures: next.consecutiveFailures,
      first_failure_at: next.firstFailureAt?.toISOString() ?? null,
    });
  } else if (next.status === 'disabled') {
    await publish('webhook.subscription_disabled', lastError, {
      disabled_reason: next.disabledReason,
      consecutive_failures: next.consecutiveFailures,
    });
  } else if (next.status === 'active' && current.status === 'failing') {
    await publish('webhook.subscription_recovered', null, {});
  }
}

/** A subscription turning failing or disabled is recorded once, by `system`, in the transaction that turned it. */
async function auditHealthChange(tx: Tx, subscriptionId: string, next: SubscriptionHealth, now: Date): Promise<void> {
  const subscription = await tx.webhookSubscription.findUniqueOrThrow({
    where: { id: subscriptionId },
    select: { organizationId: true, level: true, projectId: true, assessmentId: true },
  });
  await recordAudit(tx, {
    organizationId: subscription.organizationId,
    actor: SYSTEM_ACTOR,
    action: next.status === 'failing' ? 'webhook.subscription_failing' : 'webhook.subscription_disabled',
    target: { type: 'webhook_subscription', id: subscriptionId },
    metadata: {
      level: subscription.level,
      project_id: subscription.projectId,
      assessment_id: subscription.assessmentId,
      consecutive_failures: next.consecutiveFailures,
      disabled_reason: next.disabledReason,
    },
    at: now,
  });
}

/**
 * Records an attempt. A success or a failure to retry (neither can turn a subscription failing or disabled) goes
 * through `recorder` when given, batched with the records of the worker's other slots (attemptRecorder); the rest in a
 * transaction of its own (with the operational events they cause), as does a success to a failing subscription.
 */
export async function recordAttempt(
  prisma: Db,
  write: AttemptWrite,
  recorder?: AttemptRecorder,
  published: DeliveryRef[] = [],
): Promise<HealthChange | null> {
  const { attempt } = write;
  try {
    if (write.subscription.kind === 'none' || (write.subscription.kind === 'success' && !write.subscriptionFailing)) {
      const answer = await (recorder ? recorder.run(write) : recordCommonAttempt(prisma, write));
      if (answer instanceof Error) throw answer;
      if (answer === RECOVERING) await recoverSubscription(prisma, write, published);
      return null;
    }
    return await prisma.$transaction(async (tx) => {
      const claimed = await tx.webhookDelivery.updateMany({
        where: { id: write.deliveryId, status: 'pending', attemptCount: attempt.number - 1 },
        data: deliveryColumns(write.delivery, attempt.number, write.now),
      });
      if (claimed.count !== 1) throw new AttemptConflictError(`Attempt ${attempt.number} of ${write.deliveryId} was already recorded`);
      await insertAttempt(tx, write);
      const lastError = lastErrorOf(attempt);
      if (write.delivery.status === 'failed') {
        const exhausted = { id: write.deliveryId, subscriptionId: write.subscriptionId, attempts: attempt.number };
        await publishDeliveryExhausted(tx, exhausted, lastError, published, write.now);
      }
      return applySubscriptionEffect(tx, write.subscriptionId, write.subscription, write.now, lastError, published);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new AttemptConflictError(`Attempt ${attempt.number} of ${write.deliveryId} was already recorded`);
    throw err;
  }
}

/**
 * A success to a subscription that turned failing after its delivery was loaded (the worker records a success to a
 * subscription it saw failing in one transaction with its recovery): recorded by the common statement, which leaves a
 * failing subscription's health alone, then the subscription turned active again in a transaction of its own that
 * publishes webhook.subscription_recovered. A crash in between leaves it failing until its next success.
 */
async function recoverSubscription(prisma: Db, write: AttemptWrite, published: DeliveryRef[]): Promise<void> {
  await prisma.$transaction((tx) => applySubscriptionEffect(tx, write.subscriptionId, { kind: 'success' }, write.now, null, published));
}

/** The answer of a common success whose subscription was failing: recorded, and it is to be recovered. */
export const RECOVERING = 'recovering' as const;
type CommonAnswer = Error | null | typeof RECOVERING;

const conflictOf = (write: AttemptWrite) => new AttemptConflictError(`Attempt ${write.attempt.number} of ${write.deliveryId} was already recorded`);

/** Records successes and failures to retry, many per statement when many finish together; per item: null (or RECOVERING) or why not. */
export type AttemptRecorder = Coalescer<AttemptWrite, CommonAnswer>;

/** Per write: null when recorded, else why not (a conflict for a delivery another writer claimed first). */
async function answersOf(prisma: Db, writes: AttemptWrite[]): Promise<CommonAnswer[]> {
  const claimed = await recordInOneStatement(prisma, writes);
  return writes.map((write) => {
    const recovering = claimed.get(write.deliveryId);
    if (recovering === undefined) return conflictOf(write);
    return recovering ? RECOVERING : null;
  });
}

/** One common attempt on its own statement, answered as the recorder answers it. */
function recordCommonAttempt(prisma: Db, write: AttemptWrite): Promise<CommonAnswer> {
  return answersOf(prisma, [write]).then(
    ([answer]) => answer,
    (err: unknown): CommonAnswer => (isUniqueViolation(err) ? conflictOf(write) : (err as Error)),
  );
}

export function attemptRecorder(prisma: Db): AttemptRecorder {
  // One bad item (a duplicate attempt, say) fails the whole statement: then each goes again alone, with its own answer
  // (recordCommonAttempt's: alone, a unique violation is the conflict it is).
  return new Coalescer(
    answeringOneByOneOnFailure((writes: AttemptWrite[]) =>
      writes.length === 1 ? recordCommonAttempt(prisma, writes[0]).then((answer) => [answer]) : answersOf(prisma, writes),
    ),
  );
}

/**
 * The common attempts (a success, or a failure to retry) recorded by ONE statement, one or many at a time: claim each
 * delivery by its attempt count, insert the attempts and, after a success, reset the subscription's health (the
 * same rules as healthAfterSuccess), without the per-query cost of an interactive transaction (a delivery's hot
 * path spent most of its CPU there). The values arrive as arrays: one text for any count, so one prepared
 * statement. A failing subscription's health is left to recoverSubscription (its recovery is an event). Answers the
 * deliveries it claimed, each with whether it was a success to a failing subscription.
 */
async function recordInOneStatement(prisma: Db, writes: AttemptWrite[]): Promise<Map<string, boolean>> {
  const column = <T>(of: (write: AttemptWrite) => T) => writes.map(of);
  const iso = (at: Date | null) => (at === null ? null : at.toISOString());
  const statement = Prisma.sql`
    WITH v AS (
      SELECT * FROM unnest(
        ${column((w) => w.deliveryId)}::text[], ${column((w) => w.attempt.number)}::int[], ${column((w) => w.delivery.status)}::text[],
        ${column((w) => iso(w.delivery.status === 'pending' ? w.delivery.nextAttemptAt : null))}::timestamptz[],
        ${column((w) => iso(w.delivery.status === 'pending' ? null : w.now))}::timestamptz[],
        ${column((w) => (w.delivery.status === 'failed' ? w.delivery.reason : null))}::text[], ${column((w) => w.now.toISOString())}::timestamptz[],
        ${column((w) => newId('whatt', w.now.getTime()))}::text[], ${column((w) => w.attempt.startedAt.toISOString())}::timestamptz[],
        ${column((w) => w.attempt.durationMs)}::int[], ${column((w) => w.attempt.outcome)}::text[], ${column((w) => w.attempt.responseStatus)}::int[],
        ${column((w) => (w.attempt.responseHeaders === null ? null : JSON.stringify(w.attempt.responseHeaders)))}::text[],
        ${column((w) => storableText(w.attempt.responseBody))}::text[], ${column((w) => storableText(w.attempt.error))}::text[],
        ${column((w) => w.attempt.retryAfterMs)}::int[], ${column((w) => w.subscriptionId)}::text[],
        ${column((w) => w.subscription.kind === 'success')}::boolean[])
        AS v(id, number, status, next_attempt_at, completed_at, failure_reason, now, attempt_id, started_at, duration_ms,
             outcome, response_status, response_headers, response_body, error, retry_after_ms, subscription_id, resets_health)
    ), claimed AS (
      UPDATE webhook_deliveries d
         SET attempt_count = v.number,
             status = v.status::"DeliveryStatus",
             next_attempt_at = v.next_attempt_at AT TIME ZONE 'UTC',
             wait_reason = CASE WHEN v.status = 'pending' THEN 'backoff' ELSE NULL END,
             completed_at = CASE WHEN v.status = 'pending' THEN d.completed_at ELSE v.completed_at AT TIME ZONE 'UTC' END,
             failure_reason = CASE WHEN v.status = 'pending' THEN d.failure_reason ELSE v.failure_reason END,
             updated_at = v.now AT TIME ZONE 'UTC'
        FROM v
       WHERE d.id = v.id AND d.status = 'pending' AND d.attempt_count = v.number - 1
      RETURNING d.id
    ), inserted AS (
      INSERT INTO webhook_attempts
        (id, delivery_id, number, started_at, duration_ms, outcome, response_status, response_headers, response_body, error, retry_after_ms)
      SELECT v.attempt_id, v.id, v.number, v.started_at AT TIME ZONE 'UTC', v.duration_ms, v.outcome, v.response_status,
             v.response_headers::jsonb, v.response_body, v.error, v.retry_after_ms
        FROM v JOIN claimed c ON c.id = v.id
    ), health AS (
      UPDATE webhook_subscriptions s
         SET consecutive_failures = 0,
             first_failure_at = NULL,
             updated_at = (SELECT max(now) FROM v) AT TIME ZONE 'UTC'
       WHERE s.id IN (SELECT v.subscription_id FROM v JOIN claimed c ON c.id = v.id WHERE v.resets_health)
         AND s.status <> 'failing'
         AND (s.consecutive_failures <> 0 OR s.first_failure_at IS NOT NULL)
    )
    SELECT c.id, (v.resets_health AND s.status = 'failing') AS recovering
      FROM claimed c JOIN v ON v.id = c.id LEFT JOIN webhook_subscriptions s ON s.id = v.subscription_id`;
  const rows = await queryRows<{ id: string; recovering: boolean | null }>(prisma, statement, 'worker_record_attempts');
  return new Map(rows.map((row) => [row.id, row.recovering === true]));
}

/**
 * Ends a delivery an open breaker held back past its retry window: a terminal failure without a further attempt. With
 * `rules` it counts for the subscription's health like any terminal failure (a dead endpoint still reaches failing
 * and disabled on schedule); null when it must not (the endpoint's last attempts did not fail).
 */
export async function failHeldBackDelivery(
  prisma: Db,
  delivery: { id: string; subscriptionId: string; attemptCount: number },
  reason: string,
  rules: HealthRules | null,
  now: Date,
  published: DeliveryRef[] = [],
): Promise<HealthChange | null> {
  return prisma.$transaction(async (tx) => {
    const { count } = await tx.webhookDelivery.updateMany({
      where: { id: delivery.id, status: 'pending', attemptCount: delivery.attemptCount },
      data: { status: 'failed', nextAttemptAt: null, waitReason: null, completedAt: now, failureReason: reason },
    });
    if (count !== 1) return null;
    const exhausted = { id: delivery.id, subscriptionId: delivery.subscriptionId, attempts: delivery.attemptCount };
    await publishDeliveryExhausted(tx, exhausted, reason, published, now);
    if (!rules) return null;
    return applySubscriptionEffect(tx, delivery.subscriptionId, { kind: 'terminal_failure', rules }, now, reason, published);
  });
}

/** Ends a still-pending delivery without an attempt (its subscription is gone or disabled, or its attempts are used up). */
export async function failPendingDelivery(prisma: Db, deliveryId: string, reason: string, now: Date): Promise<boolean> {
  const { count } = await prisma.webhookDelivery.updateMany({
    where: { id: deliveryId, status: 'pending' },
    // An awaited Splunk ack (hec_ack) ends with the delivery.
    data: { status: 'failed', nextAttemptAt: null, waitReason: null, completedAt: now, failureReason: reason, hecAckId: null, hecAckChannel: null, hecAckDestination: null, hecAckDeadline: null },
  });
  return count === 1;
}

/** The attempt's row in the attempt log (its texts cut to what is stored). */
async function insertAttempt(tx: Tx, write: Pick<AttemptWrite, 'deliveryId' | 'attempt' | 'now'>): Promise<void> {
  const { attempt } = write;
  await tx.webhookAttempt.create({
    data: {
      id: newId('whatt', write.now.getTime()),
      deliveryId: write.deliveryId,
      ...attempt,
      responseHeaders: attempt.responseHeaders ?? undefined,
      responseBody: storableText(attempt.responseBody),
      error: storableText(attempt.error),
    },
  });
}

// ---- Splunk HEC indexer acknowledgement (hec-ack.ts): an accepted event POST is attempt N, recorded as `ack_pending`
// with the delivery still pending and its ackId saved; a later poll turns attempt N into a success or an `ack_timeout`.

/** Attempt N's event POST was accepted with an ackId: record it, the delivery pending until the first poll. */
export async function recordAwaitingAck(
  prisma: Db,
  write: Omit<AttemptWrite, 'delivery' | 'subscription'>,
  ack: { ackId: number; channel: string | null; destination: string | null; deadline: Date; firstPollAt: Date },
): Promise<void> {
  const { attempt } = write;
  try {
    await prisma.$transaction(async (tx) => {
      const claimed = await tx.webhookDelivery.updateMany({
        where: { id: write.deliveryId, status: 'pending', attemptCount: attempt.number - 1 },
        data: {
          attemptCount: attempt.number,
          nextAttemptAt: ack.firstPollAt,
          waitReason: 'hec_ack',
          hecAckId: BigInt(ack.ackId),
          hecAckChannel: ack.channel,
          hecAckDestination: ack.destination,
          hecAckDeadline: ack.deadline,
        },
      });
      if (claimed.count !== 1) throw conflictOf(write as AttemptWrite);
      await insertAttempt(tx, write);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw conflictOf(write as AttemptWrite);
    throw err;
  }
}

/** The delivery awaiting ackId `ackId` on attempt `number`, as claimed by the poll that settles it. */
export interface AwaitedAck {
  deliveryId: string;
  subscriptionId: string;
  number: number;
  ackId: bigint;
}

/**
 * Settles an awaited ack: `indexed` makes attempt N a success and the delivery succeeded; a timeout makes attempt N
 * an `ack_timeout` failure and the delivery pending again (a new attempt re-sends it) or failed. Claimed by the
 * ackId, so two pollers cannot both settle it: false when another one did.
 */
export async function settleAck(
  prisma: Db,
  awaited: AwaitedAck,
  result: { outcome: 'success'; delivery: { status: 'succeeded' } } | { outcome: 'ack_timeout'; error: string; delivery: DeliveryUpdate; effect: SubscriptionEffect },
  now: Date,
  published: DeliveryRef[] = [],
): Promise<{ settled: boolean; change: HealthChange | null }> {
  return prisma.$transaction(async (tx) => {
    const claimed = await tx.webhookDelivery.updateMany({
      where: { id: awaited.deliveryId, status: 'pending', attemptCount: awaited.number, hecAckId: awaited.ackId },
      data: { ...deliveryColumns(result.delivery, awaited.number, now), hecAckId: null, hecAckChannel: null, hecAckDestination: null, hecAckDeadline: null },
    });
    if (claimed.count !== 1) return { settled: false, change: null };
    await tx.webhookAttempt.updateMany({
      where: { deliveryId: awaited.deliveryId, number: awaited.number },
      data: { outcome: result.outcome, error: result.outcome === 'success' ? null : storableText(result.error) },
    });
    const effect: SubscriptionEffect = result.outcome === 'success' ? { kind: 'success' } : result.effect;
    const lastError = result.outcome === 'success' ? null : `ack_timeout: ${result.error}`;
    if (result.delivery.status === 'failed') {
      const exhausted = { id: awaited.deliveryId, subscriptionId: awaited.subscriptionId, attempts: awaited.number };
      await publishDeliveryExhausted(tx, exhausted, lastError, published, now);
    }
    return { settled: true, change: await applySubscriptionEffect(tx, awaited.subscriptionId, effect, now, lastError, published) };
  });
}

/** Moves the next poll of an awaited ack (the delivery's next_attempt_at shows it). */
export async function postponeAckPoll(prisma: Db, awaited: AwaitedAck, at: Date): Promise<void> {
  await prisma.webhookDelivery.updateMany({
    where: { id: awaited.deliveryId, status: 'pending', attemptCount: awaited.number, hecAckId: awaited.ackId },
    data: { nextAttemptAt: at },
  });
}
