import { DEFAULT_SLA_POLICY, findingSlaDueAt, SLA_DAYS_COLUMNS, SLA_SEVERITIES, slaDaysFor, slaDueAt, slaPolicyFromColumns, slaPolicyToColumns, type SlaFinding, type SlaPolicy } from './sla';

const at = (iso: string) => new Date(iso);
const isInBreach = (f: SlaFinding, policy: SlaPolicy, now: Date) => {
  const due = findingSlaDueAt(f, policy);
  return due !== null && due.getTime() < now.getTime();
};

describe('the SLA rule', () => {
  const opened = at('2026-03-01T12:00:00.000Z');

  it('defaults to critical 7, high 30, medium 90, low 180 days and no SLA for info', () => {
    expect(DEFAULT_SLA_POLICY).toEqual({ critical: 7, high: 30, medium: 90, low: 180, info: null });
  });

  it('is in breach strictly after opened_at + days x 24 h, only in open statuses, only with a window', () => {
    const due = slaDueAt(opened, 7);
    expect(due.toISOString()).toBe('2026-03-08T12:00:00.000Z');
    const f = { status: 'open', severity: 'critical', openedAt: opened };
    expect(isInBreach(f, DEFAULT_SLA_POLICY, due)).toBe(false);
    expect(isInBreach(f, DEFAULT_SLA_POLICY, new Date(due.getTime() + 1))).toBe(true);
    for (const status of ['confirmed', 'regressed']) expect(isInBreach({ ...f, status }, DEFAULT_SLA_POLICY, at('2027-01-01'))).toBe(true);
    for (const status of ['dismissed', 'accepted_risk', 'suppressed', 'fixed']) {
      expect(isInBreach({ ...f, status }, DEFAULT_SLA_POLICY, at('2027-01-01'))).toBe(false);
      expect(findingSlaDueAt({ ...f, status }, DEFAULT_SLA_POLICY)).toBeNull();
    }
    expect(isInBreach({ ...f, severity: 'info' }, DEFAULT_SLA_POLICY, at('2099-01-01'))).toBe(false);
    expect(isInBreach({ ...f, severity: 'bogus' }, DEFAULT_SLA_POLICY, at('2099-01-01'))).toBe(false);
  });

  it('has one days column per severity, and the column mapping round-trips', () => {
    expect(Object.keys(SLA_DAYS_COLUMNS).sort()).toEqual([...SLA_SEVERITIES].sort());
    const policy: SlaPolicy = { critical: 1, high: 2, medium: 3, low: null, info: 5 };
    expect(slaPolicyFromColumns(slaPolicyToColumns(policy))).toEqual(policy);
    expect(slaDaysFor(policy, 'info')).toBe(5);
    expect(slaDaysFor(policy, 'nope')).toBeNull();
  });
});
