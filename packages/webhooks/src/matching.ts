// Does an event go to a subscription? SPEC "Filters": the event type must be subscribed; severity_filter and
// status_filter apply only to the four finding events and are ignored for every other event.
// Level (org / project / assessment) and subscription state are checked by the caller, which has the database.
import { isFindingEventType } from './events';

export interface MatchableSubscription {
  events: readonly string[];
  /** null or absent: no filter. A list: the finding's `data.severity` must be in it (an empty list lets nothing through). */
  severityFilter?: readonly string[] | null;
  /** null or absent: no filter. A list: the finding's `data.status` must be in it (an empty list lets nothing through). */
  statusFilter?: readonly string[] | null;
}

export interface MatchableEvent {
  type: string;
  data?: Record<string, unknown> | null;
}

/** True when a filter is set and the value (a string) is not in it. */
function filterRejects(filter: readonly string[] | null | undefined, value: unknown): boolean {
  if (filter === null || filter === undefined) {
    return false;
  }
  return typeof value !== 'string' || !filter.includes(value);
}

export function subscriptionMatches(subscription: MatchableSubscription, event: MatchableEvent): boolean {
  if (!subscription.events.includes(event.type)) {
    return false;
  }
  if (!isFindingEventType(event.type)) {
    return true;
  }
  const data = event.data ?? {};
  if (filterRejects(subscription.severityFilter, data.severity)) {
    return false;
  }
  if (filterRejects(subscription.statusFilter, data.status)) {
    return false;
  }
  return true;
}
