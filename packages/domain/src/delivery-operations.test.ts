import { RECOVERY_MAX_AGE_MS, recoveryWindow, resendRefusal } from './delivery-operations';

const NOW = new Date('2026-11-22T12:00:00Z');
const live = { status: 'active', deletedAt: null };

describe('resendRefusal', () => {
  it.each(['succeeded', 'failed'])('allows a %s delivery of a live subscription', (status) => {
    expect(resendRefusal({ status }, live)).toBeNull();
    expect(resendRefusal({ status }, { ...live, status: 'failing' })).toBeNull();
  });
  it('refuses a pending delivery', () => expect(resendRefusal({ status: 'pending' }, live)).toMatch(/pending/));
  it('refuses a deleted or disabled subscription', () => {
    expect(resendRefusal({ status: 'failed' }, { ...live, deletedAt: NOW })).toMatch(/deleted/);
    expect(resendRefusal({ status: 'failed' }, { ...live, status: 'disabled' })).toMatch(/not active/);
  });
});

describe('recoveryWindow', () => {
  const hoursAgo = (h: number) => new Date(NOW.getTime() - h * 3600_000);
  it('ends now when until is absent', () => {
    expect(recoveryWindow(hoursAgo(2), undefined, NOW)).toEqual({ since: hoursAgo(2), until: NOW });
  });
  it('accepts exactly 30 days back', () => {
    expect(recoveryWindow(new Date(NOW.getTime() - RECOVERY_MAX_AGE_MS), hoursAgo(1), NOW)).toMatchObject({ until: hoursAgo(1) });
  });
  it.each([
    ['older than 30 days', new Date(NOW.getTime() - RECOVERY_MAX_AGE_MS - 1), undefined, /30 days/],
    ['since after until', hoursAgo(1), hoursAgo(2), /before/],
    ['empty', hoursAgo(1), hoursAgo(1), /before/],
    ['until in the future', hoursAgo(1), new Date(NOW.getTime() + 1000), /future/],
  ])('refuses a window %s', (_label, since, until, reason) => {
    expect(recoveryWindow(since as Date, until as Date | undefined, NOW)).toMatch(reason as RegExp);
  });
});
