// Delivery payload snapshots and attempt logs, seen through the level that owns the subscription.
import { newId, scopedTo, type Scoped, type Tx, type WebhookAttempt, type WebhookDelivery } from '@svc/db';
import { RECOVERY_MAX_DELIVERIES, recoveryWindow, resendRefusal } from '@svc/domain';
import { enqueueDeliveries } from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import { badRequest, conflict, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { recordAs, type Acting } from '../audit/audit.context';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import { subscriptionsOf, type LevelContext } from './levels';
import { findSubscription, holdSubscriptionRow } from './subscriptions.service';

export interface DeliveryFilters extends PageQuery {
  subscription_id?: string;
  event_type?: string;
  status?: 'pending' | 'succeeded' | 'failed';
  since?: Date;
  until?: Date;
}

export function presentDelivery(d: WebhookDelivery) {
  return {
    id: d.id,
    subscription_id: d.subscriptionId,
    event_id: d.eventId,
    event_type: d.eventType,
    status: d.status,
    attempt_count: d.attemptCount,
    next_attempt_at: d.status === 'pending' ? (d.nextAttemptAt ?? d.createdAt).toISOString() : null,
    // Why it waits: backoff after a failed attempt, or a postponement of the isolation that is not an attempt.
    wait_reason: d.status === 'pending' ? d.waitReason : null,
    completed_at: d.completedAt?.toISOString() ?? null,
    failure_reason: d.failureReason,
    redelivery_of: d.redeliveryOf,
    created_at: d.createdAt.toISOString(),
    payload: d.payload,
  };
}

export function presentAttempt(a: WebhookAttempt) {
  return {
    number: a.number,
    started_at: a.startedAt.toISOString(),
    duration_ms: a.durationMs,
    outcome: a.outcome,
    response_status: a.responseStatus,
    response_headers: a.responseHeaders,
    response_body: a.responseBody,
    error: a.error,
    retry_after_ms: a.retryAfterMs,
  };
}

function deliveriesOf(ctx: LevelContext) {
  const { deletedAt: _ignored, ...subscription } = subscriptionsOf(ctx);
  return { subscription };
}

export async function listDeliveries(deps: AppDeps, ctx: LevelContext, filters: DeliveryFilters) {
  const args = pageArgs(filters);
  const rows = await scopedTo(deps.prisma, ctx).webhookDelivery.findMany({
    ...args,
    where: {
      ...args.where,
      ...deliveriesOf(ctx),
      ...(filters.subscription_id && { subscriptionId: filters.subscription_id }),
      ...(filters.event_type && { eventType: filters.event_type }),
      ...(filters.status && { status: filters.status }),
      ...((filters.since || filters.until) && {
        createdAt: { ...(filters.since && { gte: filters.since }), ...(filters.until && { lt: filters.until }) },
      }),
    },
  });
  return toPage(rows, filters, presentDelivery);
}

export async function listAttempts(deps: AppDeps, ctx: LevelContext, deliveryId: string) {
  const delivery = await scopedTo(deps.prisma, ctx).webhookDelivery.findFirst({
    where: { id: deliveryId, ...deliveriesOf(ctx) },
    include: { attempts: { orderBy: { number: 'asc' } } },
  });
  if (!delivery) throw notFound('Webhook delivery');
  return { delivery_id: delivery.id, data: delivery.attempts.map(presentAttempt) };
}

export async function readDelivery(deps: AppDeps, ctx: LevelContext, deliveryId: string) {
  const delivery = await scopedTo(deps.prisma, ctx).webhookDelivery.findFirst({ where: { id: deliveryId, ...deliveriesOf(ctx) } });
  if (!delivery) throw notFound('Webhook delivery');
  return presentDelivery(delivery);
}

function levelOf(ctx: LevelContext) {
  return { level: ctx.level, project_id: ctx.projectId, assessment_id: ctx.assessmentId };
}

/** A new delivery of the original's event and payload snapshot; the envelope's id is the new delivery's. */
async function createRedeliveries(tx: Scoped<Tx>, originals: WebhookDelivery[], now: Date): Promise<WebhookDelivery[]> {
  const rows = originals.map((original) => {
    const id = newId('whdel', now.getTime());
    return {
      id,
      organizationId: original.organizationId,
      subscriptionId: original.subscriptionId,
      eventId: original.eventId,
      eventType: original.eventType,
      payload: { ...(original.payload as Record<string, unknown>), id },
      payloadFormat: original.payloadFormat,
      redeliveryOf: original.id,
      createdAt: now,
    };
  });
  if (rows.length > 0) await tx.webhookDelivery.createMany({ data: rows });
  return tx.webhookDelivery.findMany({ where: { id: { in: rows.map((r) => r.id) } } });
}

/** After commit; a failed enqueue leaves the deliveries pending in the database, where the outbox relay finds them. */
async function enqueueAfterCommit(deps: AppDeps, deliveries: WebhookDelivery[]): Promise<void> {
  try {
    await enqueueDeliveries(deps.deliveryQueue, deliveries.map((d) => ({ id: d.id, remainingAttempts: deps.config.webhooks.maxAttempts })));
  } catch (err) {
    deps.logger.warn('Enqueue of redeliveries failed; the outbox relay will retry', {
      deliveries: deliveries.length,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

function refuseUnlessLive(subscription: { status: string; deletedAt: Date | null }, delivery: { status: string } = { status: 'failed' }): void {
  const refusal = resendRefusal(delivery, subscription);
  if (refusal) throw conflict(refusal);
}

/** The subscription as committed, its row held (holdSubscriptionRow): 404 when it went with its project or assessment. */
async function liveAsCommitted(tx: Pick<Tx, '$queryRaw'>, ctx: LevelContext, id: string, mode: 'SHARE' | 'UPDATE' = 'SHARE') {
  const row = await holdSubscriptionRow(tx, ctx.organizationId, id, mode);
  if (!row) throw notFound('Webhook subscription');
  return row;
}

export async function resendDelivery(deps: AppDeps, ctx: LevelContext, deliveryId: string, by: Acting) {
  const original = await scopedTo(deps.prisma, ctx).webhookDelivery.findFirst({
    where: { id: deliveryId, ...deliveriesOf(ctx) },
    include: { subscription: true },
  });
  if (!original) throw notFound('Webhook delivery');
  refuseUnlessLive(original.subscription, original);
  const now = deps.clock.now();
  const [created] = await scopedTo(deps.prisma, ctx).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'webhooks:update', 'Resending webhook deliveries');
    // Deleted or disabled while the request ran: refused as it would have been before (nothing queued for it).
    refuseUnlessLive(await liveAsCommitted(tx, ctx, original.subscriptionId), original);
    const redeliveries = await createRedeliveries(tx, [original], now);
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'webhook.delivery_resent',
      target: { type: 'webhook_delivery', id: original.id },
      metadata: { ...levelOf(ctx), subscription_id: original.subscriptionId, redelivery_id: redeliveries[0].id },
    });
    return redeliveries;
  }, RECHECKED_TRANSACTION);
  await enqueueAfterCommit(deps, [created]);
  return presentDelivery(created);
}

export async function recoverDeliveries(
  deps: AppDeps,
  ctx: LevelContext,
  subscriptionId: string,
  input: { since: Date; until?: Date },
  by: Acting,
) {
  const subscription = await findSubscription(deps, ctx, subscriptionId);
  refuseUnlessLive(subscription);
  const now = deps.clock.now();
  const window = recoveryWindow(input.since, input.until, now);
  if (typeof window === 'string') throw badRequest(window);
  const created = await scopedTo(deps.prisma, ctx).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'webhooks:update', 'Recovering webhook deliveries');
    // Two recoveries of one subscription run one after the other, so each failed delivery is recovered once.
    // Deleted or disabled while the request ran: refused as it would have been before (none marked recovered).
    refuseUnlessLive(await liveAsCommitted(tx, ctx, subscription.id, 'UPDATE'));
    const failed = await tx.webhookDelivery.findMany({
      where: { subscriptionId: subscription.id, status: 'failed', recoveredAt: null, createdAt: { gte: window.since, lt: window.until } },
      orderBy: { createdAt: 'asc' },
      take: RECOVERY_MAX_DELIVERIES,
    });
    await tx.webhookDelivery.updateMany({ where: { id: { in: failed.map((d) => d.id) } }, data: { recoveredAt: now } });
    const redeliveries = await createRedeliveries(tx, failed, now);
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'webhook.deliveries_recovered',
      target: { type: 'webhook_subscription', id: subscription.id },
      metadata: { ...levelOf(ctx), since: window.since.toISOString(), until: window.until.toISOString(), requeued: redeliveries.length },
    });
    return redeliveries;
  }, RECHECKED_TRANSACTION);
  await enqueueAfterCommit(deps, created);
  return {
    subscription_id: subscription.id,
    since: window.since.toISOString(),
    until: window.until.toISOString(),
    requeued: created.length,
    // A full batch: more failed deliveries may remain in the window; calling again recovers the next batch.
    more: created.length === RECOVERY_MAX_DELIVERIES,
  };
}
