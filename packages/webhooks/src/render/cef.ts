// payload_format `cef`: one Common Event Format line without syslog prefix, `text/plain; charset=utf-8`:
//   CEF:0|<vendor>|<product>|<version>|<event type>|<name>|<severity>|<extension>
//
// Escaping (ArcSight CEF rules):
// - header fields: `\` -> `\\`, `|` -> `\|`; a line break (CR, LF) becomes a space (headers are single-line);
// - extension values: `\` -> `\\`, `=` -> `\=`, CR -> `\r`, LF -> `\n`; `|` is left as is;
// - everywhere: other control characters (U+0000-U+0008, U+000B, U+000C, U+000E-U+001F, U+007F) become U+FFFD.
// Lengths (UTF-16 code units, as CEF consumers count them; cut before escaping, never inside a surrogate pair):
// header fields 1023 (name 512), externalId 40, msg 1023, cat 1023, flexString1/2 1023, csN 4000, csNLabel 1023.
//
// Header `<name>` is the event type's one-line description (events.ts). Extension keys, in this order, each only
// when there is a value:
//   rt                 created_at in epoch milliseconds
//   externalId         event id
//   cat                event family: the part of the type before the dot (finding, assessment, ...)
//   msg                data.title when it is a non-empty string, otherwise the event description
//   cs1 / cs1Label     delivery id / "deliveryId"
//   cs2 / cs2Label     organization id / "organizationId"
//   cs3 / cs3Label     data.project_id / "projectId"
//   cs4 / cs4Label     data.assessment_id / "assessmentId"
//   cs5 / cs5Label     data.finding_id / "findingId"
//   cs6 / cs6Label     data.status / "findingStatus" when the event carries a finding_id (the new status for
//                      finding.status_changed), otherwise "<family>Status" (e.g. "assessmentStatus")
//   flexString1 / flexString1Label   data.previous_status / "previousStatus"
//   flexString2 / flexString2Label   data.severity / "findingSeverity" (or "<family>Severity", as cs6)
// Data values that are numbers are written in decimal; other non-string values are left out.
import { describeEventType, isFindingEventType, type EventType } from '../events';
import type { Envelope } from '../envelope';
import { truncateChars } from '../text';
import type { RenderedPayload, ResolvedRenderOptions } from './options';

export const CEF_CONTENT_TYPE = 'text/plain; charset=utf-8';

/** CEF severity of a finding event, by the finding's severity. */
export const CEF_FINDING_SEVERITY: Readonly<Record<string, number>> = Object.freeze({
  critical: 10,
  high: 8,
  medium: 5,
  low: 3,
  info: 1,
});

/** Severity of a finding event whose data.severity is missing or unknown. */
export const CEF_UNKNOWN_FINDING_SEVERITY = 5;

/**
 * CEF severity (0-10) of the events that are not about one finding: a fixed value per event type.
 *
 * | event type              | severity | why                                              |
 * |-------------------------|----------|--------------------------------------------------|
 * | assessment.completed    | 3        | informational milestone, worth a look            |
 * | report.ready            | 1        | informational                                    |
 * | fix_verify.completed    | 3        | informational milestone                          |
 * | pr_review.completed     | 3        | informational milestone                          |
 * | spend.threshold_crossed | 5        | needs attention soon                             |
 * | spend.cap_reached       | 7        | work may stop until someone acts                 |
 * | monitoring.regression   | 8        | a fixed vulnerability is back                    |
 * | webhook.test            | 0        | synthetic                                        |
 */
export const CEF_EVENT_SEVERITY: Readonly<Record<Exclude<EventType, `finding.${string}`>, number>> = Object.freeze({
  'assessment.completed': 3,
  'report.ready': 1,
  'fix_verify.completed': 3,
  'pr_review.completed': 3,
  'spend.threshold_crossed': 5,
  'spend.cap_reached': 7,
  'monitoring.regression': 8,
  'webhook.test': 0,
});

export const CEF_LIMITS = Object.freeze({
  header: 1023,
  name: 512,
  externalId: 40,
  msg: 1023,
  cat: 1023,
  flexString: 1023,
  cs: 4000,
  label: 1023,
});

// eslint-disable-next-line no-control-regex
const OTHER_CONTROL_CHARS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;

/** Escapes a header field: `\` and `|`; line breaks become spaces. */
export function escapeCefHeader(value: string): string {
  return value
    .replace(OTHER_CONTROL_CHARS, '\ufffd')
    .replace(/\r\n|\r|\n/g, ' ')
    .replace(/\\/g, '\\\\')
    .replace(/\|/g, '\\|');
}

/** Escapes an extension value: `\`, `=`, CR as `\r`, LF as `\n`; `|` stays. */
export function escapeCefExtensionValue(value: string): string {
  return value
    .replace(OTHER_CONTROL_CHARS, '\ufffd')
    .replace(/\\/g, '\\\\')
    .replace(/=/g, '\\=')
    .replace(/\r/g, '\\r')
    .replace(/\n/g, '\\n');
}

/** CEF severity 0-10 of an envelope (see the tables above). */
export function cefSeverity(envelope: Envelope): number {
  if (isFindingEventType(envelope.type)) {
    const severity = envelope.data.severity;
    return typeof severity === 'string' && Object.hasOwn(CEF_FINDING_SEVERITY, severity)
      ? CEF_FINDING_SEVERITY[severity]
      : CEF_UNKNOWN_FINDING_SEVERITY;
  }
  return CEF_EVENT_SEVERITY[envelope.type as keyof typeof CEF_EVENT_SEVERITY];
}

function dataText(envelope: Envelope, key: string): string | undefined {
  const value = envelope.data[key];
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

/**
 * What `status` and `severity` in data describe: a finding when the event carries one (finding events, monitoring
 * regressions, fix verifications), otherwise the event's own family (e.g. `assessmentStatus`).
 */
function subjectOf(envelope: Envelope): string {
  return dataText(envelope, 'finding_id') !== undefined ? 'finding' : envelope.type.split('.')[0].replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());
}

/** The extension as ordered [key, unescaped value] pairs, values already cut to their limits. */
export function cefExtensionPairs(envelope: Envelope): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  const add = (key: string, value: string | undefined, limit: number): void => {
    if (value !== undefined) pairs.push([key, truncateChars(value, limit)]);
  };
  const addLabelled = (key: string, label: string, value: string | undefined, limit: number): void => {
    if (value === undefined) return;
    add(key, value, limit);
    add(`${key}Label`, label, CEF_LIMITS.label);
  };
  const description = describeEventType(envelope.type);
  add('rt', String(Date.parse(envelope.created_at)), CEF_LIMITS.msg);
  add('externalId', envelope.event_id, CEF_LIMITS.externalId);
  add('cat', envelope.type.split('.')[0], CEF_LIMITS.cat);
  const title = envelope.data.title;
  add('msg', typeof title === 'string' && title !== '' ? title : description, CEF_LIMITS.msg);
  addLabelled('cs1', 'deliveryId', envelope.id, CEF_LIMITS.cs);
  addLabelled('cs2', 'organizationId', envelope.organization_id, CEF_LIMITS.cs);
  addLabelled('cs3', 'projectId', dataText(envelope, 'project_id'), CEF_LIMITS.cs);
  addLabelled('cs4', 'assessmentId', dataText(envelope, 'assessment_id'), CEF_LIMITS.cs);
  addLabelled('cs5', 'findingId', dataText(envelope, 'finding_id'), CEF_LIMITS.cs);
  const subject = subjectOf(envelope);
  addLabelled('cs6', `${subject}Status`, dataText(envelope, 'status'), CEF_LIMITS.cs);
  addLabelled('flexString1', 'previousStatus', dataText(envelope, 'previous_status'), CEF_LIMITS.flexString);
  addLabelled('flexString2', `${subject}Severity`, dataText(envelope, 'severity'), CEF_LIMITS.flexString);
  return pairs;
}

/** The CEF header fields after Version, unescaped and cut: vendor, product, version, event class id, name, severity. */
export function cefHeaderFields(envelope: Envelope, options: ResolvedRenderOptions): string[] {
  return [
    truncateChars(options.vendor, CEF_LIMITS.header),
    truncateChars(options.product, CEF_LIMITS.header),
    truncateChars(options.version, CEF_LIMITS.header),
    truncateChars(envelope.type, CEF_LIMITS.header),
    truncateChars(describeEventType(envelope.type), CEF_LIMITS.name),
    String(cefSeverity(envelope)),
  ];
}

/** The CEF line (no trailing newline). */
export function buildCefLine(envelope: Envelope, options: ResolvedRenderOptions): string {
  const header = cefHeaderFields(envelope, options).map(escapeCefHeader);
  const extension = cefExtensionPairs(envelope)
    .map(([key, value]) => `${key}=${escapeCefExtensionValue(value)}`)
    .join(' ');
  return `CEF:0|${header.join('|')}|${extension}`;
}

export function renderCef(envelope: Envelope, options: ResolvedRenderOptions): RenderedPayload {
  return { body: Buffer.from(buildCefLine(envelope, options), 'utf8'), contentType: CEF_CONTENT_TYPE };
}
