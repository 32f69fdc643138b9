// payload_format `splunk_hec`: one event object for Splunk's `POST /services/collector/event`.
// `time` is epoch seconds with exactly three decimals (milliseconds), `event` is the envelope, `fields`
// (indexed fields) carries string values only, and `index` is present only when configured.
import { canonicalJsonBuffer, JsonNumberLiteral } from '../canonical-json';
import type { Envelope } from '../envelope';
import type { RenderedPayload, ResolvedRenderOptions } from './options';
import { JSON_CONTENT_TYPE } from './service';

/** Data keys copied into `fields` when their value is a non-empty string. */
export const SPLUNK_DATA_FIELDS = [
  'severity',
  'status',
  'previous_status',
  'project_id',
  'assessment_id',
  'finding_id',
  'report_id',
] as const;

/** Epoch seconds with millisecond decimals, written as `1700000000.123` (always three decimals). */
export function splunkTime(isoTimestamp: string): JsonNumberLiteral {
  const ms = Date.parse(isoTimestamp);
  if (!Number.isFinite(ms)) {
    throw new RangeError(`Invalid timestamp: ${isoTimestamp}`);
  }
  const seconds = Math.floor(ms / 1000);
  const millis = ms - seconds * 1000;
  return new JsonNumberLiteral(`${seconds}.${String(millis).padStart(3, '0')}`);
}

/** The indexed `fields`: string values only. */
export function splunkFields(envelope: Envelope): Record<string, string> {
  const fields: Record<string, string> = {
    event_type: envelope.type,
    event_id: envelope.event_id,
    delivery_id: envelope.id,
    organization_id: envelope.organization_id,
  };
  for (const key of SPLUNK_DATA_FIELDS) {
    const value = envelope.data[key];
    if (typeof value === 'string' && value !== '') {
      fields[key] = value;
    }
  }
  return fields;
}

export function buildSplunkHecEvent(envelope: Envelope, options: ResolvedRenderOptions): Record<string, unknown> {
  const event: Record<string, unknown> = {
    time: splunkTime(envelope.created_at),
    host: options.host,
    source: options.source,
    sourcetype: options.sourcetype,
    event: envelope,
    fields: splunkFields(envelope),
  };
  if (options.splunkIndex !== null) {
    event.index = options.splunkIndex;
  }
  return event;
}

export function renderSplunkHec(envelope: Envelope, options: ResolvedRenderOptions): RenderedPayload {
  return { body: canonicalJsonBuffer(buildSplunkHecEvent(envelope, options)), contentType: JSON_CONTENT_TYPE };
}
