// Notification targets end to end (issue 24): Slack, Teams and e-mail targets configured through the API, sent by
// the real in-process worker through the webhook pipeline (outbox, retries, attempt log, health) to real HTTPS
// receivers speaking the chat webhooks' shapes, and to the mail outbox; scopes, roles, tenancy and URL safety.
import type { Lookup } from '@svc/net';
import { sealedChatUrl } from '@svc/db';
import { bearer, createOrg, type TestOrg, type TestUser } from '../../api/test/support/fixtures';
import { AN_ADDRESS, refusingSmtpServer } from '../../api/test/support/smtp';
import { createWorld, type World } from './support/world';

const internalLookup: Lookup = async (hostname) => {
  if (hostname === 'chat.internal.test') return [{ address: '10.1.2.3', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let w: World;
let other: TestOrg;
beforeAll(async () => {
  w = await createWorld({ lookup: internalLookup, env: { PUBLIC_BASE_URL: 'https://security.example.com' } });
  other = await createOrg(w.h);
});
afterAll(() => w?.close());

const BASE = '/api/v1/notification-targets';
const FINDING = {
  finding_id: 'fnd_01jx0000000000000000000000',
  assessment_id: 'asm_01jx0000000000000000000000',
  project_id: 'prj_01jx0000000000000000000000',
  title: 'SQL injection in login',
  severity: 'high',
  status: 'open',
  location: 'src/login.ts:42',
  fingerprint: 'f1',
};

async function createTarget(body: Record<string, unknown>, user: TestUser = w.org.admin) {
  const res = await w.api().post(BASE).set(bearer(user.token)).send(body);
  if (res.status !== 201) throw new Error(`Creating a target answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as { id: string; [field: string]: unknown };
}

async function sendTest(id: string, user: TestUser = w.org.admin) {
  const res = await w.api().post(`${BASE}/${id}/test`).set(bearer(user.token));
  expect(res.status).toBe(202);
  return w.waitForDelivery(res.body.delivery_id);
}

const json = (body: Buffer) => JSON.parse(body.toString('utf8'));

describe('Slack', () => {
  it('sends a Block Kit message to the incoming webhook, never returns the URL, and shows the last send', async () => {
    w.receiver.script('/services/T0/B0/slack-secret', () => ({ status: 200, headers: { 'content-type': 'text/html' }, body: 'ok' }));
    const url = w.receiver.url('/services/T0/B0/slack-secret');
    const target = await createTarget({ kind: 'slack', name: 'Security channel', url, events: ['finding.created'], severity_filter: ['critical', 'high'] });
    expect(target).toMatchObject({ kind: 'slack', url_host: new URL(url).host, recipients: [], status: 'active', last_sent_at: null });
    expect(JSON.stringify(target)).not.toContain('slack-secret');

    const delivery = await w.publishTo(target.id, { type: 'finding.created', projectId: null, assessmentId: null, data: FINDING });
    expect(delivery).toMatchObject({ status: 'succeeded', attemptCount: 1, payloadFormat: 'slack' });
    const [request] = w.receiver.requests('/services/T0/B0/slack-secret');
    expect(request.headers['content-type']).toBe('application/json');
    const body = json(request.body);
    expect(body.text).toBe('New high finding: SQL injection in login');
    expect(body.blocks[0]).toEqual({ type: 'header', text: { type: 'plain_text', text: 'New high finding: SQL injection in login', emoji: false } });
    expect(body.blocks[1].fields).toEqual(expect.arrayContaining([
      { type: 'mrkdwn', text: '*Severity*\nhigh' },
      { type: 'mrkdwn', text: '*Location*\nsrc/login.ts:42' },
    ]));
    expect(body.blocks[2].elements[0].url).toBe(`https://security.example.com/assessments/${FINDING.assessment_id}#finding-${FINDING.finding_id}`);

    const read = await w.api().get(`${BASE}/${target.id}`).set(bearer(w.org.member.token));
    expect(read.status).toBe(403); // members hold no notification_targets:read (SPEC's member bundle)
    const shown = await w.api().get(`${BASE}/${target.id}`).set(bearer(w.org.manager.token));
    expect(shown.body.last_sent_at).toBe(delivery.attempts[0].startedAt.toISOString());
    expect(shown.body.last_error).toBeNull();

    const row = await w.subscription(target.id);
    const audit = await w.h.deps.prisma.auditEvent.findFirstOrThrow({ where: { action: 'notification_target.created', targetId: target.id } });
    expect(JSON.stringify(audit.metadata)).not.toContain('slack-secret');
    expect(row.kind).toBe('slack');
  });

  it('applies the severity filter like a webhook subscription', async () => {
    const target = await createTarget({ kind: 'slack', name: 'critical only', url: w.receiver.url('/critical-only'), events: ['finding.created'], severity_filter: ['critical'] });
    const published = await w.publish({ type: 'finding.created', data: { ...FINDING, severity: 'low' } });
    expect(await w.h.deps.prisma.webhookDelivery.count({ where: { eventId: published.eventId, subscriptionId: target.id } })).toBe(0);
    const critical = await w.publishTo(target.id, { type: 'finding.created', data: { ...FINDING, severity: 'critical' } });
    expect(critical.status).toBe('succeeded');
  });

  it('retries a 500 and a 429 with Retry-After through the webhook backoff, and shows the last error', async () => {
    w.receiver.script('/flaky', (_req, n) =>
      n === 1 ? { status: 500, body: 'oops' } : n === 2 ? { status: 429, headers: { 'retry-after': '1' }, body: 'rate_limited' } : { status: 200, body: 'ok' },
    );
    const target = await createTarget({ kind: 'slack', name: 'flaky', url: w.receiver.url('/flaky'), events: ['report.ready'] });
    const delivery = await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_1' } });
    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts.map((a) => [a.outcome, a.responseStatus])).toEqual([['http_error', 500], ['http_error', 429], ['success', 200]]);
    expect(delivery.attempts[1].retryAfterMs).toBeGreaterThan(0);
    const bodies = w.receiver.requests('/flaky').map((r) => r.body.toString('utf8'));
    expect(new Set(bodies).size).toBe(1);
    const shown = (await w.api().get(`${BASE}/${target.id}`).set(bearer(w.org.manager.token))).body;
    expect(shown.last_error).toBe('HTTP 429');
    expect(Date.parse(shown.last_sent_at)).toBeGreaterThan(Date.parse(shown.last_error_at));
  });
});

describe('Microsoft Teams', () => {
  it('posts an Adaptive Card in a message attachment for the test route', async () => {
    w.receiver.script('/workflows/teams', () => ({ status: 202, body: '' }));
    const target = await createTarget({ kind: 'teams', name: 'Teams', url: w.receiver.url('/workflows/teams'), events: ['finding.created'] });
    const delivery = await sendTest(target.id);
    expect(delivery).toMatchObject({ status: 'succeeded', eventType: 'webhook.test', payloadFormat: 'teams' });
    const body = json(w.receiver.requests('/workflows/teams')[0].body);
    expect(body.type).toBe('message');
    expect(body.attachments[0].contentType).toBe('application/vnd.microsoft.card.adaptive');
    expect(body.attachments[0].content).toMatchObject({ type: 'AdaptiveCard', version: '1.4' });
    expect(body.attachments[0].content.body[0].text).toBe('Test notification from the Security Assessment Service');
    expect(body.attachments[0].content.actions[0]).toEqual({ type: 'Action.OpenUrl', title: 'Open in the dashboard', url: 'https://security.example.com/' });
  });
});

describe('e-mail', () => {
  it('sends one plain-text message to every recipient through the mail transport, in Bcc (no one sees the others)', async () => {
    const target = await createTarget({ kind: 'email', name: 'Sec team', recipients: ['sec@example.com', 'lead@example.com'], events: ['finding.created'] });
    expect(target).toMatchObject({ kind: 'email', url_host: null, recipients: ['sec@example.com', 'lead@example.com'] });
    const before = w.h.mail().length;
    const delivery = await w.publishTo(target.id, { type: 'finding.created', data: FINDING });
    expect(delivery).toMatchObject({ status: 'succeeded', payloadFormat: 'email' });
    const mails = w.h.mail().slice(before);
    expect(mails).toHaveLength(1);
    expect(mails[0]).toMatchObject({ bcc: ['sec@example.com', 'lead@example.com'], subject: '[Security] New high finding: SQL injection in login' });
    expect(mails[0].to).toBeUndefined();
    expect(mails[0].text).toContain('Location:   src/login.ts:42');
    expect(mails[0].text).toContain(`Open in the dashboard: https://security.example.com/assessments/${FINDING.assessment_id}#finding-${FINDING.finding_id}`);
  });

  it('retries a message the mail transport could not take, like a failed HTTP attempt', async () => {
    const target = await createTarget({ kind: 'email', name: 'Retry', recipients: ['retry@example.com'], events: ['report.ready'] });
    const mail = w.h.config.mail as { outboxDir: string };
    const outboxDir = mail.outboxDir;
    mail.outboxDir = '/dev/null/outbox'; // not a directory: the outbox transport fails
    const published = await w.publish({ type: 'report.ready', data: { report_id: 'rpt_mail' } });
    const id = await w.deliveryFor(published, target.id);
    const deadline = Date.now() + 10_000;
    while ((await w.h.deps.prisma.webhookAttempt.count({ where: { deliveryId: id } })) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    mail.outboxDir = outboxDir;
    const delivery = await w.waitForDelivery(id);
    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts[0]).toMatchObject({ outcome: 'network_error', responseStatus: null });
    expect(delivery.attempts[0].error).toMatch(/^EMAIL: mail: /);
    expect(delivery.attempts.at(-1)!.outcome).toBe('success');
    expect(w.h.mail().filter((m) => m.bcc?.includes('retry@example.com'))).toHaveLength(1);
  });

  it("logs the attempt a mail server refused without the recipients' addresses it quotes", async () => {
    const recipients = ['refused-sec@example.com', 'Refused.Lead@Example.COM'];
    const target = await createTarget({ kind: 'email', name: 'Refused', recipients, events: ['report.ready'] });
    const smtp = await refusingSmtpServer();
    const { logger } = w.h.deps;
    const level = logger.level;
    const log = jest.spyOn(logger, 'log');
    logger.level = 'info'; // failed attempts are logged at info
    w.h.config.mail.smtpUrl = smtp.url;
    let delivery = '';
    try {
      const res = await w.api().post(`${BASE}/${target.id}/test`).set(bearer(w.org.admin.token));
      expect(res.status).toBe(202);
      delivery = res.body.delivery_id as string;
      const calls = () => log.mock.calls as unknown as Array<[string, string, unknown]>;
      const attempts = () => calls().filter((call) => call[1] === 'Webhook attempt' && JSON.stringify(call).includes(delivery));
      const deadline = Date.now() + 10_000;
      while (attempts().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(attempts()[0][2]).toMatchObject({ outcome: 'network_error', error: expect.stringContaining('Recipient address rejected') });
      expect(smtp.refused.length).toBeGreaterThan(0);
      expect(JSON.stringify(attempts())).not.toMatch(AN_ADDRESS);
    } finally {
      w.h.config.mail.smtpUrl = undefined;
      logger.level = level;
      log.mockRestore();
      await smtp.close();
    }
    await w.waitForDelivery(delivery);
  });

  it('refuses a url on an e-mail target and recipients on a chat target', async () => {
    const bad = await w.api().post(BASE).set(bearer(w.org.admin.token)).send({ kind: 'email', name: 'x', url: w.receiver.url('/x'), recipients: ['a@example.com'], events: ['report.ready'] });
    expect(bad.status).toBe(400);
    const target = await createTarget({ kind: 'slack', name: 'chat', url: w.receiver.url('/chat'), events: ['report.ready'] });
    const patch = await w.api().patch(`${BASE}/${target.id}`).set(bearer(w.org.admin.token)).send({ recipients: ['a@example.com'] });
    expect(patch.status).toBe(422);
    expect(patch.body.detail).toMatch(/has a url, not recipients/);
  });
});

describe('configuration', () => {
  it('updates, disables and revokes a target; a disabled target refuses the test route and receives nothing', async () => {
    const target = await createTarget({ kind: 'slack', name: 'before', url: w.receiver.url('/lifecycle'), events: ['report.ready'] });
    const updated = await w.api().patch(`${BASE}/${target.id}`).set(bearer(w.org.admin.token)).send({ name: 'after', active: false });
    expect(updated.body).toMatchObject({ name: 'after', active: false, status: 'disabled' });
    expect((await w.api().post(`${BASE}/${target.id}/test`).set(bearer(w.org.admin.token))).status).toBe(409);
    const published = await w.publish({ type: 'report.ready', data: { report_id: 'rpt_2' } });
    expect(await w.h.deps.prisma.webhookDelivery.count({ where: { eventId: published.eventId, subscriptionId: target.id } })).toBe(0);
    expect((await w.api().delete(`${BASE}/${target.id}`).set(bearer(w.org.admin.token))).status).toBe(204);
    expect((await w.api().get(`${BASE}/${target.id}`).set(bearer(w.org.manager.token))).status).toBe(404);
    const list = await w.api().get(BASE).set(bearer(w.org.manager.token));
    expect(list.body.data.map((t: { id: string }) => t.id)).not.toContain(target.id);
  });

  it.each([
    ['an unknown event type', { events: ['finding.exploded'] }, 422],
    ['a severity outside the list', { severity_filter: ['urgent'] }, 422],
    ['an unknown kind', { kind: 'pager' }, 400],
    ['a chat target without a url', { url: undefined }, 400],
  ])('refuses %s and creates nothing', async (_label, change, status) => {
    const before = await w.h.deps.prisma.webhookSubscription.count({ where: { organizationId: w.org.id } });
    const res = await w.api().post(BASE).set(bearer(w.org.admin.token)).send({ kind: 'slack', name: 'x', url: w.receiver.url('/x'), events: ['report.ready'], ...change });
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ detail: expect.any(String) });
    expect(await w.h.deps.prisma.webhookSubscription.count({ where: { organizationId: w.org.id } })).toBe(before);
  });
});

describe('webhooks stay apart', () => {
  it('the webhook routes neither list, read nor test targets, nor list their deliveries', async () => {
    const target = await createTarget({ kind: 'slack', name: 'apart', url: w.receiver.url('/apart'), events: ['report.ready'] });
    const list = await w.api().get('/api/v1/webhooks/subscriptions?limit=100').set(bearer(w.org.admin.token));
    expect(list.status).toBe(200);
    expect(list.body.data.map((s: { id: string }) => s.id)).not.toContain(target.id);
    expect((await w.api().get(`/api/v1/webhooks/subscriptions/${target.id}`).set(bearer(w.org.admin.token))).status).toBe(404);
    expect((await w.api().post(`/api/v1/webhooks/subscriptions/${target.id}/test`).set(bearer(w.org.admin.token))).status).toBe(404);
    const deliveries = await w.api().get('/api/v1/webhooks/deliveries?limit=100').set(bearer(w.org.admin.token));
    expect(deliveries.body.data.every((d: { subscription_id: string }) => d.subscription_id.startsWith('whsub_'))).toBe(true);
  });
});

describe('scopes, roles and tenancy', () => {
  it("member: no access; manager: reads targets but neither configures nor tests them (SPEC's role table), no webhook access", async () => {
    const member = await w.api().get(BASE).set(bearer(w.org.member.token));
    expect(member.status).toBe(403);
    expect(member.body.detail).toBe('Missing required scope: notification_targets:read.');
    const memberCreate = await w.api().post(BASE).set(bearer(w.org.member.token)).send({ kind: 'slack', name: 'x', url: w.receiver.url('/x'), events: ['report.ready'] });
    expect(memberCreate.body.detail).toBe('Missing required scope: notification_targets:configure.');
    expect((await w.api().get('/api/v1/webhooks/subscriptions').set(bearer(w.org.manager.token))).status).toBe(403);
    expect((await w.api().get(BASE).set(bearer(w.org.manager.token))).status).toBe(200);
    expect((await w.api().get(BASE).set(bearer(w.org.admin.token))).status).toBe(200);
    const target = await createTarget({ kind: 'slack', name: 'admin-made', url: w.receiver.url('/admin-made'), events: ['report.ready'] });
    const asManager = bearer(w.org.manager.token);
    const refusals = [
      [await w.api().post(BASE).set(asManager).send({ kind: 'slack', name: 'x', url: w.receiver.url('/x'), events: ['report.ready'] }), 'configure'],
      [await w.api().patch(`${BASE}/${target.id}`).set(asManager).send({ name: 'renamed' }), 'configure'],
      [await w.api().delete(`${BASE}/${target.id}`).set(asManager), 'configure'],
      [await w.api().post(`${BASE}/${target.id}/test`).set(asManager), 'test'],
    ] as const;
    for (const [res, scope] of refusals) {
      expect(res.status).toBe(403);
      expect(res.body.detail).toBe(`Missing required scope: notification_targets:${scope}.`);
    }
    expect((await w.subscription(target.id)).name).toBe('admin-made');
    expect(w.receiver.requests('/admin-made')).toHaveLength(0);
  });

  it("answers 404 for another organization's target on every route", async () => {
    const target = await createTarget({ kind: 'slack', name: 'mine', url: w.receiver.url('/mine'), events: ['report.ready'] });
    const api = w.api();
    const as = bearer(other.admin.token);
    expect((await api.get(`${BASE}/${target.id}`).set(as)).status).toBe(404);
    expect((await w.api().patch(`${BASE}/${target.id}`).set(as).send({ name: 'theirs' })).status).toBe(404);
    expect((await w.api().post(`${BASE}/${target.id}/test`).set(as)).status).toBe(404);
    expect((await w.api().delete(`${BASE}/${target.id}`).set(as)).status).toBe(404);
    expect((await w.subscription(target.id)).name).toBe('mine');
    expect((await w.api().get(BASE).set(as)).body.data).toEqual([]);
  });
});

describe('URL safety', () => {
  it.each([
    ['an http URL', 'http://203.0.114.10/hook'],
    ['a private address', 'https://10.1.2.3/hook'],
    ['loopback', 'https://[::1]/hook'],
    ['localhost', 'https://localhost/hook'],
    ['cloud metadata', 'https://169.254.169.254/latest'],
    ['IPv4-mapped loopback', 'https://[::ffff:127.0.0.1]/hook'],
  ])('refuses %s at save time with 422', async (_label, url) => {
    const res = await w.api().post(BASE).set(bearer(w.org.admin.token)).send({ kind: 'teams', name: 'x', url, events: ['report.ready'] });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/^Notification target URL refused/);
    const target = await createTarget({ kind: 'teams', name: 'ok', url: w.receiver.url('/ok'), events: ['report.ready'] });
    expect((await w.api().patch(`${BASE}/${target.id}`).set(bearer(w.org.admin.token)).send({ url })).status).toBe(422);
  });

  it('refuses at send time a name that now resolves to a private address: no request, target disabled', async () => {
    const target = await createTarget({ kind: 'slack', name: 'rebind', url: w.receiver.url('/rebind'), events: ['report.ready'] });
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: target.id }, data: sealedChatUrl('https://chat.internal.test/services/x', w.h.config.encryptionKey) });
    const delivery = await w.publishTo(target.id, { type: 'report.ready', data: { report_id: 'rpt_3' } });
    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(delivery.attempts).toEqual([expect.objectContaining({ outcome: 'unsafe_url', responseStatus: null })]);
    expect(delivery.attempts[0].error).toMatch(/not a public address \(private\)/);
    expect(w.receiver.requests('/rebind')).toHaveLength(0);
    const shown = (await w.api().get(`${BASE}/${target.id}`).set(bearer(w.org.manager.token))).body;
    expect(shown).toMatchObject({ status: 'disabled', active: false, last_error: expect.stringMatching(/^unsafe_url: /) });
    expect(shown.disabled_reason).toMatch(/URL became unsafe/);
  });
});
