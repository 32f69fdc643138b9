import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { lognormalize } from '../__tests__/lognormalize';
import { buildEnvelope, type Envelope } from '../envelope';
import { EVENT_TYPES, type EventType } from '../events';
import { renderPayload } from './index';
import { FIELD_MAPPING_BEGIN, FIELD_MAPPING_END, fieldMappingMarkdown, withFieldMapping } from './field-mapping';
import { dataFieldsOf, type DataField } from './fields';
import { allSentinelColumns, sentinelColumns } from './sentinel';

// A value for every field, distinct per field, so a field landing in the wrong place is caught.
function sampleValue(field: DataField, index: number): unknown {
  switch (field.type) {
    case 'string':
      return `${field.path}-value ${index} a=b|c\\d`;
    case 'int':
      return 100 + index;
    case 'credits':
      return `${20 + index}.50`;
    case 'datetime':
      return new Date(Date.UTC(2026, 10, 1, 10, 0, index, 123)).toISOString();
  }
}

function setPath(data: Record<string, unknown>, path: string, value: unknown): void {
  const segments = path.split('.');
  let holder = data;
  for (const segment of segments.slice(0, -1)) {
    holder[segment] ??= {};
    holder = holder[segment] as Record<string, unknown>;
  }
  holder[segments[segments.length - 1]] = value;
}

function fullEnvelope(type: EventType): Envelope {
  const data: Record<string, unknown> = {};
  dataFieldsOf(type).forEach((field, i) => setPath(data, field.path, sampleValue(field, i)));
  return buildEnvelope({ deliveryId: 'whdel_full', eventId: 'event_full', type, createdAt: '2026-11-02T10:15:30.123Z', organizationId: 'org_full', data });
}

/** What the CEF text of a value must be: numbers in decimal, credits as given, timestamps in epoch ms. */
function expectedCefText(field: DataField, value: unknown): string {
  return field.type === 'datetime' ? String(Date.parse(value as string)) : String(value);
}

function expectedSentinelValue(field: DataField, value: unknown): unknown {
  return field.type === 'credits' ? Number(value) : value;
}

describe('every data field of every event type reaches every format', () => {
  const envelopes = EVENT_TYPES.map(fullEnvelope);
  const parsedCef = lognormalize(envelopes.map((e) => renderPayload('cef', e).body.toString('utf8')));

  it.each(EVENT_TYPES.map((type, i) => [type, i] as const))('%s: CEF (through lognormalizer)', (type, i) => {
    const extensions = parsedCef[i].Extensions;
    for (const field of dataFieldsOf(type)) {
      const value = field.path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], envelopes[i].data);
      expect({ field: field.path, value: extensions[field.cef.key] }).toEqual({ field: field.path, value: expectedCefText(field, value) });
      if (field.cef.label !== undefined) expect(extensions[`${field.cef.key}Label`]).toBe(field.cef.label);
    }
    expect(parsedCef[i].SignatureID).toBe(type);
  });

  it.each(EVENT_TYPES.map((type, i) => [type, i] as const))('%s: Sentinel by column, one type per column', (type, i) => {
    const [record] = JSON.parse(renderPayload('microsoft_sentinel', envelopes[i]).body.toString('utf8'));
    const columns = sentinelColumns(type);
    expect(Object.keys(record).sort()).toEqual(columns.map((c) => c.name).sort());
    for (const field of dataFieldsOf(type)) {
      const column = columns.find((c) => c.source === `data.${field.path}`)!;
      const value = field.path.split('.').reduce<unknown>((v, k) => (v as Record<string, unknown>)[k], envelopes[i].data);
      expect({ field: field.path, value: record[column.name] }).toEqual({ field: field.path, value: expectedSentinelValue(field, value) });
      if (column.type === 'int' || column.type === 'real') expect(typeof record[column.name]).toBe('number');
    }
    expect(record).not.toHaveProperty('Kind');
    for (const name of Object.keys(record)) expect(name).not.toMatch(/^Data_/);
  });

  it.each(EVENT_TYPES.map((type, i) => [type, i] as const))('%s: Splunk HEC in event', (type, i) => {
    const hec = JSON.parse(renderPayload('splunk_hec', envelopes[i]).body.toString('utf8'));
    expect(hec.event).toEqual(JSON.parse(JSON.stringify(envelopes[i])));
  });

  it('gives a CEF key the same label in every event type, and no key twice in one event', () => {
    const labelOf = new Map<string, string | undefined>([['cs1', 'deliveryId'], ['cs2', 'organizationId']]);
    parsedCef.forEach((cef) => {
      for (const [key, value] of Object.entries(cef.Extensions)) {
        const base = key.endsWith('Label') ? key.slice(0, -'Label'.length) : null;
        if (base === null) continue;
        if (!labelOf.has(base)) labelOf.set(base, value);
        expect({ key: base, label: value }).toEqual({ key: base, label: labelOf.get(base) });
      }
    });
    for (const type of EVENT_TYPES) {
      const keys = dataFieldsOf(type).map((f) => f.cef.key);
      expect(new Set(keys).size).toBe(keys.length);
    }
  });

  it('gives a Sentinel column one type across event types', () => {
    const typeOf = new Map<string, string>();
    for (const type of EVENT_TYPES) {
      for (const column of sentinelColumns(type)) {
        if (!typeOf.has(column.name)) typeOf.set(column.name, column.type);
        expect({ column: column.name, type: column.type }).toEqual({ column: column.name, type: typeOf.get(column.name) });
      }
    }
    expect(allSentinelColumns().map((c) => c.name)).toEqual([...typeOf.keys()]);
  });

  it('leaves out a null field rather than writing an empty value', () => {
    const envelope = buildEnvelope({
      deliveryId: 'whdel_x', eventId: 'event_x', type: 'spend.cap_reached', createdAt: 0, organizationId: 'org_x',
      data: { limit_id: 'lim_x', scope: 'organization', project_id: null, cap_credits: '100.00', spent_credits: '100.00' },
    });
    const [cef] = lognormalize([renderPayload('cef', envelope).body.toString('utf8')]);
    expect(cef.Extensions).not.toHaveProperty('cs3');
    expect(cef.Extensions.cfp2).toBe('100.00');
    const [record] = JSON.parse(renderPayload('microsoft_sentinel', envelope).body.toString('utf8'));
    expect(record.ProjectId).toBeNull();
    expect(record.CapCredits).toBe(100);
  });
});

describe('data outside the catalogue', () => {
  it('is kept: CEF svcX<Path> vendor keys, Sentinel PascalCase columns', () => {
    const envelope = buildEnvelope({
      deliveryId: 'whdel_x', eventId: 'event_x', type: 'finding.created', createdAt: 0, organizationId: 'org_x',
      data: { finding_id: 'fnd_x', location: { path: 'src/a.ts', line: 42 }, cwe: ['CWE-89'], extra_note: 'a=b' },
    });
    const [cef] = lognormalize([renderPayload('cef', envelope).body.toString('utf8')]);
    expect(cef.Extensions).toMatchObject({ cs5: 'fnd_x', svcXLocationPath: 'src/a.ts', svcXLocationLine: '42', svcXCwe: '["CWE-89"]', svcXExtraNote: 'a=b' });
    expect(cef.Extensions).not.toHaveProperty('filePath');
    const [record] = JSON.parse(renderPayload('microsoft_sentinel', envelope).body.toString('utf8'));
    expect(record).toMatchObject({ FindingId: 'fnd_x', LocationPath: 'src/a.ts', LocationLine: 42, Cwe: '["CWE-89"]', ExtraNote: 'a=b' });
  });
});

describe('docs/webhooks.md field mapping', () => {
  it('is the generated table (run scripts/generate-field-mapping.js when this fails)', () => {
    const readme = readFileSync(join(__dirname, '..', '..', '..', '..', 'docs', 'webhooks.md'), 'utf8');
    expect(readme).toContain(FIELD_MAPPING_BEGIN);
    expect(readme).toContain(FIELD_MAPPING_END);
    expect(withFieldMapping(readme)).toBe(readme);
  });

  it('lists every data field of every event type', () => {
    const table = fieldMappingMarkdown();
    for (const type of EVENT_TYPES) for (const field of dataFieldsOf(type)) expect(table).toContain(`| \`${type}\` | \`${field.path}\` |`);
    expect(withFieldMapping(`a\n${FIELD_MAPPING_BEGIN}\nSTALE-ROW\n${FIELD_MAPPING_END}\nb`)).not.toContain("STALE-ROW");
  });
});
