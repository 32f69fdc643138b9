// What a person reads about an event, whatever the channel: a headline, labelled facts and a link back to the
// dashboard. Built from the delivery envelope only (pure), so every channel says the same thing.
import type { Envelope } from '../envelope';
import { describeEventType, isFindingEventType, isOperationalEventType, type OperationalEventType } from '../events';

export interface NotificationFact {
  label: string;
  value: string;
}

export interface NotificationMessage {
  headline: string;
  facts: NotificationFact[];
  /** The page of the dashboard the event is about. */
  link: string;
  /** `<event type> · <time>`: the small print under a message. */
  context: string;
}

export interface NotificationOptions {
  /** The dashboard's public base URL (PUBLIC_BASE_URL), without a trailing slash. */
  dashboardUrl: string;
}

/** Facts shown first, in this order, with these labels; every other data field follows, labelled from its name. */
const KNOWN_FACTS: ReadonlyArray<readonly [string, string]> = [
  ['severity', 'Severity'],
  ['status', 'Status'],
  ['previous_status', 'Previous status'],
  ['location', 'Location'],
  ['project_id', 'Project'],
  ['assessment_id', 'Assessment'],
  ['finding_id', 'Finding'],
];
const NOT_FACTS = new Set(['kind', 'title', 'message', 'fingerprint']);
const MAX_VALUE_LENGTH = 300;

const labelOf = (key: string) => key.charAt(0).toUpperCase() + key.slice(1).replace(/_/g, ' ');

function textOf(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > MAX_VALUE_LENGTH ? `${text.slice(0, MAX_VALUE_LENGTH - 1)}…` : text;
}

function headlineOf(envelope: Envelope): string {
  const { data, type } = envelope;
  const title = typeof data.title === 'string' && data.title.trim() !== '' ? data.title.trim() : null;
  if (isFindingEventType(type) && title) {
    const severity = typeof data.severity === 'string' ? `${data.severity} ` : '';
    const what: Record<string, string> = {
      'finding.created': `New ${severity}finding`,
      'finding.confirmed': `Confirmed ${severity}finding`,
      'finding.status_changed': `Finding ${typeof data.status === 'string' ? `now ${data.status.replace(/_/g, ' ')}` : 'status changed'}`,
      'finding.sla_breached': `SLA breached for ${severity}finding`,
    };
    return `${what[type]}: ${title}`;
  }
  if (type === 'webhook.test') return 'Test notification from the Security Assessment Service';
  if (isOperationalEventType(type)) return operationalHeadline(type, data);
  return title ? `${describeEventType(type)}: ${title}` : describeEventType(type);
}

const OPERATIONAL_HEADLINES: Readonly<Record<OperationalEventType, (subject: string) => string>> = {
  'webhook.subscription_failing': (subject) => `${subject} is failing`,
  'webhook.subscription_disabled': (subject) => `${subject} was disabled`,
  'webhook.subscription_recovered': (subject) => `${subject} recovered and is delivering again`,
  'webhook.delivery_exhausted': (subject) => `${subject} could not deliver an event: attempts exhausted`,
  'webhook.breaker_opened': (subject) => `Circuit breaker opened for ${subject}: deliveries are held back`,
  'webhook.breaker_closed': (subject) => `Circuit breaker closed for ${subject}: delivering again`,
};

/** E.g. `Webhook subscription to siem.example.com was disabled: endpoint returned 410 Gone`. */
function operationalHeadline(type: OperationalEventType, data: Record<string, unknown>): string {
  const target = typeof data.subscription_kind === 'string' && data.subscription_kind !== 'webhook';
  const kind = target ? `${String(data.subscription_kind)} notification target` : 'webhook subscription';
  const where = typeof data.url_host === 'string' && data.url_host !== '' ? ` to ${data.url_host}` : '';
  const headline = OPERATIONAL_HEADLINES[type](`${kind}${where}`);
  const why = type === 'webhook.subscription_disabled' && typeof data.disabled_reason === 'string' ? `: ${data.disabled_reason}` : '';
  return `${headline.charAt(0).toUpperCase()}${headline.slice(1)}${why}`;
}

function factsOf(envelope: Envelope): NotificationFact[] {
  const data = envelope.data as Record<string, unknown>;
  const present = (key: string) => data[key] !== undefined && data[key] !== null && data[key] !== '';
  const known = KNOWN_FACTS.filter(([key]) => present(key)).map(([key, label]) => ({ label, value: textOf(data[key]) }));
  const knownKeys = new Set(KNOWN_FACTS.map(([key]) => key));
  const rest = Object.keys(data)
    .filter((key) => !knownKeys.has(key) && !NOT_FACTS.has(key) && present(key))
    .sort()
    .map((key) => ({ label: labelOf(key), value: textOf(data[key]) }));
  if (typeof data.message === 'string') rest.unshift({ label: 'Message', value: textOf(data.message) });
  return [...known, ...rest];
}

/** The finding's place on its assessment page, else the assessment, the project, or the dashboard's home. */
export function dashboardLink(envelope: Envelope, dashboardUrl: string): string {
  const data = envelope.data as Record<string, unknown>;
  const id = (key: string) => (typeof data[key] === 'string' && data[key] !== '' ? encodeURIComponent(data[key] as string) : null);
  const base = dashboardUrl.replace(/\/+$/, '');
  if (isOperationalEventType(envelope.type)) return subscriptionLink(data, id, base);
  const assessment = id('assessment_id');
  const finding = id('finding_id');
  if (assessment) return `${base}/assessments/${assessment}${finding ? `#finding-${finding}` : ''}`;
  const project = id('project_id');
  if (project) return `${base}/projects/${project}`;
  return `${base}/`;
}

/** An operational event links to the subscription's page (at its level), or to the notification targets. */
function subscriptionLink(data: Record<string, unknown>, id: (key: string) => string | null, base: string): string {
  const subscription = id('subscription_id');
  if (data.subscription_kind !== undefined && data.subscription_kind !== 'webhook') return `${base}/notification-targets`;
  if (!subscription) return `${base}/webhooks`;
  const project = id('project_id');
  const assessment = id('assessment_id');
  if (data.level === 'project' && project) return `${base}/projects/${project}/webhooks/${subscription}`;
  if (data.level === 'assessment' && assessment) return `${base}/assessments/${assessment}/webhooks/${subscription}`;
  return `${base}/webhooks/${subscription}`;
}

export function notificationMessage(envelope: Envelope, options: NotificationOptions): NotificationMessage {
  return {
    headline: headlineOf(envelope),
    facts: factsOf(envelope),
    link: dashboardLink(envelope, options.dashboardUrl),
    context: `${envelope.type} · ${envelope.created_at}`,
  };
}
