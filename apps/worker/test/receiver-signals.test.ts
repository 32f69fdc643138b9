// What receivers say changes what the worker does: 410 Gone disables the subscription after one attempt;
// 429/503 with Retry-After (delta-seconds or HTTP-date) push the next attempt back, recorded in the attempt.
import { bearer } from '../../api/test/support/fixtures';
import { AN_ADDRESS, refusingSmtpServer } from '../../api/test/support/smtp';
import { createWorld, poll, type CreatedSubscription, type World } from './support/world';

let w: World;
beforeAll(async () => {
  w = await createWorld({ env: { WEBHOOK_BACKOFF_MAX_MS: '5000', WEBHOOK_MAX_ATTEMPTS: '2', WEBHOOK_FAILING_AFTER_FAILURES: '2' } });
});
afterAll(() => w?.close());

const reply = (code: number, headers: Record<string, string> = {}) => ({ status: code, headers: { 'content-type': 'text/plain', ...headers }, body: `status ${code}` });

async function subscribe(path: string): Promise<CreatedSubscription> {
  return w.subscribe({ name: path, url: w.receiver.url(path), events: ['report.ready'] });
}

function gapMs(a: { startedAt: Date; durationMs: number }, b: { startedAt: Date }): number {
  return b.startedAt.getTime() - (a.startedAt.getTime() + a.durationMs);
}

describe('receiver signals', () => {
  it('disables the subscription at once on 410 Gone, after a single attempt', async () => {
    w.receiver.script('/gone', () => reply(410));
    const sub = await subscribe('/gone');
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_1' } });

    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(delivery.failureReason).toMatch(/410 Gone/);
    await new Promise((r) => setTimeout(r, 300));
    expect(w.receiver.requests('/gone')).toHaveLength(1);
    const after = await w.subscription(sub.id);
    expect(after.status).toBe('disabled');
    expect(after.disabledReason).toMatch(/410 Gone/);

    const audit = (action: string) => w.h.deps.prisma.auditEvent.findMany({ where: { organizationId: w.org.id, action, targetId: sub.id } });
    const disabled = await audit('webhook.subscription_disabled');
    expect(disabled).toHaveLength(1);
    expect(disabled[0]).toMatchObject({ actorType: 'system' });
    const mails = await poll(
      async () => w.h.mail().filter((m) => m.text.includes(sub.id)),
      (found) => found.length >= 2,
      5000,
      'the disabled e-mails',
    );
    expect(mails.map((m) => m.to).sort()).toEqual([w.org.owner.email, w.org.admin.email].sort());
    expect(mails[0].subject).toMatch(/is disabled$/);
    expect(mails[0].text).toMatch(/410 Gone/);

    const reenable = await w.api().patch(`${w.levelBase()}/subscriptions/${sub.id}`).set(bearer(w.org.admin.token)).send({ active: true });
    expect(reenable.status).toBe(200);
    expect(reenable.body.status).toBe('active');
    expect(await audit('webhook.subscription_reenabled')).toHaveLength(1);
  });

  it('mails the owner and admins once when a subscription turns failing, and audits it by system', async () => {
    w.receiver.script('/failing', () => reply(500));
    const sub = await subscribe('/failing');
    for (let i = 0; i < 3; i++) {
      expect((await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: `rep_f${i}` } })).status).toBe('failed');
    }
    expect((await w.subscription(sub.id)).status).toBe('failing');
    await new Promise((r) => setTimeout(r, 300));
    const mails = w.h.mail().filter((m) => m.text.includes(sub.id));
    expect(mails.map((m) => m.to).sort()).toEqual([w.org.owner.email, w.org.admin.email].sort());
    expect(mails[0].subject).toMatch(/is failing$/);
    expect(mails[0].text).toMatch(/HTTP 500/);
    // A link to the subscription's page in the dashboard, at the public base URL the other e-mailed links use.
    expect(mails[0].text).toContain(`Open it in the dashboard: ${w.h.config.publicBaseUrl}/webhooks/${sub.id}`);
    const audit = await w.h.deps.prisma.auditEvent.findMany({ where: { action: 'webhook.subscription_failing', targetId: sub.id } });
    expect(audit).toHaveLength(1);
    expect(audit[0].actorType).toBe('system');
  }, 30_000);

  it("logs a mail server's refusal of the health e-mail without the address it quotes", async () => {
    w.receiver.script('/gone-unmailed', () => reply(410));
    const sub = await subscribe('/gone-unmailed');
    const smtp = await refusingSmtpServer();
    const mail = w.h.config.mail;
    const errors = jest.spyOn(w.h.deps.logger, 'error');
    const calls = () => errors.mock.calls as unknown as Array<[string, unknown]>;
    mail.smtpUrl = smtp.url;
    try {
      expect((await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_unmailed' } })).status).toBe('failed');
      const logged = await poll(
        async () => calls().filter(([message]) => message === 'Could not send a webhook health notification'),
        (found) => found.length > 0,
        5000,
        'the logged refusal',
      );
      expect(logged[0][1]).toMatchObject({ subscription_id: sub.id, error: expect.stringContaining('Recipient address rejected') });
      expect(smtp.refused.length).toBeGreaterThan(0);
      expect(JSON.stringify(calls())).not.toMatch(AN_ADDRESS);
    } finally {
      mail.smtpUrl = undefined;
      errors.mockRestore();
      await smtp.close();
    }
  });

  it('waits at least the 2 s a 429 asks for in delta-seconds, and records it', async () => {
    w.receiver.script('/slow-down', (_req, n) => (n === 1 ? reply(429, { 'retry-after': '2' }) : reply(200)));
    const sub = await subscribe('/slow-down');
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_2' } });

    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts.map((a) => [a.responseStatus, a.retryAfterMs])).toEqual([[429, 2000], [200, null]]);
    expect(gapMs(delivery.attempts[0], delivery.attempts[1])).toBeGreaterThanOrEqual(1900);
  }, 20_000);

  it('honours the HTTP-date form on a 503', async () => {
    let askedFor = 0;
    w.receiver.script('/maintenance', (_req, n) => {
      if (n > 1) return reply(204);
      // HTTP-dates have whole seconds: ask for the second after next so the wait is > 1 s.
      askedFor = Math.floor(Date.now() / 1000) * 1000 + 3000;
      return reply(503, { 'retry-after': new Date(askedFor).toUTCString() });
    });
    const sub = await subscribe('/maintenance');
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_3' } });

    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts[0].retryAfterMs).toBeGreaterThan(1000);
    expect(delivery.attempts[1].startedAt.getTime()).toBeGreaterThanOrEqual(askedFor - 50);
  }, 20_000);

  it('falls back to the normal backoff on an invalid Retry-After', async () => {
    w.receiver.script('/nonsense', (_req, n) => (n === 1 ? reply(429, { 'retry-after': 'whenever' }) : reply(200)));
    const sub = await subscribe('/nonsense');
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rep_4' } });

    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts[0].retryAfterMs).toBeNull();
    expect(gapMs(delivery.attempts[0], delivery.attempts[1])).toBeLessThan(1500);
  });
});
