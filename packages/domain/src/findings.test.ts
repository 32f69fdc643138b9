import { canChangeFindingStatus, FINDING_TRANSITIONS } from './finding-transitions';
import { findingEventData } from './finding-event-data';
import { FINDING_STATUSES, isFindingStatus, isSeverity, SEVERITIES } from './findings';

describe('finding vocabulary', () => {
  it('lists severities most severe first and the seven statuses', () => {
    expect(SEVERITIES).toEqual(['critical', 'high', 'medium', 'low', 'info']);
    expect(FINDING_STATUSES).toEqual(['open', 'confirmed', 'dismissed', 'accepted_risk', 'suppressed', 'fixed', 'regressed']);
    expect(isSeverity('high')).toBe(true);
    expect(isSeverity('HIGH')).toBe(false);
    expect(isFindingStatus('fixed')).toBe(true);
    expect(isFindingStatus(7)).toBe(false);
  });
});

describe('finding status transitions', () => {
  it('has a row for every status, naming only known statuses', () => {
    expect(Object.keys(FINDING_TRANSITIONS).sort()).toEqual([...FINDING_STATUSES].sort());
    for (const targets of Object.values(FINDING_TRANSITIONS)) for (const to of targets) expect(isFindingStatus(to)).toBe(true);
  });

  it('keeps suppressed final, brings fixed back only as regressed, and never returns to open', () => {
    for (const to of FINDING_STATUSES) expect(canChangeFindingStatus('suppressed', to)).toBe(false);
    expect(FINDING_TRANSITIONS.fixed).toEqual(['regressed']);
    for (const from of FINDING_STATUSES) expect(canChangeFindingStatus(from, 'open')).toBe(false);
    expect(canChangeFindingStatus('dismissed', 'confirmed')).toBe(true);
    expect(canChangeFindingStatus('bogus', 'confirmed')).toBe(false);
  });
});

describe('finding event data', () => {
  it('carries public identifiers and the finding fields only', () => {
    const data = findingEventData({
      id: 'fnd_1', assessmentId: 'asm_1', projectId: 'prj_1', title: 'XSS', severity: 'high', status: 'open', location: null, fingerprint: 'fp',
      ...({ organizationId: 'org_secret', description: 'internal text' } as object),
    });
    expect(data).toEqual({
      finding_id: 'fnd_1', assessment_id: 'asm_1', project_id: 'prj_1', title: 'XSS', severity: 'high', status: 'open', location: null, fingerprint: 'fp',
    });
  });
});
