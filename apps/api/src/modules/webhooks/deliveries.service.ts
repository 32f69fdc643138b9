// Delivery payload snapshots and attempt logs, seen through the level that owns the subscription.
import { scopedTo, type WebhookAttempt, type WebhookDelivery } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import { notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { subscriptionsOf, type LevelContext } from './levels';

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
    completed_at: d.completedAt?.toISOString() ?? null,
    failure_reason: d.failureReason,
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
