// payload_format `microsoft_sentinel`: the body of an Azure Monitor Logs Ingestion API call (a JSON array of
// records) holding ONE flat record for a custom table. One naming style (PascalCase) and one type per column:
//   TimeGenerated (datetime), DeliveryId, EventId, EventType, OrganizationId (string)
//   then every `data` field of the event type (fields.ts) as a PascalCase column: `findings_by_severity.critical`
//   -> FindingsBySeverityCritical; integers as `int`, credits as `real` numbers, timestamps as ISO 8601 `datetime`.
//   `data.kind` is not repeated (it is EventType). sentinelColumns(type) lists the columns of an event type.
// Data keys outside the catalogue still get a column, named by the same rule from their path; arrays become their
// canonical JSON text, empty objects produce no column. No string value exceeds SENTINEL_MAX_VALUE_BYTES of UTF-8.
// Column names match ^[A-Za-z][A-Za-z0-9_]{0,44}$ (other characters become `_`, a `C` is put in front of a name
// not starting with a letter, cut to 45); a name already taken (without case, reserved names included) gets the
// first free suffix `_2`, `_3`, ... Leaves are visited in sorted key order, so the same data yields the same columns.
import { canonicalJson, canonicalJsonBuffer } from '../canonical-json';
import type { Envelope } from '../envelope';
import { truncateUtf8 } from '../text';
import type { RenderedPayload } from './options';
import { JSON_CONTENT_TYPE } from './service';
import { EVENT_TYPES, type EventType } from '../events';
import { creditsAsNumber, dataFieldsOf, extraData, pascalCaseOfPath, readDataPath, type FieldType } from './fields';

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
  let name = path.map((segment) => pascalCaseOfPath(segment.replace(/[^A-Za-z0-9_]/g, '_'))).join('');
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

/** Column types of a data collection rule's stream declaration. */
export type SentinelColumnType = 'string' | 'int' | 'real' | 'datetime';

export interface SentinelColumn {
  name: string;
  type: SentinelColumnType;
  /** What fills it: an envelope key, or `data.<path>`. */
  source: string;
}

const SENTINEL_TYPE_OF: Readonly<Record<FieldType, SentinelColumnType>> = {
  string: 'string',
  int: 'int',
  credits: 'real',
  datetime: 'datetime',
};

const ENVELOPE_COLUMNS: readonly SentinelColumn[] = [
  { name: 'TimeGenerated', type: 'datetime', source: 'created_at' },
  { name: 'DeliveryId', type: 'string', source: 'id' },
  { name: 'EventId', type: 'string', source: 'event_id' },
  { name: 'EventType', type: 'string', source: 'type' },
  { name: 'OrganizationId', type: 'string', source: 'organization_id' },
];

/** The columns of an event type's record, in order, with their declared type (for a DCR stream declaration). */
export function sentinelColumns(type: EventType): SentinelColumn[] {
  const data = dataFieldsOf(type).map((field): SentinelColumn => ({
    name: pascalCaseOfPath(field.path),
    type: SENTINEL_TYPE_OF[field.type],
    source: `data.${field.path}`,
  }));
  return [...ENVELOPE_COLUMNS, ...data];
}

/** Every column any event type can produce, each once, with its one type. */
export function allSentinelColumns(): SentinelColumn[] {
  const byName = new Map<string, SentinelColumn>();
  for (const type of EVENT_TYPES) {
    for (const column of sentinelColumns(type)) if (!byName.has(column.name)) byName.set(column.name, column);
  }
  return [...byName.values()];
}

function typedValue(type: SentinelColumnType, value: unknown): SentinelValue | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  // A value of another type than the catalogue's is left to the generic columns rather than lost.
  switch (type) {
    case 'real':
      return creditsAsNumber(value);
    case 'int':
      return typeof value === 'number' && Number.isInteger(value) ? value : undefined;
    case 'datetime': {
      const ms = typeof value === 'string' ? Date.parse(value) : NaN;
      return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
    }
    case 'string':
      return typeof value === 'string' ? value : undefined;
  }
}

function envelopeValue(envelope: Envelope, source: string): unknown {
  return (envelope as unknown as Record<string, unknown>)[source];
}

/** The flat record (before wrapping in the request array). */
export function buildSentinelRecord(envelope: Envelope): SentinelRecord {
  const taken = new Set<string>(SENTINEL_RESERVED_COLUMNS.map((name) => name.toLowerCase()));
  const record: SentinelRecord = {};
  const written = new Set<string>();
  for (const column of sentinelColumns(envelope.type)) {
    taken.add(column.name.toLowerCase());
    const raw = column.source.startsWith('data.')
      ? readDataPath(envelope.data, column.source.slice('data.'.length))
      : envelopeValue(envelope, column.source);
    const value = typedValue(column.type, raw);
    if (value === undefined) continue;
    record[column.name] = capValue(value);
    if (column.source.startsWith('data.')) written.add(column.source.slice('data.'.length));
  }
  const leaves: Leaf[] = [];
  collectLeaves([], extraData(envelope.data, written), leaves);
  for (const leaf of leaves) {
    record[claimColumnName(sanitizeColumnName(leaf.path), taken)] = capValue(leaf.value);
  }
  return record;
}

export function renderSentinel(envelope: Envelope): RenderedPayload {
  return { body: canonicalJsonBuffer([buildSentinelRecord(envelope)]), contentType: JSON_CONTENT_TYPE };
}
