// payload_format `microsoft_sentinel`: the body of an Azure Monitor Logs Ingestion API call (a JSON array of
// records) holding ONE flat record for a custom table:
//   TimeGenerated   ISO 8601 UTC, from created_at
//   DeliveryId, EventId, EventType, OrganizationId   the envelope's id, event_id, type, organization_id
//   Data_<key>[_<key>...]   every leaf of `data`, nested object keys joined with `_`
// Values: strings, numbers, booleans and null as they are; arrays as their canonical JSON text; empty objects
// produce no column. No string value exceeds SENTINEL_MAX_VALUE_BYTES of UTF-8 (cut at a character boundary).
// Column names match ^[A-Za-z][A-Za-z0-9_]{0,44}$: characters outside [A-Za-z0-9_] become `_`, a name not starting
// with a letter gets a `C` in front, names are cut to 45 characters, and a name already taken (compared without
// case, reserved names included) gets the first free suffix `_2`, `_3`, ... Leaves are visited in sorted key
// order, so the same data always yields the same columns.
import { canonicalJson, canonicalJsonBuffer } from '../canonical-json';
import type { Envelope } from '../envelope';
import { truncateUtf8 } from '../text';
import type { RenderedPayload } from './options';
import { JSON_CONTENT_TYPE } from './service';

export const SENTINEL_COLUMN_NAME = /^[A-Za-z][A-Za-z0-9_]{0,44}$/;
export const SENTINEL_MAX_COLUMN_NAME_LENGTH = 45;
export const SENTINEL_MAX_VALUE_BYTES = 64 * 1024;
/** Column names Log Analytics reserves or that this record sets itself; data columns never take them. */
export const SENTINEL_RESERVED_COLUMNS = [
  'TimeGenerated',
  'TenantId',
  'Type',
  'SourceSystem',
  'MG',
  'ManagementGroupName',
  'Computer',
  'RawData',
] as const;

export type SentinelValue = string | number | boolean | null;
export type SentinelRecord = Record<string, SentinelValue>;

interface Leaf {
  path: string[];
  value: SentinelValue;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function collectLeaves(path: string[], value: unknown, out: Leaf[]): void {
  if (value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    collectLeaves(path, (value as { toJSON: () => unknown }).toJSON(), out);
    return;
  }
  if (value === undefined) return;
  if (value === null || typeof value === 'string' || typeof value === 'boolean') {
    out.push({ path, value });
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError(`Non-finite number at ${path.join('.')}`);
    out.push({ path, value });
  } else if (Array.isArray(value)) {
    out.push({ path, value: canonicalJson(value) });
  } else if (isPlainObject(value)) {
    for (const key of Object.keys(value).sort()) {
      collectLeaves([...path, key], value[key], out);
    }
  } else {
    throw new TypeError(`Unsupported ${typeof value} at ${path.join('.')}`);
  }
}

/** Turns a key path into a valid column name (before collision handling). */
export function sanitizeColumnName(path: readonly string[]): string {
  let name = path.map((segment) => segment.replace(/[^A-Za-z0-9_]/g, '_')).join('_');
  if (!/^[A-Za-z]/.test(name)) name = `C${name}`;
  return name.slice(0, SENTINEL_MAX_COLUMN_NAME_LENGTH);
}

/** Returns `name`, or the first `<name cut>_<n>` (n = 2, 3, ...) not yet in `taken` (lowercased); records it. */
export function claimColumnName(name: string, taken: Set<string>): string {
  let candidate = name;
  for (let n = 2; taken.has(candidate.toLowerCase()); n += 1) {
    const suffix = `_${n}`;
    candidate = name.slice(0, SENTINEL_MAX_COLUMN_NAME_LENGTH - suffix.length) + suffix;
  }
  taken.add(candidate.toLowerCase());
  return candidate;
}

function capValue(value: SentinelValue): SentinelValue {
  return typeof value === 'string' ? truncateUtf8(value, SENTINEL_MAX_VALUE_BYTES) : value;
}

/** The flat record (before wrapping in the request array). */
export function buildSentinelRecord(envelope: Envelope): SentinelRecord {
  const taken = new Set<string>(SENTINEL_RESERVED_COLUMNS.map((name) => name.toLowerCase()));
  const record: SentinelRecord = {
    TimeGenerated: new Date(Date.parse(envelope.created_at)).toISOString(),
  };
  const fixed: Array<[string, string]> = [
    ['DeliveryId', envelope.id],
    ['EventId', envelope.event_id],
    ['EventType', envelope.type],
    ['OrganizationId', envelope.organization_id],
  ];
  for (const [name, value] of fixed) {
    record[claimColumnName(name, taken)] = capValue(value);
  }
  const leaves: Leaf[] = [];
  collectLeaves(['Data'], envelope.data, leaves);
  for (const leaf of leaves) {
    record[claimColumnName(sanitizeColumnName(leaf.path), taken)] = capValue(leaf.value);
  }
  return record;
}

export function renderSentinel(envelope: Envelope): RenderedPayload {
  return { body: canonicalJsonBuffer([buildSentinelRecord(envelope)]), contentType: JSON_CONTENT_TYPE };
}
