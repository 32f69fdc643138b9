// Security notices are kept until sent (docs/api.md "Security notices"): the API writes the notice in the change's own
// transaction and mails it at once after commit; whatever stops that mail (a mail server that refuses, an API that
// stops right after the commit, or mid-send) the worker's sweep sends it later, exactly once, to the account's
// current address, retrying for 24 h. Sent and given-up notices go with the retention purge after 30 days.
// A database of its own: the sweep and the purge read every account's notices.
import { QueueEvents } from 'bullmq';
import request from 'supertest';
import { createMailer, type Mailer } from '@svc/mail';
import { newId } from '@svc/db';
import { createRedis } from '@svc/queue';
import { recordSecurityNotice, sendSecurityNotice } from '@svc/outbox';
import { KEY_NOTICES_PER_HOUR } from '../../api/src/modules/auth/security-notices';
import { createHarness, uniqueSuffix, type Harness } from '../../api/test/support/harness';
import { bearer, createOrg, createUserInOrg, type TestOrg } from '../../api/test/support/fixtures';
import { loginViaApi, signupAndVerify } from '../../api/test/support/auth-helpers';
import { closedSmtpUrl, refusingSmtpServer } from '../../api/test/support/smtp';
import { mailsTo as mailsToIn, noticeTo as waitForNotice, type Mail } from '../../api/test/support/reauthentication';
import type { WorkerDeps } from '../src/deps';
import { MAINTENANCE_SCHEDULES } from '../src/maintenance';
import { runSecurityNoticeSweep } from '../src/security-notices';
import { startWorker } from '../src/worker';
import { createIsolatedDatabase } from '../../../test-support/databases';

const DAY = 24 * 3600 * 1000;
const NEW_PASSWORD = 'another long enough passphrase';
const PASSWORD_CHANGED = 'Your password was changed';
const KEY_CREATED = 'A new API key was created';

let h: Harness;
let deps: WorkerDeps;
let database: { url: string; drop(): Promise<void> };
let org: TestOrg;

beforeAll(async () => {
  database = await createIsolatedDatabase();
  h = await createHarness({ DATABASE_URL: database.url });
  deps = { config: h.config, logger: h.deps.logger, prisma: h.deps.prisma, redis: () => createRedis(h.config.redisUrl), clock: h.clock };
  org = await createOrg(h);
});
afterAll(async () => {
  await h.close();
  await database.drop();
});
afterEach(() => h.clock.reset());

const mailsTo = (email: string, subject: string): Mail[] => mailsToIn(h, email, subject);
const noticesOf = (userId: string) => h.deps.prisma.securityNotice.findMany({ where: { userId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
const settle = (ms = 300) => new Promise((r) => setTimeout(r, ms));

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`condition not met: ${JSON.stringify(value)}`);
    await settle(25);
  }
}

/** The API's mailer is `mailer` while `fn` runs. */
async function withApiMailer<T>(mailer: Mailer, fn: () => Promise<T>): Promise<T> {
  const before = h.deps.mailer;
  h.deps.mailer = mailer;
  try {
    return await fn();
  } finally {
    h.deps.mailer = before;
  }
}

async function changePassword(token: string, current: string) {
  const res = await request(h.app).post('/api/v1/auth/password').set(bearer(token)).send({ current_password: current, new_password: NEW_PASSWORD });
  expect(res.status).toBe(200);
}

async function signedUp() {
  const account = await signupAndVerify(h);
  const { token } = await loginViaApi(h, account.email, account.password);
  const { id } = await h.deps.prisma.user.findUniqueOrThrow({ where: { email: account.email }, select: { id: true } });
  return { ...account, id, token };
}

describe('the mail server fails when the password changes', () => {
  it('no mail yet, the notice kept unsent; the sweep on a real worker sends exactly one later', async () => {
    const account = await signedUp();
    const smtp = await closedSmtpUrl();
    await withApiMailer(createMailer({ smtpUrl: smtp, from: 'svc@example.test', outboxDir: h.outboxDir }), async () => {
      await changePassword(account.token, account.password);
      // The API tried once, after the commit: the row is there, unsent, its next attempt later.
      const [row] = await until(() => noticesOf(account.id), (rows) => rows[0]?.attempts === 1);
      expect(row).toMatchObject({ kind: 'password_changed', sentAt: null, attempts: 1, claimedUntil: null });
      expect(row.nextAttemptAt!.getTime()).toBeGreaterThan(h.clock.now().getTime());
    });
    await settle();
    expect(mailsTo(account.email, PASSWORD_CHANGED)).toHaveLength(0);

    const running = await startWorker(deps, { schedule: false });
    const connection = deps.redis();
    const events = new QueueEvents(running.maintenanceQueue.name, { connection, prefix: running.maintenanceQueue.opts.prefix });
    const sweep = async () => {
      const job = await running.maintenanceQueue.add('security-notices', {}, { removeOnComplete: true });
      return job.waitUntilFinished(events, 20_000);
    };
    try {
      await events.waitUntilReady();
      // Not due yet (the retry waits its backoff): nothing is sent.
      expect(await sweep()).toEqual({ sent: 0, failed: 0, gave_up: 0 });
      expect(mailsTo(account.email, PASSWORD_CHANGED)).toHaveLength(0);
      h.clock.advance(60_000);
      expect(await sweep()).toEqual({ sent: 1, failed: 0, gave_up: 0 });
      // Later runs send nothing more.
      expect(await sweep()).toEqual({ sent: 0, failed: 0, gave_up: 0 });
    } finally {
      await events.close();
      await connection.quit();
      await running.close();
    }
    const mails = mailsTo(account.email, PASSWORD_CHANGED);
    expect(mails).toHaveLength(1);
    expect(mails[0]!.text).toMatch(/When: \d{4}-\d\d-\d\dT[\d:.]+Z from the address /);
    expect(mails[0]!.text).not.toContain(NEW_PASSWORD);
    const [row] = await noticesOf(account.id);
    expect(row.sentAt).not.toBeNull();
    expect(row.attempts).toBe(1);
  });
});

describe('the API never sends', () => {
  it('committed, and the process stopped before the send: the sweep sends it, to the current address, once the API has had its chance', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'stopped');
    const at = h.clock.now();
    // The row the change's transaction writes, committed without the after-commit send (as if the process died).
    await h.deps.prisma.$transaction((tx) => recordSecurityNotice(tx, { userId: user.id, notice: { kind: '2fa_disabled' }, ip: '203.0.113.7', at }));
    // The person changes their address and name meanwhile: the notice goes to the account as it is now.
    const current = `current-${uniqueSuffix()}@example.test`;
    await h.deps.prisma.user.update({ where: { id: user.id }, data: { email: current, name: 'Ada Current' } });

    // A few seconds are the API's own: the sweep leaves a fresh notice alone.
    await runSecurityNoticeSweep(deps);
    expect(mailsTo(current, 'Two-factor authentication was turned off')).toHaveLength(0);
    h.clock.advance(10_000);
    await runSecurityNoticeSweep(deps);
    await runSecurityNoticeSweep(deps);
    const mails = mailsTo(current, 'Two-factor authentication was turned off');
    expect(mails).toHaveLength(1);
    expect(mails[0]!.text.startsWith('Hello Ada Current,\n\n')).toBe(true);
    expect(mails[0]!.text).toContain(`When: ${at.toISOString()} from the address 203.0.113.7.`);
    expect(h.mail().filter((m) => m.to === user.email)).toHaveLength(0);
  });

  it('stopped mid-send (its claim held, never released): the sweep waits the claim out, then sends exactly one', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'mid-send');
    let fail: (err: Error) => void = () => undefined;
    const hung: Mailer = { send: () => new Promise<void>((_, reject) => (fail = reject)) };
    const res = await withApiMailer(hung, async () => {
      const created = await request(h.app).post('/api/v1/api-keys').set(bearer(user.token)).send({ name: 'deploy', scopes: ['projects:read'] });
      expect(created.status).toBe(201);
      await until(() => noticesOf(user.id), (rows) => rows[0]?.claimedUntil != null);
      return created;
    });
    try {
      // Claimed by the API, which hangs: the sweep does not take it.
      h.clock.advance(30_000);
      await runSecurityNoticeSweep(deps);
      expect(mailsTo(user.email, KEY_CREATED)).toHaveLength(0);
      // The claim runs out: the sweep sends it.
      h.clock.advance(10 * 60_000);
      await runSecurityNoticeSweep(deps);
      const mails = mailsTo(user.email, KEY_CREATED);
      expect(mails).toHaveLength(1);
      expect(mails[0]!.text).toContain(`in the organization ${org.name}: "deploy" (${res.body.prefix}…, 1 scope, never expires)`);
      expect(mails[0]!.text).not.toContain(res.body.key);
    } finally {
      // The hung send finally fails: that changes nothing of a notice sent meanwhile.
      fail(new Error('connection reset'));
    }
    await settle();
    expect(mailsTo(user.email, KEY_CREATED)).toHaveLength(1);
    const [row] = await noticesOf(user.id);
    expect(row.sentAt).not.toBeNull();
    expect(row.nextAttemptAt).toBeNull();
  });
});

describe("the API's send and the sweep racing", () => {
  it('a slow mail server: sweeps running while the API sends leave exactly one mail', async () => {
    const account = await signedUp();
    const outbox = createMailer({ from: 'svc@example.test', outboxDir: h.outboxDir });
    const slow: Mailer = { send: async (message) => (await settle(500), outbox.send(message)) };
    await withApiMailer(slow, async () => {
      await changePassword(account.token, account.password);
      h.clock.advance(10_000);
      await Promise.all([1, 2, 3].map(() => runSecurityNoticeSweep(deps)));
      await waitForNotice(h, account.email, PASSWORD_CHANGED);
      await Promise.all([1, 2, 3].map(() => runSecurityNoticeSweep(deps)));
    });
    await settle(700);
    expect(mailsTo(account.email, PASSWORD_CHANGED)).toHaveLength(1);
    const [row] = await noticesOf(account.id);
    expect([row.sentAt !== null, row.attempts]).toEqual([true, 0]);
  });

  it('the same notices sent by the API twice and swept by three workers at once: one mail each', async () => {
    const users = await Promise.all([1, 2, 3, 4, 5, 6].map((i) => createUserInOrg(h, org.id, 'member', `race${i}`)));
    const ids: string[] = [];
    for (const user of users) {
      ids.push(await h.deps.prisma.$transaction((tx) => recordSecurityNotice(tx, { userId: user.id, notice: { kind: 'password_reset' }, ip: null, at: h.clock.now() })));
    }
    h.clock.advance(10_000);
    await Promise.all([...ids.flatMap((id) => [sendSecurityNotice(h.deps, id), sendSecurityNotice(h.deps, id)]), ...[1, 2, 3].map(() => runSecurityNoticeSweep(deps))]);
    for (const user of users) expect([user.email, mailsTo(user.email, 'Your password was reset').length]).toEqual([user.email, 1]);
    await runSecurityNoticeSweep(deps);
    for (const user of users) expect(mailsTo(user.email, 'Your password was reset')).toHaveLength(1);
  });
});

describe('a slow mail server', () => {
  const slowDeps = (mailer: Mailer): WorkerDeps & { sendTimeoutMs: number } => ({ ...deps, mailer, sendTimeoutMs: 200 });
  const recordNotice = (userId: string) =>
    h.deps.prisma.$transaction((tx) => recordSecurityNotice(tx, { userId, notice: { kind: 'password_changed' }, ip: null, at: h.clock.now() }));

  it('a send that outlasts its timeout and is accepted after all: not sent again while it runs, recorded as sent once accepted', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'slow-accepted');
    await recordNotice(user.id);
    h.clock.advance(10_000);
    const outbox = createMailer({ from: 'svc@example.test', outboxDir: h.outboxDir });
    const slow: Mailer = { send: async (message) => (await settle(1500), outbox.send(message)) };
    // The send takes longer than the sender waits: a failed attempt, as far as it knows.
    expect(await runSecurityNoticeSweep(slowDeps(slow))).toEqual({ sent: 0, failed: 1, gave_up: 0 });
    // Minutes later the send is still under way (a mail server may take 10 min before nodemailer gives up): a sweep
    // with a working mail server leaves it alone.
    h.clock.advance(3 * 60_000);
    expect(await runSecurityNoticeSweep(deps)).toEqual({ sent: 0, failed: 0, gave_up: 0 });
    // The mail server accepts it: the notice is sent, and the sweeps of the next hours send nothing more.
    await until(async () => mailsTo(user.email, PASSWORD_CHANGED).length, (n) => n === 1);
    const [sent] = await until(() => noticesOf(user.id), (rows) => rows[0]?.sentAt != null);
    expect(sent).toMatchObject({ nextAttemptAt: null, claimedUntil: null });
    for (let hour = 0; hour < 3; hour += 1) {
      h.clock.advance(3600_000);
      expect(await runSecurityNoticeSweep(deps)).toEqual({ sent: 0, failed: 0, gave_up: 0 });
    }
    await settle();
    expect(mailsTo(user.email, PASSWORD_CHANGED)).toHaveLength(1);
  });

  it('a send that outlasts its timeout and then fails: tried again after its backoff, not only once a claim runs out', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'slow-refused');
    await recordNotice(user.id);
    h.clock.advance(10_000);
    const refusing: Mailer = { send: async () => (await settle(500), Promise.reject(new Error('421 try again later'))) };
    expect(await runSecurityNoticeSweep(slowDeps(refusing))).toEqual({ sent: 0, failed: 1, gave_up: 0 });
    // The late refusal lets go of the notice.
    await until(() => noticesOf(user.id), (rows) => rows[0]?.claimedUntil === null);
    h.clock.advance(60_000); // past the first wait (30 s +- 20 %), well before a claim would run out
    expect(await runSecurityNoticeSweep(deps)).toEqual({ sent: 1, failed: 0, gave_up: 0 });
    expect(mailsTo(user.email, PASSWORD_CHANGED)).toHaveLength(1);
  });
});

describe('what is logged', () => {
  it("a mail server's refusal quoting the address as sent over SMTP (an international domain, punycoded): no address in the log", async () => {
    const smtp = await refusingSmtpServer();
    const local = `ada-${uniqueSuffix()}`.toLowerCase();
    const email = `${local}@bücher.example`;
    const user = await h.deps.prisma.user.create({
      data: { id: newId('usr'), email, name: 'Ada Umlaut', status: 'active', emailVerifiedAt: new Date() },
    });
    const logged: Array<[string, unknown]> = [];
    const log = (message: string, meta?: unknown) => void logged.push([message, meta]);
    const logger = { error: log, warn: log, info: log, debug: log } as unknown as WorkerDeps['logger'];
    const mailer = createMailer({ smtpUrl: smtp.url, from: 'svc@example.test', outboxDir: h.outboxDir });
    try {
      await h.deps.prisma.$transaction((tx) => recordSecurityNotice(tx, { userId: user.id, notice: { kind: '2fa_enabled' }, ip: null, at: h.clock.now() }));
      h.clock.advance(10_000);
      expect(await runSecurityNoticeSweep({ ...deps, mailer, logger })).toEqual({ sent: 0, failed: 1, gave_up: 0 });
    } finally {
      await smtp.close();
    }
    // The server did refuse the address it was given (nodemailer sends the domain punycoded).
    expect(smtp.refused).toEqual([`${local}@xn--bcher-kva.example`]);
    const failure = logged.find(([message]) => message === 'Could not send a security notice');
    expect(failure?.[1]).toMatchObject({ notice: '2fa_enabled', user_id: user.id, error: expect.stringContaining('Recipient address rejected') });
    expect(JSON.stringify(logged)).not.toContain(`${local}@`);
    await h.deps.prisma.securityNotice.deleteMany({ where: { userId: user.id } });
  });
});

describe('retries', () => {
  it('a mail server down for a day: retried with backoff, given up after 24 h, logged with the user id and kind only', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'given-up');
    const logged: Array<[string, unknown]> = [];
    const log = (message: string, meta?: unknown) => void logged.push([message, meta]);
    const sends: Date[] = [];
    const down: Mailer = {
      send: async (message) => {
        // The sweep takes every due notice: only this account's count (another test's may be due too).
        if (message.to === user.email) sends.push(h.clock.now());
        throw new Error(`550 mailbox ${message.to} unavailable`);
      },
    };
    const failing: WorkerDeps = { ...deps, mailer: down, logger: { error: log, warn: log, info: log, debug: log } as unknown as WorkerDeps['logger'] };
    const created = h.clock.now();
    await h.deps.prisma.$transaction((tx) => recordSecurityNotice(tx, { userId: user.id, notice: { kind: 'password_changed' }, ip: null, at: created }));
    h.clock.advance(10_000);
    for (let run = 0; run < 100; run += 1) {
      await runSecurityNoticeSweep(failing);
      const [row] = await noticesOf(user.id);
      if (row.nextAttemptAt === null) break;
      h.clock.advance(row.nextAttemptAt.getTime() - h.clock.now().getTime() + 1000);
    }
    const [row] = await noticesOf(user.id);
    expect(row).toMatchObject({ sentAt: null, nextAttemptAt: null, claimedUntil: null });
    expect(row.attempts).toBe(sends.length);
    // Waits that grow: the second wait is longer than the first, and none is longer than an hour.
    const waits = sends.slice(1).map((at, i) => at.getTime() - sends[i]!.getTime());
    expect(waits[1]!).toBeGreaterThan(waits[0]!);
    expect(Math.max(...waits)).toBeLessThanOrEqual(3600_000 * 1.25);
    // Tried for about 24 hours, and not much longer.
    const span = sends[sends.length - 1]!.getTime() - created.getTime();
    expect(span).toBeGreaterThanOrEqual(DAY);
    expect(span).toBeLessThan(DAY + 3600_000);
    expect(logged).toContainEqual(['Security notice given up: not sent within 24 hours', { notice: 'password_changed', user_id: user.id }]);
    expect(JSON.stringify(logged)).not.toContain(user.email);
    expect(mailsTo(user.email, PASSWORD_CHANGED)).toHaveLength(0);
  });
});

describe('the key notices per hour', () => {
  it('notices beyond the hourly limit are not written at all; the rows hold what the wording needs, never the key, and only until sent', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'many-keys');
    const values: string[] = [];
    const down: Mailer = { send: () => Promise.reject(new Error('421 try again later')) };
    await withApiMailer(down, async () => {
      for (let i = 0; i < KEY_NOTICES_PER_HOUR + 2; i += 1) {
        const res = await request(h.app).post('/api/v1/api-keys').set(bearer(user.token)).send({ name: `k${i}`, scopes: ['projects:read', 'findings:read'] });
        expect(res.status).toBe(201);
        values.push(res.body.key);
      }
      await until(() => noticesOf(user.id), (rows) => rows.length === KEY_NOTICES_PER_HOUR && rows.every((r) => r.attempts === 1 && r.claimedUntil === null));
    });
    const unsent = await noticesOf(user.id);
    expect(unsent.map((r) => (r.details as { last_this_hour: boolean }).last_this_hour)).toEqual([false, false, false, false, true]);
    expect(Object.keys(unsent[0]!.details as object).sort()).toEqual(['key_expires_at', 'key_name', 'key_prefix', 'key_scope_count', 'last_this_hour', 'organization_name']);
    expect(unsent[0]!.details).toMatchObject({ key_name: 'k0', key_scope_count: 2, organization_name: org.name, key_expires_at: null });
    for (const value of values) expect(JSON.stringify(unsent)).not.toContain(value);
    // Sent by the sweep after its backoff: the copies of the key's and the organization's names go with the send.
    h.clock.advance(10 * 60_000);
    await runSecurityNoticeSweep(deps);
    expect(mailsTo(user.email, KEY_CREATED)).toHaveLength(KEY_NOTICES_PER_HOUR);
    const sent = await noticesOf(user.id);
    expect(sent.every((r) => r.sentAt !== null)).toBe(true);
    expect(sent.map((r) => r.details)).toEqual(Array(KEY_NOTICES_PER_HOUR).fill({}));
    expect(sent.map((r) => r.kind)).toEqual(Array(KEY_NOTICES_PER_HOUR).fill('api_key_created'));
  });
});

describe('the retention purge', () => {
  it('removes notices sent, or given up, more than 30 days ago; keeps recent ones and those still being tried', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'purge');
    const now = h.clock.now();
    const record = async (daysAgo: number, state: 'sent' | 'given_up' | 'pending') => {
      const id = await h.deps.prisma.$transaction((tx) =>
        recordSecurityNotice(tx, { userId: user.id, notice: { kind: '2fa_enabled' }, ip: null, at: new Date(now.getTime() - daysAgo * DAY) }),
      );
      const sentAt = state === 'sent' ? new Date(now.getTime() - daysAgo * DAY + 1000) : null;
      await h.deps.prisma.securityNotice.update({ where: { id }, data: { sentAt, nextAttemptAt: state === 'pending' ? now : null } });
      return id;
    };
    const oldSent = await record(31, 'sent');
    const oldGivenUp = await record(31, 'given_up');
    const recentSent = await record(29, 'sent');
    const recentGivenUp = await record(2, 'given_up');
    const stillTried = await record(0.5, 'pending');

    const running = await startWorker(deps, { schedule: false });
    const connection = deps.redis();
    const events = new QueueEvents(running.maintenanceQueue.name, { connection, prefix: running.maintenanceQueue.opts.prefix });
    try {
      await events.waitUntilReady();
      const job = await running.maintenanceQueue.add('retention-purge', {}, { removeOnComplete: true });
      await job.waitUntilFinished(events, 30_000);
    } finally {
      await events.close();
      await connection.quit();
      await running.close();
    }
    const left = (await noticesOf(user.id)).map((r) => r.id).sort();
    expect(left).toEqual([recentSent, recentGivenUp, stillTried].sort());
    expect(left).not.toContain(oldSent);
    expect(left).not.toContain(oldGivenUp);
  });
});

it('the sweep is one of the maintenance schedules, every 15 seconds', () => {
  expect(MAINTENANCE_SCHEDULES.find((s) => s.name === 'security-notices')?.everyMs(deps)).toBe(15_000);
});
