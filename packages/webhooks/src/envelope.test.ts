import { buildEnvelope, dataString, toIsoUtc } from './envelope';
import { EVENT_TYPES, type EventType } from './events';

const base = {
  deliveryId: 'whdel_abc',
  eventId: 'event_def',
  type: 'finding.created' as EventType,
  createdAt: '2026-11-02T10:15:30.123Z',
  organizationId: 'org_1',
  data: { finding_id: 'fnd_1', severity: 'high' },
};

describe('buildEnvelope', () => {
  it('builds the SPEC envelope with data.kind equal to the type', () => {
    expect(buildEnvelope(base)).toEqual({
      id: 'whdel_abc',
      event_id: 'event_def',
      type: 'finding.created',
      created_at: '2026-11-02T10:15:30.123Z',
      organization_id: 'org_1',
      data: { kind: 'finding.created', finding_id: 'fnd_1', severity: 'high' },
    });
  });

  it('sets kind for every event type, overriding a kind given in data', () => {
    for (const type of EVENT_TYPES) {
      const envelope = buildEnvelope({ ...base, type, data: { kind: 'something.else' } });
      expect(envelope.data.kind).toBe(type);
      expect(envelope.type).toBe(type);
    }
  });

  it('does not modify the caller data object', () => {
    const data = { a: 1 };
    buildEnvelope({ ...base, data });
    expect(data).toEqual({ a: 1 });
  });

  it('defaults data to just the kind', () => {
    const { data, ...rest } = base;
    expect(buildEnvelope(rest).data).toEqual({ kind: 'finding.created' });
  });

  it('normalises created_at to ISO 8601 UTC', () => {
    expect(buildEnvelope({ ...base, createdAt: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)) }).created_at).toBe('2026-01-02T03:04:05.006Z');
    expect(buildEnvelope({ ...base, createdAt: 0 }).created_at).toBe('1970-01-01T00:00:00.000Z');
    expect(buildEnvelope({ ...base, createdAt: '2026-11-02T12:15:30+02:00' }).created_at).toBe('2026-11-02T10:15:30.000Z');
  });

  it.each([
    [{ deliveryId: 'del_1' }, /Delivery id/],
    [{ deliveryId: 'whdel_' }, /Delivery id/],
    [{ eventId: 'evt_1' }, /Event id/],
    [{ eventId: 'event_' }, /Event id/],
    [{ type: 'finding.deleted' }, /Unknown event type/],
    [{ organizationId: '' }, /Organization id/],
    [{ data: [] }, /plain object/],
    [{ data: null }, /plain object/],
    [{ createdAt: 'not a date' }, /Invalid timestamp/],
  ])('refuses %p', (override, message) => {
    expect(() => buildEnvelope({ ...base, ...(override as object) } as typeof base)).toThrow(message);
  });
});

describe('toIsoUtc and dataString', () => {
  it('converts and validates', () => {
    expect(toIsoUtc(1_700_000_000_000)).toBe('2023-11-14T22:13:20.000Z');
    expect(() => toIsoUtc(Number.NaN)).toThrow(RangeError);
    const date = new Date(5);
    expect(toIsoUtc(date)).toBe('1970-01-01T00:00:00.005Z');
  });

  it('reads string data fields only', () => {
    const envelope = buildEnvelope({ ...base, data: { s: 'x', n: 1 } });
    expect(dataString(envelope, 's')).toBe('x');
    expect(dataString(envelope, 'n')).toBeUndefined();
    expect(dataString(envelope, 'missing')).toBeUndefined();
  });
});
