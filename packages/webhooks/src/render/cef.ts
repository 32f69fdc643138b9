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
// Header `<name>` is the event type's one-line description (events.ts), except that spend events say their scope
// ("Project spend ..." or "Organization spend ..."). Extension keys, each only when there is a value:
//   rt                 created_at in epoch milliseconds
//   externalId         event id
//   cat                event family: the part of the type before the dot (finding, assessment, ...)
//   msg                data.title, data.name or data.message when set, otherwise the <name> above
//   cs1 / cs1Label     delivery id / "deliveryId"
//   cs2 / cs2Label     organization id / "organizationId"
// then every `data` field of the event type at the key fields.ts assigns it (standard ArcSight keys where the
// dictionary has one, custom keys with one fixed label across all event types, `svc*` vendor keys otherwise).
// Integers and credits are written in decimal, timestamps as epoch milliseconds; null fields are left out. Data
// outside the catalogue goes to `svcX<PascalCase path>` vendor keys rather than being dropped.
import { describeEventType, isFindingEventType, type EventType } from '../events';
import { canonicalJson } from '../canonical-json';
import { creditsAsNumber, dataFieldsOf, extraData, pascalCaseOfPath, readDataPath, type DataField } from './fields';
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
 * | webhook.subscription_failing   | 5 | deliveries are failing; it will be disabled   |
 * | webhook.subscription_disabled  | 7 | events no longer reach that destination       |
 * | webhook.subscription_recovered | 2 | informational: delivering again               |
 * | webhook.delivery_exhausted     | 4 | one event did not reach its destination       |
 * | webhook.breaker_opened         | 5 | deliveries wait for a probe                   |
 * | webhook.breaker_closed         | 2 | informational: delivering again               |
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
  'webhook.subscription_failing': 5,
  'webhook.subscription_disabled': 7,
  'webhook.subscription_recovered': 2,
  'webhook.delivery_exhausted': 4,
  'webhook.breaker_opened': 5,
  'webhook.breaker_closed': 2,
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

/** The CEF Name of an event: its description, with spend events naming their scope. */
export function cefEventName(envelope: Envelope): string {
  if (envelope.type === 'spend.threshold_crossed' || envelope.type === 'spend.cap_reached') {
    const scope = envelope.data.scope === 'project' ? 'Project' : 'Organization';
    const action = envelope.type === 'spend.cap_reached' ? 'reached a configured cap' : 'crossed a configured alert threshold';
    return `${scope} spend ${action}`;
  }
  return describeEventType(envelope.type);
}

const CEF_KEY_LIMITS: Readonly<Record<string, number>> = Object.freeze({
  externalId: CEF_LIMITS.externalId,
  cs1: CEF_LIMITS.cs,
  cs2: CEF_LIMITS.cs,
  cs3: CEF_LIMITS.cs,
  cs4: CEF_LIMITS.cs,
  cs5: CEF_LIMITS.cs,
  cs6: CEF_LIMITS.cs,
});

/** A data field's value as CEF text, or undefined when the event does not carry it. */
export function cefFieldValue(field: DataField, value: unknown): string | undefined {
  switch (field.type) {
    case 'string':
      return typeof value === 'string' && value !== '' ? value : undefined;
    case 'int':
      return typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
    case 'credits': {
      const credits = creditsAsNumber(value);
      return credits === undefined ? undefined : String(value);
    }
    case 'datetime': {
      const ms = typeof value === 'string' ? Date.parse(value) : NaN;
      return Number.isFinite(ms) ? String(ms) : undefined;
    }
  }
}

/**
 * Data outside the catalogue (or not of its catalogued type) is not dropped: each leaf goes to a vendor key
 * `svcX<PascalCase path>` (alphanumerics only), in sorted key order; arrays and objects as canonical JSON.
 */
function addExtraFields(pairs: Array<[string, string]>, extra: Record<string, unknown>, path: string[] = []): void {
  for (const key of Object.keys(extra).sort()) {
    const value = extra[key];
    const childPath = [...path, key];
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype) {
      addExtraFields(pairs, value as Record<string, unknown>, childPath);
      continue;
    }
    const text = typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : value === null || value === undefined ? undefined : canonicalJson(value);
    const name = `svcX${pascalCaseOfPath(childPath.join('.')).replace(/[^A-Za-z0-9]/g, '')}`;
    if (text === undefined || text === '' || pairs.some(([k]) => k === name)) continue;
    pairs.push([name, truncateChars(text, CEF_LIMITS.msg)]);
  }
}

/** The extension as ordered [key, unescaped value] pairs, values already cut to their limits. */
export function cefExtensionPairs(envelope: Envelope): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  const add = (key: string, value: string | undefined, label?: string): void => {
    if (value === undefined) return;
    pairs.push([key, truncateChars(value, CEF_KEY_LIMITS[key] ?? CEF_LIMITS.msg)]);
    if (label !== undefined) pairs.push([`${key}Label`, truncateChars(label, CEF_LIMITS.label)]);
  };
  const fields = dataFieldsOf(envelope.type);
  const messageField = fields.find((field) => field.cef.key === 'msg' && cefFieldValue(field, readDataPath(envelope.data, field.path)) !== undefined);
  add('rt', String(Date.parse(envelope.created_at)));
  add('externalId', envelope.event_id);
  add('cat', envelope.type.split('.')[0]);
  add('msg', messageField ? String(readDataPath(envelope.data, messageField.path)) : cefEventName(envelope));
  add('cs1', envelope.id, 'deliveryId');
  add('cs2', envelope.organization_id, 'organizationId');
  const written = new Set<string>();
  for (const field of fields) {
    const value = cefFieldValue(field, readDataPath(envelope.data, field.path));
    if (value !== undefined) written.add(field.path);
    if (field.cef.key !== 'msg') add(field.cef.key, value, field.cef.label);
  }
  addExtraFields(pairs, extraData(envelope.data, written));
  return pairs;
}

/** The CEF header fields after Version, unescaped and cut: vendor, product, version, event class id, name, severity. */
export function cefHeaderFields(envelope: Envelope, options: ResolvedRenderOptions): string[] {
  return [
    truncateChars(options.vendor, CEF_LIMITS.header),
    truncateChars(options.product, CEF_LIMITS.header),
    truncateChars(options.version, CEF_LIMITS.header),
    truncateChars(envelope.type, CEF_LIMITS.header),
    truncateChars(cefEventName(envelope), CEF_LIMITS.name),
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
