// The event catalogue of SPEC "Events", plus the value lists DESIGN.md fixes for filters and formats.
import { isOneOf } from '@svc/domain';

/** The twelve customer-facing event types, in SPEC's order, then the operational events about delivery itself. */
export const EVENT_TYPES = [
  'assessment.completed',
  'finding.created',
  'finding.confirmed',
  'finding.status_changed',
  'finding.sla_breached',
  'report.ready',
  'fix_verify.completed',
  'pr_review.completed',
  'spend.threshold_crossed',
  'spend.cap_reached',
  'monitoring.regression',
  'webhook.test',
  'webhook.subscription_failing',
  'webhook.subscription_disabled',
  'webhook.subscription_recovered',
  'webhook.delivery_exhausted',
  'webhook.breaker_opened',
  'webhook.breaker_closed',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

const EVENT_DESCRIPTIONS: Readonly<Record<EventType, string>> = {
  'assessment.completed': 'An assessment completes',
  'finding.created': 'A new finding is recorded',
  'finding.confirmed': 'A finding is confirmed during triage',
  'finding.status_changed': "A finding's status changes; carries both new and previous status",
  'finding.sla_breached': 'A finding is still open past its severity-based remediation SLA window',
  'report.ready': 'A PDF report is available for download',
  'fix_verify.completed': 'A fix verification run completed',
  'pr_review.completed': 'A PR security review was posted',
  'spend.threshold_crossed': 'Organization spend crossed a configured alert threshold',
  'spend.cap_reached': 'Organization or project spend reached a configured cap',
  'monitoring.regression': 'A fixed vulnerability has regressed',
  'webhook.test': 'Synthetic event sent on demand by the test route',
  'webhook.subscription_failing': 'A webhook subscription or notification target started failing (consecutive terminal failures)',
  'webhook.subscription_disabled': 'A webhook subscription or notification target was disabled (410 Gone, unsafe URL, too many failures)',
  'webhook.subscription_recovered': 'A failing webhook subscription or notification target delivered again and is active',
  'webhook.delivery_exhausted': 'A delivery failed for good: its attempts are used up or its receiver refused it',
  'webhook.breaker_opened': "A subscription's circuit breaker opened: its deliveries wait for a probe",
  'webhook.breaker_closed': "A subscription's circuit breaker closed again after a successful probe",
};

export interface EventCatalogueEntry {
  readonly type: EventType;
  readonly description: string;
}

/** What `GET .../webhooks/events` lists: every event type with a one-line description. */
export const EVENT_CATALOGUE: readonly EventCatalogueEntry[] = Object.freeze(
  EVENT_TYPES.map((type) => Object.freeze({ type, description: EVENT_DESCRIPTIONS[type] })),
);

/** The four finding-shaped events; the only ones severity_filter and status_filter apply to. */
export const FINDING_EVENT_TYPES = [
  'finding.created',
  'finding.confirmed',
  'finding.status_changed',
  'finding.sla_breached',
] as const satisfies readonly EventType[];

export type FindingEventType = (typeof FINDING_EVENT_TYPES)[number];

/**
 * The operational events: about the delivery system itself, one subscription (or notification target) each.
 * Organization-level only, and never delivered to the subscription they are about (README, Operational events).
 */
export const OPERATIONAL_EVENT_TYPES = [
  'webhook.subscription_failing',
  'webhook.subscription_disabled',
  'webhook.subscription_recovered',
  'webhook.delivery_exhausted',
  'webhook.breaker_opened',
  'webhook.breaker_closed',
] as const satisfies readonly EventType[];

export type OperationalEventType = (typeof OPERATIONAL_EVENT_TYPES)[number];

export function isOperationalEventType(value: unknown): value is OperationalEventType {
  return isOneOf(OPERATIONAL_EVENT_TYPES, value);
}

export const PAYLOAD_FORMATS = ['service', 'splunk_hec', 'microsoft_sentinel', 'cef'] as const;
export type PayloadFormat = (typeof PAYLOAD_FORMATS)[number];

export function isEventType(value: unknown): value is EventType {
  return isOneOf(EVENT_TYPES, value);
}

export function isFindingEventType(value: unknown): value is FindingEventType {
  return isOneOf(FINDING_EVENT_TYPES, value);
}

export function isPayloadFormat(value: unknown): value is PayloadFormat {
  return isOneOf(PAYLOAD_FORMATS, value);
}

/** The one-line description of an event type. */
export function describeEventType(type: EventType): string {
  return EVENT_DESCRIPTIONS[type];
}
