// The transactional outbox. A domain change calls publishEvent inside its own database transaction: the event
// and one delivery row per matching subscription commit (or roll back) together with the change. After commit
// the deliveries are enqueued; an enqueue lost to a Redis outage or a crash is made good by the relay.
import type { Tx } from '@svc/db';
import { newId } from '@svc/db';
import { buildEnvelope, subscriptionMatches, type EventType } from '@svc/webhooks';

export interface PublishEventInput {
  type: EventType;
  organizationId: string;
  projectId?: string | null;
  assessmentId?: string | null;
  /** Event-specific fields: public identifiers only. */
  data: Record<string, unknown>;
  /** The test route: deliver to this subscription only, whatever its event list and filters. */
  onlySubscriptionId?: string;
}

export interface PublishedEvent {
  eventId: string;
  deliveryIds: string[];
}

/** Subscriptions an event may reach by level: org-wide ones, its project's, its assessment's. */
function levelFilter(input: PublishEventInput) {
  return [
    { level: 'organization' as const },
    ...(input.projectId ? [{ level: 'project' as const, projectId: input.projectId }] : []),
    ...(input.assessmentId ? [{ level: 'assessment' as const, assessmentId: input.assessmentId }] : []),
  ];
}

async function candidateSubscriptions(tx: Tx, input: PublishEventInput) {
  if (input.onlySubscriptionId) {
    return tx.webhookSubscription.findMany({
      where: { id: input.onlySubscriptionId, organizationId: input.organizationId, deletedAt: null },
    });
  }
  const subscriptions = await tx.webhookSubscription.findMany({
    where: {
      organizationId: input.organizationId,
      deletedAt: null,
      status: { in: ['active', 'failing'] },
      events: { has: input.type },
      OR: levelFilter(input),
    },
    orderBy: { id: 'asc' },
  });
  return subscriptions.filter((s) =>
    subscriptionMatches(
      {
        events: s.events,
        severityFilter: s.hasSeverityFilter ? s.severityFilter : null,
        statusFilter: s.hasStatusFilter ? s.statusFilter : null,
      },
      { type: input.type, data: input.data },
    ),
  );
}

export async function publishEvent(tx: Tx, input: PublishEventInput, now: Date = new Date()): Promise<PublishedEvent> {
  const eventId = newId('event', now.getTime());
  await tx.event.create({
    data: {
      id: eventId,
      organizationId: input.organizationId,
      type: input.type,
      projectId: input.projectId ?? null,
      assessmentId: input.assessmentId ?? null,
      data: input.data as object,
      createdAt: now,
    },
  });
  const subscriptions = await candidateSubscriptions(tx, input);
  const deliveries = subscriptions.map((subscription) => {
    const id = newId('whdel', now.getTime());
    const envelope = buildEnvelope({
      deliveryId: id,
      eventId,
      type: input.type,
      createdAt: now,
      organizationId: input.organizationId,
      data: input.data,
    });
    return {
      id,
      organizationId: input.organizationId,
      subscriptionId: subscription.id,
      eventId,
      eventType: input.type,
      payload: envelope as unknown as object,
      // Fixed now: a later change of the subscription's format does not change what this delivery's retries send.
      payloadFormat: subscription.payloadFormat,
      createdAt: now,
    };
  });
  if (deliveries.length > 0) await tx.webhookDelivery.createMany({ data: deliveries });
  return { eventId, deliveryIds: deliveries.map((d) => d.id) };
}
