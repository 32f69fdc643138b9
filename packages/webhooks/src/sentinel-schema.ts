// The Log Analytics table a microsoft_sentinel subscription fills: the columns are found by rendering one example
// event of each subscribed type with the Sentinel renderer itself (never listed by hand), typed from the values
// the renderer produces. Also the DCR stream declaration and data flow an engineer pastes into a data collection rule.
import { buildEnvelope, type Envelope } from './envelope';
import { EVENT_TYPES, type EventType } from './events';
import { findingEventData } from '@svc/domain';
import { buildSentinelRecord, sentinelColumns as declaredSentinelColumns, type SentinelValue } from './render/sentinel';

/** Log Analytics column types the service's records use. */
export type LogAnalyticsType = 'datetime' | 'string' | 'long' | 'real' | 'boolean';

export interface SentinelColumn {
  name: string;
  type: LogAnalyticsType;
}

const EXAMPLE_FINDING = findingEventData({
  id: 'fnd_example',
  assessmentId: 'asm_example',
  projectId: 'prj_example',
  title: 'SQL injection in /login',
  severity: 'high',
  status: 'open',
  location: 'src/auth/login.ts:42',
  fingerprint: 'fp_example',
});

const OPERATIONAL_EXAMPLE = {
  subscription_id: 'whsub_example',
  subscription_kind: 'webhook',
  level: 'organization',
  project_id: 'prj_example',
  assessment_id: 'asm_example',
  url_host: 'siem.example.com',
  last_error: 'HTTP 503',
};

/**
 * One `data` per event type with every field the publishers set, each with a non-null value of its type (the
 * publishers build these shapes: finding events through findingEventData, the others in their services).
 */
export const EXAMPLE_EVENT_DATA: Readonly<Record<EventType, Record<string, unknown>>> = {
  'assessment.completed': {
    assessment_id: 'asm_example',
    project_id: 'prj_example',
    name: 'Quarterly assessment',
    status: 'completed',
    findings_count: 3,
    findings_by_severity: { critical: 0, high: 1, medium: 1, low: 1, info: 0 },
    started_at: '2026-11-02T09:00:00.000Z',
    completed_at: '2026-11-02T10:00:00.000Z',
  },
  'finding.created': EXAMPLE_FINDING,
  'finding.confirmed': { ...EXAMPLE_FINDING, status: 'confirmed' },
  'finding.status_changed': { ...EXAMPLE_FINDING, status: 'fixed', previous_status: 'open' },
  'finding.sla_breached': { ...EXAMPLE_FINDING, sla_days: 30, due_at: '2026-12-02T10:00:00.000Z' },
  'report.ready': {
    report_id: 'rpt_example',
    assessment_id: 'asm_example',
    project_id: 'prj_example',
    title: 'Assessment report',
    size_bytes: 48213,
    ready_at: '2026-11-02T10:05:00.000Z',
  },
  'fix_verify.completed': {
    fix_verification_id: 'fxv_example',
    finding_id: 'fnd_example',
    assessment_id: 'asm_example',
    project_id: 'prj_example',
    result: 'fixed',
    finding_status: 'fixed',
  },
  'pr_review.completed': {
    pr_review_id: 'prr_example',
    project_id: 'prj_example',
    repository: 'acme/web',
    pr_number: 42,
    verdict: 'approved',
    findings_count: 0,
    url: 'https://github.com/acme/web/pull/42',
  },
  'spend.threshold_crossed': {
    limit_id: 'lim_example',
    scope: 'project',
    project_id: 'prj_example',
    threshold_credits: '500.00',
    spent_credits: '512.25',
  },
  'spend.cap_reached': {
    limit_id: 'lim_example',
    scope: 'project',
    project_id: 'prj_example',
    cap_credits: '1000.00',
    spent_credits: '1000.00',
  },
  'monitoring.regression': {
    finding_id: 'fnd_example',
    assessment_id: 'asm_example',
    project_id: 'prj_example',
    title: 'SQL injection in /login',
    severity: 'high',
    location: 'src/auth/login.ts:42',
    previous_fixed_at: '2026-10-01T00:00:00.000Z',
  },
  'webhook.test': { subscription_id: 'whsub_example', message: 'This is a test delivery.' },
  'webhook.subscription_failing': { ...OPERATIONAL_EXAMPLE, consecutive_failures: 3, first_failure_at: '2026-11-01T09:00:00.000Z' },
  'webhook.subscription_disabled': { ...OPERATIONAL_EXAMPLE, disabled_reason: 'endpoint returned 410 Gone', consecutive_failures: 0 },
  'webhook.subscription_recovered': OPERATIONAL_EXAMPLE,
  'webhook.delivery_exhausted': {
    ...OPERATIONAL_EXAMPLE,
    exhausted_delivery_id: 'whdel_exhausted',
    exhausted_event_id: 'event_exhausted',
    exhausted_event_type: 'finding.created',
    attempts: 8,
  },
  'webhook.breaker_opened': { ...OPERATIONAL_EXAMPLE, probe_at: '2026-11-01T10:01:00.000Z' },
  'webhook.breaker_closed': OPERATIONAL_EXAMPLE,
};

export function exampleEnvelope(type: EventType): Envelope {
  return buildEnvelope({
    deliveryId: 'whdel_example',
    eventId: 'event_example',
    type,
    createdAt: '2026-11-02T10:15:30.123Z',
    organizationId: 'org_example',
    data: EXAMPLE_EVENT_DATA[type],
  });
}

/** Credits are decimals even when an example happens to be whole: the renderer's declared column type decides. */
function declaredReal(type: EventType): Set<string> {
  return new Set(declaredSentinelColumns(type).filter((c) => c.type === 'real').map((c) => c.name));
}

function columnType(name: string, value: SentinelValue, reals: Set<string>): LogAnalyticsType {
  if (name === 'TimeGenerated') return 'datetime';
  if (reals.has(name)) return 'real';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number') return Number.isInteger(value) ? 'long' : 'real';
  return 'string';
}

/** The columns of the records of these event types, in first-seen order (every type's columns, merged). */
export function sentinelColumns(types: readonly EventType[]): SentinelColumn[] {
  const columns = new Map<string, SentinelColumn>();
  for (const type of EVENT_TYPES.filter((t) => types.includes(t))) {
    const reals = declaredReal(type);
    for (const [name, value] of Object.entries(buildSentinelRecord(exampleEnvelope(type)))) {
      if (!columns.has(name)) columns.set(name, { name, type: columnType(name, value, reals) });
    }
  }
  return [...columns.values()];
}

/** A DCR stream name from the Sentinel URL's `streams/<name>` segment, else one made of the table. */
export function sentinelStreamName(url: string): string {
  const match = /\/streams\/([^/?#]+)/.exec(url);
  return match ? decodeURIComponent(match[1]) : 'Custom-SecurityAssessmentService';
}

export interface SentinelSchema {
  columns: SentinelColumn[];
  stream_declarations: Record<string, { columns: SentinelColumn[] }>;
  data_flows: Array<{ streams: string[]; destinations: string[]; transformKql: string; outputStream: string }>;
}

/** The table columns and the DCR fragments (streamDeclarations, dataFlows) for a subscription. */
export function sentinelSchema(types: readonly EventType[], url: string): SentinelSchema {
  const columns = sentinelColumns(types);
  const stream = sentinelStreamName(url);
  const table = stream.startsWith('Custom-') ? stream.slice('Custom-'.length) : stream;
  return {
    columns,
    stream_declarations: { [stream]: { columns } },
    data_flows: [
      {
        streams: [stream],
        destinations: ['logAnalyticsWorkspace'],
        transformKql: 'source',
        outputStream: `Custom-${table.endsWith('_CL') ? table : `${table}_CL`}`,
      },
    ],
  };
}
