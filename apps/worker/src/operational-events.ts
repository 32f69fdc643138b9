// Operational events (docs/webhooks.md "Operational events"): what happens to a subscription or notification target itself,
// published through the outbox in the transaction that records the change, so an event is never lost and never
// sent for a change that rolled back. They are organization-level events (only org-wide subscriptions and targets
// receive them, whatever level the subscription they are about has), and an event about subscription S is never
// delivered to S: its own failures would feed it. A delivery of an operational event that fails for good publishes
// no webhook.delivery_exhausted (two dead receivers would otherwise tell each other about each other forever).
import type { Tx } from '@svc/db';
import { publishEvent, type DeliveryRef } from '@svc/outbox';
import { isOperationalEventType, operationalEventData, type OperationalEventType } from '@svc/webhooks';

/** Publishes one operational event about a subscription in `tx`; adds its deliveries to `published` (to enqueue after commit). */
export async function publishOperationalEvent(
  tx: Tx,
  type: OperationalEventType,
  subscriptionId: string,
  lastError: string | null,
  extra: Record<string, unknown>,
  published: DeliveryRef[],
  now: Date,
): Promise<void> {
  const subject = await tx.webhookSubscription.findUnique({
    where: { id: subscriptionId },
    select: { id: true, organizationId: true, kind: true, level: true, projectId: true, assessmentId: true, url: true },
  });
  if (!subject) return;
  const event = await publishEvent(
    tx,
    {
      type,
      organizationId: subject.organizationId,
      projectId: null,
      assessmentId: null,
      data: operationalEventData(subject, lastError, extra),
      exceptSubscriptionId: subject.id,
    },
    now,
  );
  published.push(...event.deliveries);
}

/** webhook.delivery_exhausted for a delivery that just failed for good (unless it carried an operational event). */
export async function publishDeliveryExhausted(
  tx: Tx,
  delivery: { id: string; subscriptionId: string; attempts: number },
  lastError: string | null,
  published: DeliveryRef[],
  now: Date,
): Promise<void> {
  const row = await tx.webhookDelivery.findUnique({ where: { id: delivery.id }, select: { eventId: true, eventType: true } });
  if (!row || isOperationalEventType(row.eventType)) return;
  const extra = { exhausted_delivery_id: delivery.id, exhausted_event_id: row.eventId, exhausted_event_type: row.eventType, attempts: delivery.attempts };
  await publishOperationalEvent(tx, 'webhook.delivery_exhausted', delivery.subscriptionId, lastError, extra, published, now);
}

/** An attempt's failure as one line: the HTTP status (and error), or the outcome and its error. */
export function lastErrorOf(attempt: { responseStatus: number | null; outcome: string; error: string | null }): string {
  if (attempt.responseStatus !== null) return `HTTP ${attempt.responseStatus}${attempt.error ? `: ${attempt.error}` : ''}`;
  return `${attempt.outcome}${attempt.error ? `: ${attempt.error}` : ''}`;
}
