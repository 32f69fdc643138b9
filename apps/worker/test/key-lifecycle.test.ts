// The scheduled half of the API-key lifecycle policy, run by the worker with a controllable clock: the expiry
// warning (mailed once per key to its owner and the organization's admins and owner, even when two runs race) and
// the inactivity revocation (the key answers 401, an audit event by `system`), and its job scheduler.
import { QueueEvents } from 'bullmq';
import request from 'supertest';
import { ConfigError, loadConfig } from '@svc/config';
import { createMailer } from '@svc/mail';
import { createRedis } from '@svc/queue';
import { createHarness, type Harness } from '../../api/test/support/harness';
import { bearer, createOrg, createUserInOrg, type TestOrg, type TestUser } from '../../api/test/support/fixtures';
import { AN_ADDRESS, refusingSmtpServer } from '../../api/test/support/smtp';
import type { WorkerDeps } from '../src/deps';
import { revokeInactiveKeys, runKeyLifecycle, sendExpiryWarnings } from '../src/key-lifecycle';
import { MAINTENANCE_SCHEDULES } from '../src/maintenance';
import { startWorker } from '../src/worker';
import { poll } from './support/world';
import { createIsolatedDatabase } from '../../../test-support/databases';

const DAY = 24 * 3600 * 1000;

let h: Harness;
let deps: WorkerDeps;
let database: { url: string; drop(): Promise<void> };

// The job scans every organization: this file has a database of its own, so its counts are its organizations'.
beforeAll(async () => {
  database = await createIsolatedDatabase();
  h = await createHarness({ KEY_LIFECYCLE_INTERVAL_MS: '120000', DATABASE_URL: database.url });
  deps = { config: h.config, logger: h.deps.logger, prisma: h.deps.prisma, redis: () => createRedis(h.config.redisUrl), clock: h.clock };
});
afterAll(async () => {
  await h.close();
  await database.drop();
});

const api = () => request(h.app);

async function setPolicy(org: TestOrg, body: Record<string, unknown>) {
  const res = await api().put('/api/v1/organization/api-key-policy').set(bearer(org.owner.token)).send(body);
  expect(res.status).toBe(200);
}

async function createKey(token: string, body: Record<string, unknown> = {}) {
  const res = await api().post('/api/v1/api-keys').set(bearer(token)).send({ name: 'ci', scopes: ['profile:read'], ...body });
  expect(res.status).toBe(201);
  return res.body as { id: string; key: string; prefix: string; expires_at: string | null };
}

const at = (days: number) => new Date(Date.now() + days * DAY);
/** The worker's mails about a key (not the API's notice that it was created, security-notices.ts). */
const mailsAbout = (prefix: string) => h.mail().filter((m) => m.text.includes(prefix) && m.subject !== 'A new API key was created');

describe('expiry warnings', () => {
  let org: TestOrg;
  let secondAdmin: TestUser;
  beforeAll(async () => {
    org = await createOrg(h);
    secondAdmin = await createUserInOrg(h, org.id, 'admin', 'admin2');
    await setPolicy(org, { enabled: true, warn_days_before: 7, max_lifetime_days: 90, inactivity_days: null });
  });

  it('mails the key owner, the admins and the owner once, warn_days_before the expiry, even when two runs race', async () => {
    const key = await createKey(org.manager.token, { name: 'deploy bot', expires_at: at(20).toISOString() });

    // 14 days before expiry: outside the 7-day window.
    expect(await sendExpiryWarnings(deps, at(6))).toBe(0);
    expect(mailsAbout(key.prefix)).toEqual([]);

    // 6 days before: inside. Two workers run the job at the same moment.
    const now = at(14);
    const results = await Promise.all([1, 2, 3].map(() => runKeyLifecycle(deps, now)));
    expect(results.map((r) => r.warned).reduce((a, b) => a + b)).toBe(1);

    const mails = mailsAbout(key.prefix);
    expect(mails.map((m) => m.to).sort()).toEqual([org.manager.email, org.admin.email, org.owner.email, secondAdmin.email].sort());
    for (const mail of mails) {
      expect(mail.subject).toBe(`API key "deploy bot" of ${org.name} expires in 6 days`);
      expect(mail.text).toContain(key.expires_at);
      expect(mail.text).toContain(org.manager.email);
      expect(mail.text).not.toContain(key.key);
    }
    expect(mails.map((m) => m.to)).not.toContain(org.member.email);

    const row = await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(row.expiryWarnedAt?.getTime()).toBe(now.getTime());

    // Later runs (and the days up to expiry) send nothing more.
    await runKeyLifecycle(deps, at(15));
    await runKeyLifecycle(deps, at(19.9));
    expect(mailsAbout(key.prefix)).toHaveLength(4);
  });

  it('one mail per person when the key owner is an admin too', async () => {
    const key = await createKey(org.admin.token, { expires_at: at(3).toISOString() });
    await sendExpiryWarnings(deps, at(0));
    expect(mailsAbout(key.prefix).map((m) => m.to).sort()).toEqual([org.admin.email, org.owner.email, secondAdmin.email].sort());
  });

  it('a key name stored before names were one line writes no line of its own into the warning', async () => {
    const key = await createKey(org.manager.token, { expires_at: at(3).toISOString() });
    const forged = 'ci\n\nNo action needed: this key is renewed automatically.\u2028Sign in at https://evil.example\u202e';
    await h.deps.prisma.apiKey.update({ where: { id: key.id }, data: { name: forged } });
    await sendExpiryWarnings(deps, at(0));
    const [mail] = mailsAbout(key.prefix);
    const lines = mail.text.split(/\r\n|[\r\n\u2028\u2029\u0085\u000b\u000c]/);
    expect(lines.filter((l) => l.includes('evil.example')).every((l) => l.startsWith('The API key'))).toBe(true);
    expect(mail.subject + mail.text).not.toMatch(/[\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
  });

  it('leaves alone revoked keys, expired keys and keys without expiration', async () => {
    const revoked = await createKey(org.owner.token, { expires_at: at(2).toISOString() });
    expect((await api().delete(`/api/v1/api-keys/${revoked.id}`).set(bearer(org.owner.token))).status).toBe(204);
    const expiring = await createKey(org.owner.token, { expires_at: at(1).toISOString() });
    const forever = await h.deps.prisma.apiKey.create({
      data: { id: `key_${Date.now()}forever00000000`, organizationId: org.id, userId: org.owner.id, name: 'forever', displayPrefix: 'sk-svc-Frvr', keyHash: `hash-${Date.now()}`, scopes: [] },
    });
    await sendExpiryWarnings(deps, at(2)); // `expiring` has expired by then
    expect(mailsAbout(revoked.prefix)).toEqual([]);
    expect(mailsAbout(expiring.prefix)).toEqual([]);
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: forever.id } })).expiryWarnedAt).toBeNull();
  });

  it('sends nothing in an organization with the policy off, or with the warning rule off', async () => {
    const off = await createOrg(h);
    await setPolicy(off, { enabled: false, warn_days_before: 7 });
    const noWarn = await createOrg(h);
    await setPolicy(noWarn, { enabled: true, warn_days_before: null });
    const a = await createKey(off.owner.token, { expires_at: at(2).toISOString() });
    const b = await createKey(noWarn.owner.token, { expires_at: at(2).toISOString() });
    await sendExpiryWarnings(deps, at(1));
    expect(mailsAbout(a.prefix)).toEqual([]);
    expect(mailsAbout(b.prefix)).toEqual([]);
  });

  it('gives the claim back when no mail could be sent, so the next run warns', async () => {
    const key = await createKey(org.manager.token, { expires_at: at(5).toISOString() });
    const failing = { send: async () => Promise.reject(new Error('SMTP down')) };
    // Other keys of the organization may be due too; only this one matters here.
    await sendExpiryWarnings(deps, at(0), failing);
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).expiryWarnedAt).toBeNull();
    await sendExpiryWarnings(deps, at(0));
    expect(mailsAbout(key.prefix).map((m) => m.to).sort()).toEqual([org.manager.email, org.admin.email, org.owner.email, secondAdmin.email].sort());
  });

  it('a run that died while mailing (a mail server hanging, the worker killed) leaves the warning to a later run once its claim ran out', async () => {
    // Before, the claim was expiry_warned_at itself: the key stayed "warned" and expired unannounced.
    const fresh = await createOrg(h);
    await setPolicy(fresh, { enabled: true, warn_days_before: 7, max_lifetime_days: 90, inactivity_days: null });
    const key = await createKey(fresh.manager.token, { expires_at: at(5).toISOString() });
    // Hangs on this key's warning only (others due in the database go out as usual).
    const hanging = {
      send: (message: { to: string; text: string }) => (message.text.includes(key.prefix) ? new Promise<never>(() => undefined) : h.deps.mailer.send(message as never)),
    };
    void sendExpiryWarnings(deps, at(0), hanging as never);
    await poll(
      async () => (await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).expiryWarningClaimedUntil,
      (until) => until !== null,
      10_000,
      'the first run to claim the warning',
    );
    // Another run while the claim holds sends nothing; one after it ran out warns.
    await sendExpiryWarnings(deps, at(0));
    expect(mailsAbout(key.prefix)).toEqual([]);
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).expiryWarnedAt).toBeNull();
    await sendExpiryWarnings(deps, new Date(at(0).getTime() + 16 * 60_000));
    expect(mailsAbout(key.prefix).map((m) => m.to).sort()).toEqual([fresh.manager.email, fresh.admin.email, fresh.owner.email].sort());
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).expiryWarnedAt).not.toBeNull();
  });

  it("logs a mail server's refusal without the address it quotes", async () => {
    const key = await createKey(org.manager.token, { expires_at: at(5).toISOString() });
    const smtp = await refusingSmtpServer();
    const logged: Array<[string, unknown]> = [];
    const log = (message: string, meta?: unknown) => void logged.push([message, meta]);
    const logger = { error: log, warn: log, info: log, debug: log } as unknown as WorkerDeps['logger'];
    try {
      await sendExpiryWarnings({ ...deps, logger }, at(0), createMailer({ smtpUrl: smtp.url, from: 'svc@example.test', outboxDir: h.outboxDir }));
    } finally {
      await smtp.close();
    }
    expect(smtp.refused).toContain(org.manager.email);
    const failure = logged.find(([message, meta]) => message === 'Could not send an API-key expiry warning' && (meta as { key_id?: string }).key_id === key.id);
    expect(failure?.[1]).toMatchObject({ sent: 0, error: expect.stringContaining('Recipient address rejected') });
    expect(JSON.stringify(logged)).not.toMatch(AN_ADDRESS);
    // The claim went back: the next run warns.
    await sendExpiryWarnings(deps, at(0));
    expect(mailsAbout(key.prefix)).toHaveLength(4);
  });
});

describe('inactivity revocation', () => {
  let org: TestOrg;
  beforeAll(async () => {
    org = await createOrg(h);
    await setPolicy(org, { enabled: true, inactivity_days: 30, warn_days_before: null, max_lifetime_days: null });
  });

  it('revokes a key unused for longer than inactivity_days: then 401, revoked_reason inactivity, audited by system, once', async () => {
    const key = await createKey(org.manager.token);
    expect((await api().get('/api/v1/auth/me').set(bearer(key.key))).status).toBe(200);
    // last_used_at is written after the response (throttled, without blocking the request).
    let lastUsedAt: Date | null = null;
    for (let i = 0; i < 100 && !lastUsedAt; i++) {
      lastUsedAt = (await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).lastUsedAt;
      if (!lastUsedAt) await new Promise((r) => setTimeout(r, 20));
    }
    expect(lastUsedAt).not.toBeNull();

    // 29 days after its last use: still fine.
    expect(await revokeInactiveKeys(deps, new Date(lastUsedAt!.getTime() + 29 * DAY))).toBe(0);
    expect((await api().get('/api/v1/auth/me').set(bearer(key.key))).status).toBe(200);

    // 31 days after: revoked, by exactly one of two racing runs.
    const now = new Date(lastUsedAt!.getTime() + 31 * DAY);
    const results = await Promise.all([runKeyLifecycle(deps, now), runKeyLifecycle(deps, now)]);
    expect(results.map((r) => r.revoked).reduce((a, b) => a + b)).toBe(1);

    const row = await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } });
    expect(row.revokedAt?.getTime()).toBe(now.getTime());
    expect(row.revokedReason).toBe('inactivity');
    const res = await api().get('/api/v1/auth/me').set(bearer(key.key));
    expect(res.status).toBe(401);

    const events = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id, action: 'api_key.revoked', targetId: key.id } });
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      actorType: 'system',
      actorId: null,
      actorLabel: 'system',
      targetType: 'api_key',
      ip: null,
      userAgent: null,
      metadata: { reason: 'inactivity', inactivity_days: 30, prefix: key.prefix, last_used_at: lastUsedAt!.toISOString(), owner_user_id: org.manager.id },
    });
    expect(events[0].createdAt.getTime()).toBe(now.getTime());

    // Listed through the API like any other event.
    const listed = await api().get(`/api/v1/audit-events?target_id=${key.id}&action=api_key.revoked`).set(bearer(org.admin.token));
    expect(listed.body.data).toEqual([expect.objectContaining({ actor_type: 'system', actor_id: null, actor_label: 'system' })]);
  });

  it('counts from creation for a key never used', async () => {
    const key = await createKey(org.manager.token);
    const created = (await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).createdAt;
    await revokeInactiveKeys(deps, new Date(created.getTime() + 30 * DAY - 60_000));
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).revokedAt).toBeNull();
    await revokeInactiveKeys(deps, new Date(created.getTime() + 30 * DAY + 60_000));
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).revokedReason).toBe('inactivity');
    expect((await api().get('/api/v1/auth/me').set(bearer(key.key))).status).toBe(401);
  });

  it('spares keys used recently, revoked or expired keys, and other organizations', async () => {
    const recent = await createKey(org.manager.token);
    await h.deps.prisma.apiKey.update({ where: { id: recent.id }, data: { lastUsedAt: at(40) } });
    const byUser = await createKey(org.manager.token);
    expect((await api().delete(`/api/v1/api-keys/${byUser.id}`).set(bearer(org.manager.token))).status).toBe(204);
    const expired = await createKey(org.manager.token, { expires_at: at(10).toISOString() });
    const off = await createOrg(h);
    await setPolicy(off, { enabled: false, inactivity_days: 30 });
    const elsewhere = await createKey(off.manager.token);

    await revokeInactiveKeys(deps, at(45));
    const reasons = await h.deps.prisma.apiKey.findMany({
      where: { id: { in: [recent.id, byUser.id, expired.id, elsewhere.id] } },
      select: { id: true, revokedReason: true },
    });
    expect(Object.fromEntries(reasons.map((r) => [r.id, r.revokedReason]))).toEqual({
      [recent.id]: null,
      [byUser.id]: 'user',
      [expired.id]: null,
      [elsewhere.id]: null,
    });
  });
});

describe('the job scheduler', () => {
  it('registers key-lifecycle hourly by default, at KEY_LIFECYCLE_INTERVAL_MS when set', async () => {
    expect(loadConfig({}).keyLifecycle.intervalMs).toBe(3600 * 1000);
    expect(() => loadConfig({ KEY_LIFECYCLE_INTERVAL_MS: '10' })).toThrow(ConfigError);
    expect(() => loadConfig({ KEY_LIFECYCLE_INTERVAL_MS: 'hourly' })).toThrow(/KEY_LIFECYCLE_INTERVAL_MS/);
    expect(MAINTENANCE_SCHEDULES.find((s) => s.name === 'key-lifecycle')?.everyMs(deps)).toBe(120_000);

    const running = await startWorker(deps, { schedule: true });
    try {
      const schedulers = await running.maintenanceQueue.getJobSchedulers();
      expect(schedulers.find((s) => s.key === 'key-lifecycle')).toMatchObject({ name: 'key-lifecycle', every: 120_000 });
      // No scheduled runs behind the next test's back.
      for (const scheduler of schedulers) await running.maintenanceQueue.removeJobScheduler(scheduler.key);
    } finally {
      await running.close();
    }
  });

  it('runs through the maintenance worker', async () => {
    const org = await createOrg(h);
    await setPolicy(org, { enabled: true, inactivity_days: 1 });
    const key = await createKey(org.owner.token);
    const running = await startWorker(deps, { schedule: false });
    const connection = deps.redis();
    const events = new QueueEvents(running.maintenanceQueue.name, { connection, prefix: running.maintenanceQueue.opts.prefix });
    try {
      await events.waitUntilReady();
      h.clock.advance(2 * DAY);
      const job = await running.maintenanceQueue.add('key-lifecycle', {}, { removeOnComplete: true });
      const result = await job.waitUntilFinished(events, 20_000);
      expect(result).toEqual({ warned: expect.any(Number), revoked: expect.any(Number) });
      expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.id } })).revokedReason).toBe('inactivity');
    } finally {
      h.clock.reset();
      await events.close();
      await connection.quit();
      await running.close();
    }
  });
});
