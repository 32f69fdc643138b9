// Operational events (webhook.subscription_failing and the others) are organization-level: the worker publishes
// them for the organization only, so a project or assessment subscription would never receive one. Such a
// subscription is refused them (422) and its event picker does not offer them.
import { EVENT_CATALOGUE, isOperationalEventType, OPERATIONAL_EVENT_TYPES } from '@svc/webhooks';
import type { WebhookLevel } from '@svc/db';
import { unprocessable } from '../../http/errors';

/** The event types a subscription at this level can receive. */
export function eventCatalogueAt(level: WebhookLevel) {
  return level === 'organization' ? EVENT_CATALOGUE : EVENT_CATALOGUE.filter((e) => !isOperationalEventType(e.type));
}

export function refuseOperationalBelowOrganization(events: unknown, level: WebhookLevel): void {
  if (level === 'organization' || !Array.isArray(events)) return;
  const operational = events.filter(isOperationalEventType);
  if (operational.length > 0) {
    throw unprocessable(
      `events: ${operational.join(', ')} are organization-level events (${OPERATIONAL_EVENT_TYPES.length} operational events about the delivery system); subscribe to them at the organization level.`,
    );
  }
}
