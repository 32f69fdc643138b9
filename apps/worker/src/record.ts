// Writing down what an attempt did, in ONE transaction: the attempt row, the delivery's new state and the
// subscription's health move together or not at all. The delivery row is claimed by its attempt count, so two
// workers that somehow ran the same attempt cannot both record it (the unique (delivery, number) index agrees).
import { SYSTEM_ACTOR, recordAudit } from '@svc/audit';
import { Prisma, isUniqueViolation, newId, queryRows, utcTimestamp, type Db, type Tx } from '@svc/db';
import type { AttemptOutcome } from './http/outcome';
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

async function applySubscriptionEffect(tx: Tx, subscriptionId: string, effect: SubscriptionEffect, now: Date): Promise<HealthChange | null> {
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
  if (next.status !== current.status && (next.status === 'failing' || next.status === 'disabled')) {
    await auditHealthChange(tx, subscriptionId, next, now);
    return { subscriptionId, status: next.status, reason: next.disabledReason };
  }
  return null;
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

export async function recordAttempt(prisma: Db, write: AttemptWrite): Promise<HealthChange | null> {
  const { attempt } = write;
  try {
    if (write.subscription.kind === 'none' || write.subscription.kind === 'success') {
      // Neither can turn a subscription failing or disabled: no health change to report.
      await recordInOneStatement(prisma, write);
      return null;
    }
    return await prisma.$transaction(async (tx) => {
      const claimed = await tx.webhookDelivery.updateMany({
        where: { id: write.deliveryId, status: 'pending', attemptCount: attempt.number - 1 },
        data: deliveryColumns(write.delivery, attempt.number, write.now),
      });
      if (claimed.count !== 1) throw new AttemptConflictError(`Attempt ${attempt.number} of ${write.deliveryId} was already recorded`);
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
      return applySubscriptionEffect(tx, write.subscriptionId, write.subscription, write.now);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw new AttemptConflictError(`Attempt ${attempt.number} of ${write.deliveryId} was already recorded`);
    throw err;
  }
}

/**
 * The common attempts (a success, or a failure to retry) recorded by ONE statement: claim the delivery, insert the
 * attempt and, after a success, reset the subscription's health: the same rules as healthAfterSuccess, without
 * the per-query cost of an interactive transaction (a delivery's hot path spent most of its CPU there).
 */
async function recordInOneStatement(prisma: Db, write: AttemptWrite): Promise<void> {
  const { attempt, delivery, now } = write;
  const completedAt = delivery.status === 'pending' ? null : now;
  const nextAttemptAt = delivery.status === 'pending' ? delivery.nextAttemptAt : null;
  const failureReason = delivery.status === 'failed' ? delivery.reason : null;
  const resetsHealth = write.subscription.kind === 'success';
  const headers = attempt.responseHeaders === null ? null : JSON.stringify(attempt.responseHeaders);
  // Explicit casts: on the pg pool the parameters arrive untyped.
  const statement = Prisma.sql`
    WITH claimed AS (
      UPDATE webhook_deliveries
         SET attempt_count = ${attempt.number},
             status = ${delivery.status}::"DeliveryStatus",
             next_attempt_at = ${utcTimestamp(nextAttemptAt)},
             wait_reason = CASE WHEN ${delivery.status} = 'pending' THEN 'backoff' ELSE NULL END,
             completed_at = CASE WHEN ${delivery.status} = 'pending' THEN completed_at ELSE ${utcTimestamp(completedAt)} END,
             failure_reason = CASE WHEN ${delivery.status} = 'pending' THEN failure_reason ELSE ${failureReason} END,
             updated_at = ${utcTimestamp(now)}
       WHERE id = ${write.deliveryId} AND status = 'pending' AND attempt_count = ${attempt.number - 1}
      RETURNING id
    ), inserted AS (
      INSERT INTO webhook_attempts
        (id, delivery_id, number, started_at, duration_ms, outcome, response_status, response_headers, response_body, error, retry_after_ms)
      SELECT ${newId('whatt', now.getTime())}, id, ${attempt.number}::int, ${utcTimestamp(attempt.startedAt)},
             ${attempt.durationMs}::int, ${attempt.outcome}, ${attempt.responseStatus}::int, ${headers}::jsonb,
             ${storableText(attempt.responseBody)}::text, ${storableText(attempt.error)}::text, ${attempt.retryAfterMs}::int
        FROM claimed
      RETURNING id
    ), health AS (
      UPDATE webhook_subscriptions
         SET consecutive_failures = 0,
             first_failure_at = NULL,
             status = CASE WHEN status = 'failing' THEN 'active'::"SubscriptionStatus" ELSE status END,
             updated_at = ${utcTimestamp(now)}
       WHERE ${resetsHealth}::boolean AND id = ${write.subscriptionId} AND EXISTS (SELECT 1 FROM claimed)
         AND (consecutive_failures <> 0 OR first_failure_at IS NOT NULL OR status = 'failing')
      RETURNING id
    )
    SELECT (SELECT count(*) FROM claimed)::int AS claimed, (SELECT count(*) FROM inserted)::int AS inserted, (SELECT count(*) FROM health)::int AS health`;
  const rows = await queryRows<{ claimed: number }>(prisma, statement, 'worker_record_attempt');
  if (rows[0]?.claimed !== 1) {
    throw new AttemptConflictError(`Attempt ${attempt.number} of ${write.deliveryId} was already recorded`);
  }
}

/**
 * Ends a delivery the isolation held back past its retry window: a terminal failure without a further attempt, which
 * counts for the subscription's health like any terminal failure (a dead endpoint still reaches failing and
 * disabled on schedule).
 */
export async function failHeldBackDelivery(
  prisma: Db,
  delivery: { id: string; subscriptionId: string; attemptCount: number },
  reason: string,
  rules: HealthRules,
  now: Date,
): Promise<HealthChange | null> {
  return prisma.$transaction(async (tx) => {
    const { count } = await tx.webhookDelivery.updateMany({
      where: { id: delivery.id, status: 'pending', attemptCount: delivery.attemptCount },
      data: { status: 'failed', nextAttemptAt: null, waitReason: null, completedAt: now, failureReason: reason },
    });
    if (count !== 1) return null;
    return applySubscriptionEffect(tx, delivery.subscriptionId, { kind: 'terminal_failure', rules }, now);
  });
}

/** Ends a still-pending delivery without an attempt (its subscription is gone or disabled, or its attempts are used up). */
export async function failPendingDelivery(prisma: Db, deliveryId: string, reason: string, now: Date): Promise<boolean> {
  const { count } = await prisma.webhookDelivery.updateMany({
    where: { id: deliveryId, status: 'pending' },
    data: { status: 'failed', nextAttemptAt: null, waitReason: null, completedAt: now, failureReason: reason },
  });
  return count === 1;
}
