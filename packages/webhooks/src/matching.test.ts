import { EVENT_TYPES, FINDING_EVENT_TYPES } from './events';
import { subscriptionMatches, type MatchableSubscription } from './matching';

const NON_FINDING = EVENT_TYPES.filter((t) => !(FINDING_EVENT_TYPES as readonly string[]).includes(t));

const all = (overrides: Partial<MatchableSubscription> = {}): MatchableSubscription => ({
  events: [...EVENT_TYPES],
  severityFilter: null,
  statusFilter: null,
  ...overrides,
});

describe('subscriptionMatches', () => {
  it('requires the event type to be subscribed', () => {
    const sub = all({ events: ['finding.created', 'report.ready'] });
    expect(subscriptionMatches(sub, { type: 'finding.created', data: { severity: 'high' } })).toBe(true);
    expect(subscriptionMatches(sub, { type: 'report.ready', data: {} })).toBe(true);
    expect(subscriptionMatches(sub, { type: 'finding.confirmed', data: { severity: 'high' } })).toBe(false);
    expect(subscriptionMatches(all({ events: [] }), { type: 'webhook.test' })).toBe(false);
  });

  it('delivers everything subscribed when no filter is set (null or absent)', () => {
    for (const type of EVENT_TYPES) {
      expect(subscriptionMatches(all(), { type, data: { severity: 'low', status: 'open' } })).toBe(true);
      expect(subscriptionMatches({ events: [type] }, { type })).toBe(true);
    }
  });

  describe.each(FINDING_EVENT_TYPES)('finding event %s', (type) => {
    it('honours severity_filter', () => {
      const sub = all({ severityFilter: ['critical', 'high'] });
      expect(subscriptionMatches(sub, { type, data: { severity: 'critical', status: 'open' } })).toBe(true);
      expect(subscriptionMatches(sub, { type, data: { severity: 'high' } })).toBe(true);
      expect(subscriptionMatches(sub, { type, data: { severity: 'medium' } })).toBe(false);
      expect(subscriptionMatches(sub, { type, data: {} })).toBe(false);
      expect(subscriptionMatches(sub, { type })).toBe(false);
      expect(subscriptionMatches(sub, { type, data: { severity: 8 } })).toBe(false);
    });

    it('honours status_filter', () => {
      const sub = all({ statusFilter: ['open', 'regressed'] });
      expect(subscriptionMatches(sub, { type, data: { status: 'open' } })).toBe(true);
      expect(subscriptionMatches(sub, { type, data: { status: 'fixed' } })).toBe(false);
      expect(subscriptionMatches(sub, { type, data: {} })).toBe(false);
    });

    it('needs both filters to pass when both are set', () => {
      const sub = all({ severityFilter: ['high'], statusFilter: ['open'] });
      expect(subscriptionMatches(sub, { type, data: { severity: 'high', status: 'open' } })).toBe(true);
      expect(subscriptionMatches(sub, { type, data: { severity: 'high', status: 'fixed' } })).toBe(false);
      expect(subscriptionMatches(sub, { type, data: { severity: 'low', status: 'open' } })).toBe(false);
    });

    it('lets nothing through an empty filter list', () => {
      expect(subscriptionMatches(all({ severityFilter: [] }), { type, data: { severity: 'high' } })).toBe(false);
      expect(subscriptionMatches(all({ statusFilter: [] }), { type, data: { status: 'open' } })).toBe(false);
    });
  });

  it.each(NON_FINDING)('ignores both filters for %s', (type) => {
    const sub = all({ severityFilter: ['critical'], statusFilter: ['open'] });
    expect(subscriptionMatches(sub, { type, data: { severity: 'info', status: 'regressed' } })).toBe(true);
    expect(subscriptionMatches(sub, { type, data: {} })).toBe(true);
    expect(subscriptionMatches(all({ severityFilter: [], statusFilter: [] }), { type })).toBe(true);
  });

  it('uses the new status of finding.status_changed', () => {
    const sub = all({ statusFilter: ['fixed'] });
    expect(subscriptionMatches(sub, { type: 'finding.status_changed', data: { status: 'fixed', previous_status: 'open' } })).toBe(true);
    expect(subscriptionMatches(sub, { type: 'finding.status_changed', data: { status: 'open', previous_status: 'fixed' } })).toBe(false);
  });
});
