import {
  describeEventType,
  EVENT_CATALOGUE,
  EVENT_TYPES,
  FINDING_EVENT_TYPES,
  isEventType,
  isFindingEventType,
  isOperationalEventType,
  isPayloadFormat,
  OPERATIONAL_EVENT_TYPES,
  PAYLOAD_FORMATS,
} from './events';
import { FINDING_STATUSES, isFindingStatus, isSeverity, SEVERITIES } from '@svc/domain';

describe('event catalogue', () => {
  it('has the twelve event types of SPEC, then the six operational events, each once', () => {
    expect(EVENT_TYPES).toEqual([
      'assessment.completed',
      'finding.created',
      'finding.confirmed',
      'finding.status_changed',
      'finding.sla_breached',
      'report.ready',
      'fix_verify.completed',
      'pr_review.completed',
      'spend.threshold_crossed',
      'spend.cap_reached',
      'monitoring.regression',
      'webhook.test',
      'webhook.subscription_failing',
      'webhook.subscription_disabled',
      'webhook.subscription_recovered',
      'webhook.delivery_exhausted',
      'webhook.breaker_opened',
      'webhook.breaker_closed',
    ]);
    expect(new Set(EVENT_TYPES).size).toBe(18);
    expect(EVENT_TYPES.filter(isOperationalEventType)).toEqual([...OPERATIONAL_EVENT_TYPES]);
  });

  it('lists every type with a non-empty one-line description', () => {
    expect(EVENT_CATALOGUE.map((entry) => entry.type)).toEqual([...EVENT_TYPES]);
    for (const entry of EVENT_CATALOGUE) {
      expect(entry.description.length).toBeGreaterThan(5);
      expect(entry.description).not.toMatch(/[\r\n]/);
      expect(describeEventType(entry.type)).toBe(entry.description);
    }
    expect(describeEventType('finding.status_changed')).toBe(
      "A finding's status changes; carries both new and previous status",
    );
  });

  it('is frozen', () => {
    expect(Object.isFrozen(EVENT_CATALOGUE)).toBe(true);
    expect(Object.isFrozen(EVENT_CATALOGUE[0])).toBe(true);
  });

  it('names the four finding events', () => {
    expect(FINDING_EVENT_TYPES).toEqual(['finding.created', 'finding.confirmed', 'finding.status_changed', 'finding.sla_breached']);
    for (const type of FINDING_EVENT_TYPES) expect(isEventType(type)).toBe(true);
  });

  it('fixes severities, statuses and formats', () => {
    expect(SEVERITIES).toEqual(['critical', 'high', 'medium', 'low', 'info']);
    expect(FINDING_STATUSES).toEqual(['open', 'confirmed', 'dismissed', 'accepted_risk', 'suppressed', 'fixed', 'regressed']);
    expect(PAYLOAD_FORMATS).toEqual(['service', 'splunk_hec', 'microsoft_sentinel', 'cef']);
  });

  it.each([
    [isEventType, 'finding.created', true],
    [isEventType, 'monitoring.regression', true],
    [isEventType, 'finding.deleted', false],
    [isEventType, 'FINDING.CREATED', false],
    [isEventType, '', false],
    [isEventType, undefined, false],
    [isEventType, 42, false],
    [isFindingEventType, 'finding.sla_breached', true],
    [isFindingEventType, 'monitoring.regression', false],
    [isSeverity, 'critical', true],
    [isSeverity, 'Critical', false],
    [isSeverity, 'none', false],
    [isFindingStatus, 'accepted_risk', true],
    [isFindingStatus, 'closed', false],
    [isPayloadFormat, 'cef', true],
    [isPayloadFormat, 'json', false],
    [isPayloadFormat, null, false],
  ] as Array<[(v: unknown) => boolean, unknown, boolean]>)('%p(%p) is %p', (guard, value, expected) => {
    expect(guard(value)).toBe(expected);
  });
});
