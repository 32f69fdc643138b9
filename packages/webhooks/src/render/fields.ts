// The one field catalogue every renderer reads: which `data` fields each event type carries, of which type, and
// where each lands in CEF, Microsoft Sentinel and Splunk HEC. The docs/webhooks.md "Field mapping per format" table is
// generated from it (scripts/generate-field-mapping.ts), so code and documentation cannot drift apart.
import type { EventType } from '../events';

/** How a value is typed: `credits` are decimal strings in `data` ("12.50") and numbers in typed formats. */
export type FieldType = 'string' | 'int' | 'credits' | 'datetime';

/** Where a field goes in a CEF line: a standard ArcSight key, or a custom key with its one fixed label. */
export interface CefTarget {
  key: string;
  /** The `<key>Label` value; the same for a key across all event types. Absent for standard keys. */
  label?: string;
}

export interface DataField {
  /** Path inside `data`, e.g. `findings_by_severity.critical`. */
  path: string;
  type: FieldType;
  cef: CefTarget;
}

// One definition per field name: the same field has the same type and targets in every event type.
const FIELD_DEFINITIONS = {
  assessment_id: { type: 'string', cef: { key: 'cs4', label: 'assessmentId' } },
  project_id: { type: 'string', cef: { key: 'cs3', label: 'projectId' } },
  finding_id: { type: 'string', cef: { key: 'cs5', label: 'findingId' } },
  status: { type: 'string', cef: { key: 'cs6', label: 'findingStatus' } },
  finding_status: { type: 'string', cef: { key: 'cs6', label: 'findingStatus' } },
  previous_status: { type: 'string', cef: { key: 'flexString1', label: 'previousStatus' } },
  severity: { type: 'string', cef: { key: 'flexString2', label: 'findingSeverity' } },
  title: { type: 'string', cef: { key: 'msg' } },
  name: { type: 'string', cef: { key: 'msg' } },
  message: { type: 'string', cef: { key: 'msg' } },
  location: { type: 'string', cef: { key: 'filePath' } },
  fingerprint: { type: 'string', cef: { key: 'svcFingerprint' } },
  sla_days: { type: 'int', cef: { key: 'cn1', label: 'slaDays' } },
  due_at: { type: 'datetime', cef: { key: 'deviceCustomDate1', label: 'slaDueAt' } },
  report_id: { type: 'string', cef: { key: 'fileId' } },
  size_bytes: { type: 'int', cef: { key: 'fsize' } },
  ready_at: { type: 'datetime', cef: { key: 'end' } },
  fix_verification_id: { type: 'string', cef: { key: 'svcFixVerificationId' } },
  result: { type: 'string', cef: { key: 'outcome' } },
  pr_review_id: { type: 'string', cef: { key: 'svcPrReviewId' } },
  repository: { type: 'string', cef: { key: 'svcRepository' } },
  pr_number: { type: 'int', cef: { key: 'cn2', label: 'prNumber' } },
  verdict: { type: 'string', cef: { key: 'outcome' } },
  findings_count: { type: 'int', cef: { key: 'cnt' } },
  url: { type: 'string', cef: { key: 'request' } },
  limit_id: { type: 'string', cef: { key: 'svcLimitId' } },
  scope: { type: 'string', cef: { key: 'svcScope' } },
  threshold_credits: { type: 'credits', cef: { key: 'cfp1', label: 'thresholdCredits' } },
  cap_credits: { type: 'credits', cef: { key: 'cfp2', label: 'capCredits' } },
  spent_credits: { type: 'credits', cef: { key: 'cfp3', label: 'spentCredits' } },
  previous_fixed_at: { type: 'datetime', cef: { key: 'deviceCustomDate2', label: 'previousFixedAt' } },
  subscription_id: { type: 'string', cef: { key: 'svcSubscriptionId' } },
  subscription_kind: { type: 'string', cef: { key: 'svcSubscriptionKind' } },
  level: { type: 'string', cef: { key: 'svcSubscriptionLevel' } },
  url_host: { type: 'string', cef: { key: 'dhost' } },
  last_error: { type: 'string', cef: { key: 'svcLastError' } },
  consecutive_failures: { type: 'int', cef: { key: 'cn3', label: 'consecutiveFailures' } },
  first_failure_at: { type: 'datetime', cef: { key: 'svcFirstFailureAt' } },
  disabled_reason: { type: 'string', cef: { key: 'reason' } },
  exhausted_delivery_id: { type: 'string', cef: { key: 'svcExhaustedDeliveryId' } },
  exhausted_event_id: { type: 'string', cef: { key: 'svcExhaustedEventId' } },
  exhausted_event_type: { type: 'string', cef: { key: 'svcExhaustedEventType' } },
  attempts: { type: 'int', cef: { key: 'svcAttempts' } },
  probe_at: { type: 'datetime', cef: { key: 'svcProbeAt' } },
  started_at: { type: 'datetime', cef: { key: 'start' } },
  completed_at: { type: 'datetime', cef: { key: 'end' } },
  'findings_by_severity.critical': { type: 'int', cef: { key: 'svcFindingsCritical' } },
  'findings_by_severity.high': { type: 'int', cef: { key: 'svcFindingsHigh' } },
  'findings_by_severity.medium': { type: 'int', cef: { key: 'svcFindingsMedium' } },
  'findings_by_severity.low': { type: 'int', cef: { key: 'svcFindingsLow' } },
  'findings_by_severity.info': { type: 'int', cef: { key: 'svcFindingsInfo' } },
} as const satisfies Record<string, { type: FieldType; cef: CefTarget }>;

export type DataFieldPath = keyof typeof FIELD_DEFINITIONS;

// assessment.completed's `status` is the assessment's, not a finding's: it goes to `outcome` like other results.
const FIELD_OVERRIDES: Partial<Record<EventType, Partial<Record<DataFieldPath, CefTarget>>>> = {
  'assessment.completed': { status: { key: 'outcome' } },
};

const FINDING_FIELDS: DataFieldPath[] = ['finding_id', 'assessment_id', 'project_id', 'title', 'severity', 'status', 'location', 'fingerprint'];

/** What every operational event's data carries (operational.ts operationalEventData). */
const OPERATIONAL_FIELDS: DataFieldPath[] = ['subscription_id', 'subscription_kind', 'level', 'project_id', 'assessment_id', 'url_host', 'last_error'];

const EVENT_FIELD_PATHS: Readonly<Record<EventType, readonly DataFieldPath[]>> = {
  'assessment.completed': [
    'assessment_id',
    'project_id',
    'name',
    'status',
    'findings_count',
    'findings_by_severity.critical',
    'findings_by_severity.high',
    'findings_by_severity.medium',
    'findings_by_severity.low',
    'findings_by_severity.info',
    'started_at',
    'completed_at',
  ],
  'finding.created': FINDING_FIELDS,
  'finding.confirmed': FINDING_FIELDS,
  'finding.status_changed': [...FINDING_FIELDS, 'previous_status'],
  'finding.sla_breached': [...FINDING_FIELDS, 'sla_days', 'due_at'],
  'report.ready': ['report_id', 'assessment_id', 'project_id', 'title', 'size_bytes', 'ready_at'],
  'fix_verify.completed': ['fix_verification_id', 'finding_id', 'assessment_id', 'project_id', 'result', 'finding_status'],
  'pr_review.completed': ['pr_review_id', 'project_id', 'repository', 'pr_number', 'verdict', 'findings_count', 'url'],
  'spend.threshold_crossed': ['limit_id', 'scope', 'project_id', 'threshold_credits', 'spent_credits'],
  'spend.cap_reached': ['limit_id', 'scope', 'project_id', 'cap_credits', 'spent_credits'],
  'monitoring.regression': ['finding_id', 'assessment_id', 'project_id', 'title', 'severity', 'location', 'previous_fixed_at'],
  'webhook.test': ['subscription_id', 'message'],
  'webhook.subscription_failing': [...OPERATIONAL_FIELDS, 'consecutive_failures', 'first_failure_at'],
  'webhook.subscription_disabled': [...OPERATIONAL_FIELDS, 'disabled_reason', 'consecutive_failures'],
  'webhook.subscription_recovered': OPERATIONAL_FIELDS,
  'webhook.delivery_exhausted': [...OPERATIONAL_FIELDS, 'exhausted_delivery_id', 'exhausted_event_id', 'exhausted_event_type', 'attempts'],
  'webhook.breaker_opened': [...OPERATIONAL_FIELDS, 'probe_at'],
  'webhook.breaker_closed': OPERATIONAL_FIELDS,
};

/** The `data` fields of an event type (besides `kind`), with their type and CEF target. */
export function dataFieldsOf(type: EventType): DataField[] {
  return EVENT_FIELD_PATHS[type].map((path) => ({
    path,
    type: FIELD_DEFINITIONS[path].type,
    cef: FIELD_OVERRIDES[type]?.[path] ?? FIELD_DEFINITIONS[path].cef,
  }));
}

/** Reads a dotted path inside `data`; undefined when any step is missing. */
export function readDataPath(data: Record<string, unknown>, path: string): unknown {
  let value: unknown = data;
  for (const segment of path.split('.')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

/** `findings_by_severity.critical` -> `FindingsBySeverityCritical`: the one naming rule for typed column names. */
export function pascalCaseOfPath(path: string): string {
  return path
    .split(/[._]/)
    .filter((part) => part !== '')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

/** A credits decimal string ("12.50") or number as a number; undefined when it is neither. */
export function creditsAsNumber(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value)) return Number(value);
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}

/** The part of `data` not already written at its catalogued place (`written` paths) and other than `kind`. */
export function extraData(data: Record<string, unknown>, written: ReadonlySet<string>): Record<string, unknown> {
  const skip = new Set([...written, 'kind']);
  const prune = (value: Record<string, unknown>, prefix: string): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value)) {
      const path = prefix === '' ? key : `${prefix}.${key}`;
      if (!skip.has(path)) out[key] = isPlainObject(child) ? prune(child, path) : child;
    }
    return out;
  };
  return prune(data, '');
}
