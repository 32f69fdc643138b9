import { allSampleEnvelopes, CREATED_AT, NASTY_STRINGS, sampleEnvelope } from '../__tests__/fixtures';
import type { Envelope } from '../envelope';
import { renderPayload } from './index';
import {
  buildSentinelRecord,
  claimColumnName,
  sanitizeColumnName,
  SENTINEL_COLUMN_NAME,
  SENTINEL_MAX_VALUE_BYTES,
} from './sentinel';

const COLUMN = /^[A-Za-z][A-Za-z0-9_]{0,44}$/;

function render(envelope: Envelope) {
  const rendered = renderPayload('microsoft_sentinel', envelope);
  const parsed = JSON.parse(rendered.body.toString('utf8'));
  return { ...rendered, parsed, record: parsed[0] as Record<string, unknown> };
}

function expectFlatValidRecord(record: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(record)) {
    expect(name).toMatch(COLUMN);
    expect(value === null || ['string', 'number', 'boolean'].includes(typeof value)).toBe(true);
    if (typeof value === 'string') expect(Buffer.byteLength(value, 'utf8')).toBeLessThanOrEqual(64 * 1024);
  }
  const lower = Object.keys(record).map((k) => k.toLowerCase());
  expect(new Set(lower).size).toBe(lower.length);
}

describe('microsoft_sentinel format', () => {
  it('is a JSON array with one record, application/json', () => {
    for (const envelope of allSampleEnvelopes()) {
      const { parsed, contentType } = render(envelope);
      expect(contentType).toBe('application/json');
      expect(Array.isArray(parsed)).toBe(true);
      expect(parsed).toHaveLength(1);
      expectFlatValidRecord(parsed[0]);
    }
  });

  it('has TimeGenerated in ISO 8601 UTC and the envelope identifiers', () => {
    const envelope = sampleEnvelope('finding.created');
    const { record } = render(envelope);
    expect(record.TimeGenerated).toBe(CREATED_AT);
    expect(record.TimeGenerated).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(record).toMatchObject({
      DeliveryId: envelope.id,
      EventId: envelope.event_id,
      EventType: 'finding.created',
      OrganizationId: envelope.organization_id,
      Severity: 'critical',
      Status: 'open',
    });
  });

  it('flattens nested objects into PascalCase and writes arrays as JSON strings', () => {
    const { record } = render(sampleEnvelope('finding.created'));
    expect(record).not.toHaveProperty('Kind');
    expect(record.LocationPath).toBe('src/auth/login.ts');
    expect(record.LocationLine).toBe(42);
    expect(record).not.toHaveProperty('Location');
    expect(record.Cwe).toBe('["CWE-89"]');
    const deep = render(sampleEnvelope('webhook.test', { a: { b: { c: { d: true } } }, list: [1, { x: 'y' }, [2]], empty: {}, nothing: null }));
    expect(deep.record.ABCD).toBe(true);
    expect(deep.record.List).toBe('[1,{"x":"y"},[2]]');
    expect(JSON.parse(deep.record.List as string)).toEqual([1, { x: 'y' }, [2]]);
    expect(deep.record.Nothing).toBeNull();
    expect(Object.keys(deep.record).some((k) => k.startsWith('Empty'))).toBe(false);
  });

  it('makes awkward keys into valid, unique column names, deterministically', () => {
    const data = {
      'weird key!': 1,
      'weird-key?': 2,
      '1starts_with_digit': 3,
      'ünïcödé': 4,
      '': 5,
      ['x'.repeat(100)]: 6,
      ['x'.repeat(101)]: 7,
      Severity: 'a',
      severity: 'b',
      nested: { 'a.b': { 'c d': 8 } },
      nested_a_b: { c_d: 9 },
    };
    const { record } = render(sampleEnvelope('webhook.test', data));
    expectFlatValidRecord(record);
    const values = Object.values(record);
    for (const v of [1, 2, 3, 4, 5, 6, 7, 'a', 'b', 8, 9]) expect(values).toContain(v);
    expect(record.WeirdKey).toBe(1);
    expect(record.WeirdKey_2).toBe(2);
    expect(record.Severity).toBe('a');
    expect(record.Severity_2).toBe('b');
    expect(record.NestedABCD).toBe(8);
    expect(record.NestedABCD_2).toBe(9);
    // Same data inserted in another order: same bytes.
    const reversed = Object.fromEntries(Object.entries(data).reverse());
    expect(renderPayload('microsoft_sentinel', sampleEnvelope('webhook.test', reversed)).body.equals(
      renderPayload('microsoft_sentinel', sampleEnvelope('webhook.test', data)).body,
    )).toBe(true);
  });

  it('never lets data take TimeGenerated or the identifier columns', () => {
    const { record } = render(sampleEnvelope('webhook.test', { TimeGenerated: 'x' }));
    expect(record.TimeGenerated).toBe(CREATED_AT);
    expect(record.TimeGenerated_2).toBe('x');
  });

  it('caps every string value at 64 KB of UTF-8 without splitting characters', () => {
    const huge = 'a'.repeat(70_000);
    const hugeUnicode = '日本😀'.repeat(10_000); // 100 000 bytes
    const hugeArray = Array.from({ length: 20_000 }, (_, i) => `item-${i}`);
    const { record, body } = (() => {
      const r = render(sampleEnvelope('webhook.test', { huge, hugeUnicode, hugeArray }));
      return { record: r.record, body: r.body };
    })();
    expectFlatValidRecord(record);
    expect(record.Huge).toBe('a'.repeat(SENTINEL_MAX_VALUE_BYTES));
    const u = record.HugeUnicode as string;
    expect(Buffer.byteLength(u)).toBeLessThanOrEqual(SENTINEL_MAX_VALUE_BYTES);
    expect(Buffer.byteLength(u)).toBeGreaterThan(SENTINEL_MAX_VALUE_BYTES - 4);
    expect(hugeUnicode.startsWith(u)).toBe(true);
    expect(u).not.toContain('\ufffd');
    expect(Buffer.byteLength(record.HugeArray as string)).toBeLessThanOrEqual(SENTINEL_MAX_VALUE_BYTES);
    expect(body.length).toBeGreaterThan(3 * 60_000);
  });

  it('keeps nasty strings intact', () => {
    const { record } = render(sampleEnvelope('finding.created', { title: NASTY_STRINGS.join('|') }));
    expect(record.Title).toBe(NASTY_STRINGS.join('|'));
  });

  it('exposes the name helpers', () => {
    expect(SENTINEL_COLUMN_NAME.source).toBe(COLUMN.source);
    expect(sanitizeColumnName(['Data', 'a-b', 'c'])).toBe('DataABC');
    expect(sanitizeColumnName(['9lives'])).toBe('C9lives');
    expect(sanitizeColumnName(['_x'])).toBe('X');
    expect(sanitizeColumnName(['x'.repeat(60)])).toHaveLength(45);
    const taken = new Set<string>();
    expect(claimColumnName('x'.repeat(45), taken)).toBe('x'.repeat(45));
    expect(claimColumnName('x'.repeat(45), taken)).toBe(`${'x'.repeat(43)}_2`);
    expect(claimColumnName('X'.repeat(45), taken)).toBe(`${'X'.repeat(43)}_3`);
    expect(buildSentinelRecord(sampleEnvelope('webhook.test'))).toEqual(render(sampleEnvelope('webhook.test')).record);
  });

  it('refuses non-finite numbers', () => {
    expect(() => render(sampleEnvelope('webhook.test', { n: Number.POSITIVE_INFINITY }))).toThrow(TypeError);
  });
});
