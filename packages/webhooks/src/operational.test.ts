import { buildEnvelope } from './envelope';
import { OPERATIONAL_EVENT_TYPES } from './events';
import { renderNotification } from './notifications';
import { operationalErrorText, operationalEventData, urlHostOf } from './operational';

const subject = {
  id: 'whsub_1',
  kind: 'webhook',
  level: 'project',
  projectId: 'prj_1',
  assessmentId: null,
  url: 'https://user:pw@siem.example.com:8443/services/collector/TOKEN123?key=SECRET456',
};

describe('operational event data', () => {
  it('carries the subscription, its level and the URL host, never the path, query or userinfo', () => {
    const data = operationalEventData(subject, 'HTTP 503', { consecutive_failures: 3 });
    expect(data).toEqual({
      subscription_id: 'whsub_1',
      subscription_kind: 'webhook',
      level: 'project',
      project_id: 'prj_1',
      assessment_id: null,
      url_host: 'siem.example.com:8443',
      last_error: 'HTTP 503',
      consecutive_failures: 3,
    });
    const text = JSON.stringify(data);
    for (const secret of ['TOKEN123', 'SECRET456', 'pw', 'collector']) expect(text).not.toContain(secret);
  });

  it('has no host for an e-mail target or a URL that does not parse', () => {
    expect(operationalEventData({ ...subject, kind: 'email', url: '' }, null).url_host).toBeNull();
    expect(urlHostOf('not a url')).toBeNull();
  });

  it('cuts URLs in an error to their origin, to one bounded line', () => {
    expect(operationalErrorText('connect to https://hooks.slack.com/services/T0/B0/XYZ?x=1 failed\nagain')).toBe(
      'connect to https://hooks.slack.com failed again',
    );
    expect(operationalErrorText('x'.repeat(2000))!.length).toBe(500);
    expect(operationalErrorText('')).toBeNull();
    expect(operationalErrorText(null)).toBeNull();
  });
});

describe('operational events for people', () => {
  const envelope = (type: (typeof OPERATIONAL_EVENT_TYPES)[number], data: Record<string, unknown>) =>
    buildEnvelope({ deliveryId: 'whdel_1', eventId: 'event_1', type, createdAt: '2026-11-02T10:00:00.000Z', organizationId: 'org_1', data });
  const data = operationalEventData(subject, 'HTTP 410', { disabled_reason: 'endpoint returned 410 Gone' });

  it.each(OPERATIONAL_EVENT_TYPES)('%s has a headline naming the host and a link to the subscription', (type) => {
    const mail = renderNotification('email', envelope(type, data), { dashboardUrl: 'https://svc.example' });
    expect(mail.subject).toMatch(/siem\.example\.com:8443/);
    expect(mail.body.toString()).toContain('https://svc.example/projects/prj_1/webhooks/whsub_1');
    expect(mail.body.toString()).not.toContain('TOKEN123');
  });

  it('says why a subscription was disabled, and links a notification target to the targets page', () => {
    const mail = renderNotification('email', envelope('webhook.subscription_disabled', data), { dashboardUrl: 'https://svc.example' });
    expect(mail.subject).toBe('[Security] Webhook subscription to siem.example.com:8443 was disabled: endpoint returned 410 Gone');
    const target = operationalEventData({ ...subject, kind: 'slack', level: 'organization', projectId: null, url: 'https://hooks.slack.com/services/T/B/X' }, null);
    const slack = JSON.parse(renderNotification('slack', envelope('webhook.breaker_opened', target), { dashboardUrl: 'https://svc.example' }).body.toString());
    expect(slack.text).toBe('Circuit breaker opened for slack notification target to hooks.slack.com: deliveries are held back');
    expect(JSON.stringify(slack)).toContain('https://svc.example/notification-targets');
    expect(JSON.stringify(slack)).not.toContain('/services/T/B/X');
  });
});
