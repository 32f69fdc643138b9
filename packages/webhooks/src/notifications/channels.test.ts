import { buildEnvelope, type Envelope } from '../envelope';
import { EVENT_TYPES, type EventType } from '../events';
import { dashboardLink, notificationMessage } from './message';
import { emailText, escapeSlack, isNotificationKind, renderNotification, slackBlocks, teamsCard } from './channels';

const DASHBOARD = 'https://security.example.com';

function envelope(type: EventType, data: Record<string, unknown>): Envelope {
  return buildEnvelope({ deliveryId: 'whdel_1', eventId: 'event_1', type, createdAt: '2026-11-24T10:00:00.000Z', organizationId: 'org_1', data });
}

const created = envelope('finding.created', {
  finding_id: 'fnd_1',
  assessment_id: 'asm_1',
  project_id: 'prj_1',
  title: 'SQL injection in <login> & search',
  severity: 'high',
  status: 'open',
  location: 'src/login.ts:42',
  fingerprint: 'abc',
});

describe('notificationMessage', () => {
  it('headlines a finding with its severity and title, and lists its facts in a fixed order', () => {
    const message = notificationMessage(created, { dashboardUrl: DASHBOARD });
    expect(message.headline).toBe('New high finding: SQL injection in <login> & search');
    expect(message.facts).toEqual([
      { label: 'Severity', value: 'high' },
      { label: 'Status', value: 'open' },
      { label: 'Location', value: 'src/login.ts:42' },
      { label: 'Project', value: 'prj_1' },
      { label: 'Assessment', value: 'asm_1' },
      { label: 'Finding', value: 'fnd_1' },
    ]);
    expect(message.link).toBe('https://security.example.com/assessments/asm_1#finding-fnd_1');
    expect(message.context).toBe('finding.created · 2026-11-24T10:00:00.000Z');
  });

  it('says what changed for each finding event', () => {
    const data = { title: 'XSS', severity: 'medium', status: 'accepted_risk', previous_status: 'open' };
    const headline = (type: EventType) => notificationMessage(envelope(type, data), { dashboardUrl: DASHBOARD }).headline;
    expect(headline('finding.confirmed')).toBe('Confirmed medium finding: XSS');
    expect(headline('finding.status_changed')).toBe('Finding now accepted risk: XSS');
    expect(headline('finding.sla_breached')).toBe('SLA breached for medium finding: XSS');
  });

  it('renders every event type, labelling unknown fields from their names and shortening long values', () => {
    for (const type of EVENT_TYPES) {
      const message = notificationMessage(envelope(type, { some_field: 'x'.repeat(1000), nested: { a: 1 } }), { dashboardUrl: DASHBOARD });
      expect(message.headline.length).toBeGreaterThan(0);
      expect(message.facts).toEqual([
        { label: 'Nested', value: '{"a":1}' },
        { label: 'Some field', value: `${'x'.repeat(299)}…` },
      ]);
    }
    expect(notificationMessage(envelope('webhook.test', { message: 'hi' }), { dashboardUrl: DASHBOARD })).toMatchObject({
      headline: 'Test notification from the Security Assessment Service',
      facts: [{ label: 'Message', value: 'hi' }],
    });
    expect(notificationMessage(envelope('report.ready', { title: 'Q4' }), { dashboardUrl: DASHBOARD }).headline).toBe(
      'A PDF report is available for download: Q4',
    );
  });

  it('links to the assessment, else the project, else the home page, with ids encoded', () => {
    expect(dashboardLink(envelope('assessment.completed', { assessment_id: 'a/b' }), `${DASHBOARD}/`)).toBe(`${DASHBOARD}/assessments/a%2Fb`);
    expect(dashboardLink(envelope('pr_review.completed', { project_id: 'prj_2' }), DASHBOARD)).toBe(`${DASHBOARD}/projects/prj_2`);
    expect(dashboardLink(envelope('spend.cap_reached', {}), DASHBOARD)).toBe(`${DASHBOARD}/`);
  });
});

describe('Slack Block Kit', () => {
  it('has a plain header, escaped mrkdwn fields, a dashboard button and a fallback text', () => {
    const rendered = renderNotification('slack', created, { dashboardUrl: DASHBOARD });
    expect(rendered.contentType).toBe('application/json');
    const body = JSON.parse(rendered.body.toString('utf8'));
    expect(body.text).toBe('New high finding: SQL injection in <login> & search');
    expect(body.blocks[0]).toEqual({ type: 'header', text: { type: 'plain_text', text: body.text, emoji: false } });
    expect(body.blocks[1].fields[0]).toEqual({ type: 'mrkdwn', text: '*Severity*\nhigh' });
    expect(body.blocks[2]).toEqual({
      type: 'actions',
      elements: [{ type: 'button', text: { type: 'plain_text', text: 'Open in the dashboard' }, url: `${DASHBOARD}/assessments/asm_1#finding-fnd_1` }],
    });
    expect(body.blocks[3].type).toBe('context');
  });

  it('keeps within Slack limits: 150-character header, at most 10 fields', () => {
    const many = Object.fromEntries(Array.from({ length: 14 }, (_, i) => [`field_${i}`, 'v']));
    const body = slackBlocks(notificationMessage(envelope('assessment.completed', { title: 'T'.repeat(400), ...many }), { dashboardUrl: DASHBOARD }));
    expect((body.blocks[0] as { text: { text: string } }).text.text).toHaveLength(150);
    expect((body.blocks[1] as { fields: unknown[] }).fields).toHaveLength(10);
  });

  it('escapes the three control characters', () => {
    expect(escapeSlack('<!channel> & <http://x|y>')).toBe('&lt;!channel&gt; &amp; &lt;http://x|y&gt;');
  });

  it('omits the fields section when there are no facts', () => {
    const body = slackBlocks(notificationMessage(envelope('spend.cap_reached', {}), { dashboardUrl: DASHBOARD }));
    expect(body.blocks.map((b) => (b as { type: string }).type)).toEqual(['header', 'actions', 'context']);
  });
});

describe('Teams Adaptive Card', () => {
  it('wraps an Adaptive Card 1.4 in a message attachment, with a FactSet and an OpenUrl action', () => {
    const body = JSON.parse(renderNotification('teams', created, { dashboardUrl: DASHBOARD }).body.toString('utf8'));
    expect(body.type).toBe('message');
    const [attachment] = body.attachments;
    expect(attachment.contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(attachment.content).toMatchObject({ type: 'AdaptiveCard', version: '1.4' });
    expect(attachment.content.body[0]).toMatchObject({ type: 'TextBlock', text: 'New high finding: SQL injection in <login> & search' });
    expect(attachment.content.body[1].facts[2]).toEqual({ title: 'Location', value: 'src/login.ts:42' });
    expect(attachment.content.actions).toEqual([{ type: 'Action.OpenUrl', title: 'Open in the dashboard', url: `${DASHBOARD}/assessments/asm_1#finding-fnd_1` }]);
    expect(teamsCard(notificationMessage(envelope('spend.cap_reached', {}), { dashboardUrl: DASHBOARD })).attachments[0].content.body).toHaveLength(2);
  });
});

describe('e-mail', () => {
  it('is plain text with aligned facts and the link; the subject is one line', () => {
    const rendered = renderNotification('email', created, { dashboardUrl: DASHBOARD });
    expect(rendered.contentType).toBe('text/plain; charset=utf-8');
    expect(rendered.subject).toBe('[Security] New high finding: SQL injection in <login> & search');
    expect(rendered.body.toString('utf8')).toBe(
      [
        'New high finding: SQL injection in <login> & search',
        '',
        'Severity:   high',
        'Status:     open',
        'Location:   src/login.ts:42',
        'Project:    prj_1',
        'Assessment: asm_1',
        'Finding:    fnd_1',
        '',
        `Open in the dashboard: ${DASHBOARD}/assessments/asm_1#finding-fnd_1`,
        '',
        'finding.created · 2026-11-24T10:00:00.000Z',
        '',
      ].join('\n'),
    );
    const injected = emailText(notificationMessage(envelope('finding.created', { title: 'a\r\nBcc: x@example.com', severity: 'low' }), { dashboardUrl: DASHBOARD }));
    expect(injected.subject).toBe('[Security] New low finding: a Bcc: x@example.com');
  });

  it("keeps a scanner's title on the headline's line in the body too, whatever breaks the line", () => {
    const title = 'SQLi\n\nNo action needed: this finding was triaged.\u2028Details at https://evil.example\u0085\u202e';
    const { subject, text } = emailText(notificationMessage(envelope('finding.created', { title, severity: 'low' }), { dashboardUrl: DASHBOARD }));
    const lines = text.split(/\r\n|[\r\n\u2028\u2029\u0085\u000b\u000c]/);
    expect(lines.filter((l) => l.includes('evil.example'))).toEqual([
      'New low finding: SQLi No action needed: this finding was triaged. Details at https://evil.example',
    ]);
    expect(subject + text).not.toMatch(/[\u2028\u2029\u0085\u202a-\u202e]/);
  });
});

describe('kinds', () => {
  it('knows slack, teams and email only', () => {
    expect(['slack', 'teams', 'email'].every(isNotificationKind)).toBe(true);
    for (const other of ['webhook', 'service', 'Slack', '', null]) expect(isNotificationKind(other)).toBe(false);
    expect(() => renderNotification('sms' as never, created, { dashboardUrl: DASHBOARD })).toThrow(TypeError);
  });
});
