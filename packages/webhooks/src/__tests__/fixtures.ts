// Shared test data: one realistic envelope per event type, and envelopes full of awkward values.
import { buildEnvelope, type Envelope } from '../envelope';
import { EVENT_TYPES, type EventType } from '../events';

export const CREATED_AT = '2026-11-02T10:15:30.123Z';
export const CREATED_AT_MS = Date.parse(CREATED_AT);

const OPERATIONAL = {
  subscription_id: 'whsub_01',
  subscription_kind: 'webhook',
  level: 'organization',
  project_id: null,
  assessment_id: null,
  url_host: 'siem.example.com',
  last_error: null,
};

const SAMPLE_DATA: Record<EventType, Record<string, unknown>> = {
  'assessment.completed': { assessment_id: 'asm_01', project_id: 'prj_01', findings_count: 12, duration_seconds: 842.5 },
  'finding.created': {
    finding_id: 'fnd_01',
    assessment_id: 'asm_01',
    project_id: 'prj_01',
    severity: 'critical',
    status: 'open',
    title: 'SQL injection in /login',
    cwe: ['CWE-89'],
    location: { path: 'src/auth/login.ts', line: 42 },
  },
  'finding.confirmed': { finding_id: 'fnd_02', assessment_id: 'asm_01', project_id: 'prj_01', severity: 'high', status: 'confirmed', title: 'Reflected XSS' },
  'finding.status_changed': {
    finding_id: 'fnd_03',
    assessment_id: 'asm_01',
    project_id: 'prj_01',
    severity: 'medium',
    status: 'fixed',
    previous_status: 'open',
    title: 'Open redirect',
  },
  'finding.sla_breached': { finding_id: 'fnd_04', project_id: 'prj_02', severity: 'low', status: 'open', sla_days: 30, title: 'Weak TLS' },
  'report.ready': { report_id: 'rpt_01', assessment_id: 'asm_01', project_id: 'prj_01', format: 'pdf' },
  'fix_verify.completed': { finding_id: 'fnd_05', assessment_id: 'asm_02', result: 'verified_fixed' },
  'pr_review.completed': { project_id: 'prj_01', pull_request: 1234, findings_count: 0 },
  'spend.threshold_crossed': { threshold_usd: 500, spend_usd: 512.25, period: '2026-11' },
  'spend.cap_reached': { cap_usd: 1000, spend_usd: 1000, scope: 'project', project_id: 'prj_03' },
  'monitoring.regression': { finding_id: 'fnd_06', project_id: 'prj_01', severity: 'info', status: 'regressed' },
  'webhook.test': { message: 'This is a test delivery' },
  'webhook.subscription_failing': { ...OPERATIONAL, last_error: 'HTTP 503', consecutive_failures: 3, first_failure_at: '2026-11-02T09:15:30.123Z' },
  'webhook.subscription_disabled': { ...OPERATIONAL, last_error: 'HTTP 410', disabled_reason: 'endpoint returned 410 Gone', consecutive_failures: 0 },
  'webhook.subscription_recovered': OPERATIONAL,
  'webhook.delivery_exhausted': {
    ...OPERATIONAL,
    last_error: 'timeout: no response in 10000 ms',
    exhausted_delivery_id: 'whdel_01EXHAUSTED',
    exhausted_event_id: 'event_01EXHAUSTED',
    exhausted_event_type: 'finding.created',
    attempts: 8,
  },
  'webhook.breaker_opened': { ...OPERATIONAL, last_error: 'timeout', probe_at: '2026-11-02T10:16:30.123Z' },
  'webhook.breaker_closed': OPERATIONAL,
};

export function sampleEnvelope(type: EventType, overrides: Record<string, unknown> = {}): Envelope {
  const index = EVENT_TYPES.indexOf(type);
  return buildEnvelope({
    deliveryId: `whdel_01JC${String(index).padStart(2, '0')}DELIVERY`,
    eventId: `event_01JC${String(index).padStart(2, '0')}EVENT`,
    type,
    createdAt: CREATED_AT,
    organizationId: 'org_01JCORGANIZATION',
    data: { ...SAMPLE_DATA[type], ...overrides },
  });
}

export function allSampleEnvelopes(): Envelope[] {
  return EVENT_TYPES.map((type) => sampleEnvelope(type));
}

/** Values that break naive escaping. */
export const NASTY_STRINGS: readonly string[] = [
  'back\\slash',
  'ends with backslash\\',
  'equals=sign and key=value',
  'pipe | inside',
  'line1\nline2\r\nline3\rline4',
  '\\n is not a newline, \\= is not an equal sign',
  'unicode: héllo ✓ 日本語 😀 \u00a0nbsp',
  '  leading and trailing spaces  ',
  'tab\there',
  'looks=like cs1=injected cs1Label=evil',
  'CEF:0|fake|header|1|x|y|10|',
  '"quotes" and \'single\' and {json: true}',
];
