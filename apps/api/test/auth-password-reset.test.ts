// Resetting a forgotten password by e-mail (POST /auth/password-reset, POST /auth/password-reset/confirm), as an
// attacker would try it: the request's answer says nothing about the account; the link's token is single use, lives
// 30 minutes, only the newest works, and names its own account only; the second factor still guards the account; every
// session ends and a sign-in started with the old password cannot finish; the request of a known account and the reset
// are audited where the user is a member (the request without slowing its answer), and neither the token nor the
// password reaches a log.
import net from 'node:net';
import { Writable } from 'node:stream';
import pg from 'pg';
import request from 'supertest';
import winston from 'winston';
import { newId, pgFields } from '@svc/db';
import { pseudonymFor } from '@svc/domain';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import {
  loginRequest,
  loginViaApi,
  oathtoolCode,
  resetLinkFor,
  resetMailsTo,
  signupAndVerify,
  signupViaApi,
  verificationTokenFor,
  wrongCode,
  type SignedUp,
} from './support/auth-helpers';
import { auditLog } from './support/audit-log';
import { untilBlockedBy } from './support/row-locks';
import { enableTotp } from './support/oauth-flow';
import { uniqueSuffix } from './support/harness';
import { AN_ADDRESS, loggedLine, whileMailRefused } from './support/smtp';

const NEW_PASSWORD = 'a brand new long passphrase';
const STEP_MS = 30_000;
const INVALID_LINK = { detail: 'Invalid, expired or already used password-reset link: ask for a new one.' };

let h: Harness;
let bystanders: TestOrg;

beforeAll(async () => {
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000', PASSWORD_RESET_RATE_LIMIT_PER_IP: '1000' });
  bystanders = await createOrg(h);
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

const askReset = (email: string, app = h.app) => request(app).post('/api/v1/auth/password-reset').send({ email });
const confirm = (body: Record<string, unknown>, app = h.app) => request(app).post('/api/v1/auth/password-reset/confirm').send(body);
const me = (token: string) => request(h.app).get('/api/v1/auth/me').set(bearer(token));
const signsIn = async (email: string, password: string) => (await loginRequest(h, { email, password })).status;
const liveSessions = (userId: string) => h.deps.prisma.session.count({ where: { userId, revokedAt: null } });
const passwordHashOf = async (userId: string) => (await h.deps.prisma.user.findUniqueOrThrow({ where: { id: userId } })).passwordHash;

const REQUESTED = 'auth.password_reset_requested';
/** The user's reset-request entries in one organization, straight from the table. */
const requestEntries = (organizationId: string, userId: string, db = h.deps.prisma) =>
  db.auditEvent.findMany({ where: { organizationId, action: REQUESTED, actorId: userId }, orderBy: { id: 'asc' } });

/** Polls `read` until `done` holds (or ~5 s pass): the request's entry is written after the answer. */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; ; i++) {
    const value = await read();
    if (done(value) || i >= 250) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A reset asked for `account` through the API, and the token of the mail it brought. */
async function resetToken(account: { email: string }, nth = 1): Promise<string> {
  const res = await askReset(account.email);
  expect(res.status).toBe(202);
  return (await resetLinkFor(h, account.email, nth)).token;
}

/** A verified user with 2FA on (through the API); the secret and a session token. */
async function userWith2fa(): Promise<SignedUp & { secret: string; token: string }> {
  const account = await signupAndVerify(h);
  const { token } = await loginViaApi(h, account.email, account.password);
  const secret = await enableTotp(h, token, account.password);
  return { ...account, secret, token };
}

describe('POST /auth/password-reset (asking for the link)', () => {
  it('answers an unknown, a pending and an active e-mail alike; only the active account gets a mail, with the token in the fragment', async () => {
    const active = await signupAndVerify(h);
    const pending = await signupViaApi(h);
    const unknown = `nobody-${uniqueSuffix()}@example.test`;

    const answers = [];
    for (const email of [unknown, pending.email, active.email, active.email.toUpperCase()]) {
      const res = await askReset(email);
      answers.push({ status: res.status, body: res.body, type: res.headers['content-type'], headers: Object.keys(res.headers).sort() });
    }
    expect(answers[0]).toEqual({ status: 202, body: { accepted: true }, type: 'application/json; charset=utf-8', headers: expect.any(Array) });
    for (const other of answers.slice(1)) expect(other).toEqual(answers[0]);

    // The active account gets two (its address is matched however it is written), linking to the dashboard page.
    const { link, token } = await resetLinkFor(h, active.email, 2);
    expect(link).toBe(`${h.config.publicBaseUrl}/reset-password#token=${token}`);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/); // 256 random bits
    // Only its sha256 is stored, with the reset purpose and 30 minutes to live.
    const rows = await h.deps.prisma.emailToken.findMany({ where: { userId: active.userId, purpose: 'reset_password' }, orderBy: { createdAt: 'asc' } });
    expect(rows).toHaveLength(2);
    expect(JSON.stringify(rows)).not.toContain(token);
    const ttl = rows[1]!.expiresAt.getTime() - rows[1]!.createdAt.getTime();
    expect(Math.abs(ttl - 30 * 60_000)).toBeLessThan(5_000);

    // The pending account got its verification mail only, and the unknown address nothing.
    await new Promise((r) => setTimeout(r, 200));
    expect(resetMailsTo(h, pending.email)).toEqual([]);
    expect(h.mail().filter((m) => m.to === pending.email)).toHaveLength(1);
    expect(h.mail().filter((m) => m.to === unknown)).toEqual([]);
    expect(await h.deps.prisma.emailToken.count({ where: { userId: pending.userId, purpose: 'reset_password' } })).toBe(0);
  });

  it('answers before any mail is sent: a mail server that hangs or refuses changes nothing in the answer', async () => {
    // An SMTP server that accepts the connection and never says a word, and one that is not there at all.
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    const port = (silent.address() as net.AddressInfo).port;
    const hanging = await createHarness({ SMTP_URL: `smtp://127.0.0.1:${port}` });
    const refusing = await createHarness({ SMTP_URL: 'smtp://127.0.0.1:1' });
    const asked: SignedUp[] = [];
    try {
      for (const world of [hanging, refusing]) {
        const account = await signupAndVerify(h); // in the shared database; mail goes nowhere from these two apps
        asked.push(account);
        const started = Date.now();
        const res = await askReset(account.email, world.app);
        expect({ status: res.status, body: res.body }).toEqual({ status: 202, body: { accepted: true } });
        expect(Date.now() - started).toBeLessThan(2_000);
        const unknown = await askReset(`nobody-${uniqueSuffix()}@example.test`, world.app);
        expect({ status: unknown.status, body: unknown.body }).toEqual({ status: 202, body: { accepted: true } });
      }
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
      // The requests' follow-ups (the mail, then the audit entry) end before their apps close: a write still under
      // way when the pool closes waits for a connection it never gets.
      for (const account of asked) {
        await eventually(() => requestEntries(account.organizationId, account.userId), (found) => found.length > 0);
      }
      await hanging.close();
      await refusing.close();
    }
  });

  it("logs a mail server's refusal of the reset mail with the user's id, without the address it quotes", async () => {
    const account = await signupAndVerify(h);
    const { logged, refused } = await whileMailRefused(h, async (lines) => {
      expect((await askReset(account.email)).status).toBe(202);
      await loggedLine(lines, 'Could not send a password-reset e-mail');
    });
    expect(refused).toEqual([account.email]);
    expect(logged).toContainEqual([
      'Could not send a password-reset e-mail',
      { user_id: account.userId, error: expect.stringContaining('Recipient address rejected') },
    ]);
    expect(JSON.stringify(logged)).not.toMatch(AN_ADDRESS);
  });

  it('is rate limited per e-mail (whether it has an account or not) and per client address: 429 with the error envelope', async () => {
    const strict = await createHarness({ PASSWORD_RESET_RATE_LIMIT_PER_EMAIL: '2', PASSWORD_RESET_RATE_LIMIT_PER_IP: '6' });
    try {
      const account = await signupAndVerify(strict);
      const unknown = `nobody-${uniqueSuffix()}@example.test`;
      for (const email of [account.email, unknown]) {
        expect((await askReset(email, strict.app)).status).toBe(202);
        expect((await askReset(email, strict.app)).status).toBe(202);
        const limited = await askReset(email, strict.app);
        expect(limited.status).toBe(429);
        expect(limited.body).toEqual({ detail: expect.stringMatching(/^Rate limit exceeded\. Retry after \d+s\.$/) });
        expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      }
      // Two mails for the account, not three; two audit entries, not three (a refused request is not recorded).
      await resetLinkFor(strict, account.email, 2);
      await eventually(() => requestEntries(account.organizationId, account.userId, strict.deps.prisma), (found) => found.length >= 2);
      await new Promise((r) => setTimeout(r, 200));
      expect(resetMailsTo(strict, account.email)).toHaveLength(2);
      expect(await requestEntries(account.organizationId, account.userId, strict.deps.prisma)).toHaveLength(2);
      // The client address has used its 6 (the refused ones count too): a fresh e-mail is refused as well.
      const fromSameAddress = await askReset(`fresh-${uniqueSuffix()}@example.test`, strict.app);
      expect(fromSameAddress.status).toBe(429);
      expect(fromSameAddress.body.detail).toMatch(/^Rate limit exceeded/);
    } finally {
      await strict.close();
    }
  });

  it('refuses a malformed e-mail with 400 (the envelope), like the login does', async () => {
    const res = await request(h.app).post('/api/v1/auth/password-reset').send({ email: 'not an address' });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('email');
    expect((await request(h.app).post('/api/v1/auth/password-reset').send({})).status).toBe(400);
  });
});

describe('POST /auth/password-reset: the audit entry of a request (auth.password_reset_requested)', () => {
  const UA = 'reset-audit-test/1.0';
  const askAs = (email: string, app = h.app) => request(app).post('/api/v1/auth/password-reset').set('User-Agent', UA).send({ email });

  it('a known account\'s request is recorded in each of its organizations and in no other; an unknown e-mail nowhere', async () => {
    const active = await signupAndVerify(h);
    const second = await h.deps.prisma.organization.create({ data: { id: newId('org'), name: `Second ${uniqueSuffix()}` } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: active.userId, role: 'member' } });
    const pending = await signupViaApi(h);
    const unknown = `nobody-${uniqueSuffix()}@example.test`;

    for (const email of [active.email, pending.email, unknown]) {
      const res = await askAs(email);
      expect({ status: res.status, body: res.body }).toEqual({ status: 202, body: { accepted: true } });
    }
    const { token } = await resetLinkFor(h, active.email);

    // The active account: once in its own organization and once in the second, the mail sent.
    for (const organizationId of [active.organizationId, second.id]) {
      const found = await eventually(() => requestEntries(organizationId, active.userId), (rows) => rows.length > 0);
      expect(found).toEqual([
        expect.objectContaining({
          actorType: 'user',
          actorId: active.userId,
          actorLabel: active.email,
          targetType: 'user',
          targetId: active.userId,
          userAgent: UA,
          metadata: { mail: 'sent' },
        }),
      ]);
      expect(JSON.stringify(found)).not.toContain(token);
    }
    // As the organization's members read it (GET /audit-events), and not at all in an organization the user is not in.
    const session = await loginViaApi(h, active.email, active.password);
    expect((await auditLog(h, session.token, { action: REQUESTED })).map((e) => [e.actor_id, e.target_id, e.metadata])).toEqual([
      [active.userId, active.userId, { mail: 'sent' }],
    ]);
    expect(await auditLog(h, bystanders.owner.token, { action: REQUESTED })).toEqual([]);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: REQUESTED, actorId: active.userId } })).toBe(2);

    // The pending account: recorded, no mail, and why.
    const pendingEntries = await eventually(() => requestEntries(pending.organizationId, pending.userId), (rows) => rows.length > 0);
    expect(pendingEntries.map((e) => e.metadata)).toEqual([{ mail: 'not_sent_pending_verification' }]);

    // The unknown address: in no entry of any organization.
    await new Promise((r) => setTimeout(r, 200));
    const [{ n }] = await h.deps.prisma.$queryRaw<Array<{ n: number }>>`
      SELECT count(*)::int AS n FROM audit_events WHERE actor_label = ${unknown} OR metadata::text LIKE ${`%${unknown}%`}`;
    expect(n).toBe(0);
  });

  it('the answer does not wait for the entry: known e-mails answer while its write is held up', async () => {
    const active = await signupAndVerify(h);
    const pending = await signupViaApi(h);
    for (const account of [pending, active]) {
      // A second connection holds the organization's row: the entry's insert (its foreign key) waits for it.
      const holder = new pg.Client(pgFields(h.config.databaseUrl));
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [account.organizationId]);
        const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
        const res = await askAs(account.email);
        expect({ status: res.status, body: res.body }).toEqual({ status: 202, body: { accepted: true } });
        // Answered; the entry's write is still waiting for the held row (untilBlockedBy throws if it never does).
        await untilBlockedBy(h, pid, 1);
        expect(await requestEntries(account.organizationId, account.userId)).toEqual([]);
        await holder.query('COMMIT');
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
      expect(await eventually(() => requestEntries(account.organizationId, account.userId), (rows) => rows.length > 0)).toHaveLength(1);
    }
  });

  it('a mail that could not be sent is recorded as failed (the answer the same 202)', async () => {
    const refusing = await createHarness({ SMTP_URL: 'smtp://127.0.0.1:1' });
    try {
      const account = await signupAndVerify(h); // in the shared database; mail goes nowhere from `refusing`
      const res = await askAs(account.email, refusing.app);
      expect({ status: res.status, body: res.body }).toEqual({ status: 202, body: { accepted: true } });
      const found = await eventually(() => requestEntries(account.organizationId, account.userId), (rows) => rows.length > 0);
      expect(found.map((e) => e.metadata)).toEqual([{ mail: 'failed' }]);
    } finally {
      await refusing.close();
    }
  });
});

describe('POST /auth/password-reset/confirm (setting the new password)', () => {
  it('sets the new password, ends every session of the user (in each organization), keeps API keys, audits it; another user is untouched', async () => {
    const account = await signupAndVerify(h);
    const second = await h.deps.prisma.organization.create({ data: { id: newId('org'), name: `Second ${uniqueSuffix()}` } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: account.userId, role: 'member' } });
    const here = await loginViaApi(h, account.email, account.password);
    const there = await loginRequest(h, { email: account.email, password: account.password, organization_id: second.id });
    expect(there.status).toBe(200);
    const key = await request(h.app).post('/api/v1/api-keys').set(bearer(here.token)).send({ name: 'ci', scopes: ['profile:read'] });
    expect(key.status).toBe(201);
    // Another user, signed in, with a reset link of their own outstanding.
    const other = await signupAndVerify(h);
    const otherSession = await loginViaApi(h, other.email, other.password);
    const otherToken = await resetToken(other);
    const otherHash = await passwordHashOf(other.userId);

    const token = await resetToken(account);
    const res = await confirm({ token, new_password: NEW_PASSWORD });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ password_reset: true, sessions_revoked: true });
    expect(res.headers['set-cookie']).toBeUndefined(); // no session: the user signs in

    expect(await signsIn(account.email, account.password)).toBe(401);
    expect(await signsIn(account.email, NEW_PASSWORD)).toBe(200);
    expect((await me(here.token)).status).toBe(401);
    expect((await me(there.body.token)).status).toBe(401);
    expect((await me(key.body.key)).status).toBe(200);

    // The other user: same password, session alive, their link still good.
    expect(await passwordHashOf(other.userId)).toBe(otherHash);
    expect((await me(otherSession.token)).status).toBe(200);
    expect(await signsIn(other.email, other.password)).toBe(200);
    expect((await confirm({ token: otherToken, new_password: `${NEW_PASSWORD} two` })).status).toBe(200);
    expect(await signsIn(account.email, NEW_PASSWORD)).toBe(200); // and that reset did nothing to the first account

    // Audited once in each of the user's organizations, none elsewhere; no token, no password in it.
    const fresh = await loginViaApi(h, account.email, NEW_PASSWORD);
    const entries = await auditLog(h, fresh.token, { action: 'auth.password_reset' });
    expect(entries).toEqual([
      expect.objectContaining({
        action: 'auth.password_reset',
        actor_type: 'user',
        actor_id: account.userId,
        target_type: 'user',
        target_id: account.userId,
        metadata: { sessions_revoked: true },
      }),
    ]);
    expect(JSON.stringify(entries)).not.toContain(token);
    expect(JSON.stringify(entries)).not.toContain(NEW_PASSWORD);
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: second.id, action: 'auth.password_reset', actorId: account.userId } })).toBe(1);
    expect(await auditLog(h, bystanders.owner.token, { action: 'auth.password_reset' })).toEqual([]);
  });

  it('a link works once: of two confirmations at once exactly one succeeds, the other gets the unknown-link 400 and changes nothing', async () => {
    const account = await signupAndVerify(h);
    const token = await resetToken(account);
    const [a, b] = await Promise.all([
      confirm({ token, new_password: `${NEW_PASSWORD} A` }),
      confirm({ token, new_password: `${NEW_PASSWORD} B` }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 400]);
    const [winner, loser] = a.status === 200 ? ['A', 'B'] : ['B', 'A'];
    expect((a.status === 400 ? a : b).body).toEqual(INVALID_LINK);
    expect(await signsIn(account.email, `${NEW_PASSWORD} ${winner}`)).toBe(200);
    expect(await signsIn(account.email, `${NEW_PASSWORD} ${loser}`)).toBe(401);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.password_reset', actorId: account.userId } })).toBe(1);

    // Spent: used again later, the same 400 as a token that never existed.
    const again = await confirm({ token, new_password: `${NEW_PASSWORD} C` });
    expect(again.status).toBe(400);
    expect(again.body).toEqual(INVALID_LINK);
    const guessed = await confirm({ token: token.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')), new_password: `${NEW_PASSWORD} C` });
    expect(guessed.body).toEqual(INVALID_LINK);
    expect(await signsIn(account.email, `${NEW_PASSWORD} ${winner}`)).toBe(200);
  });

  it('a link expires after 30 minutes', async () => {
    const account = await signupAndVerify(h);
    const token = await resetToken(account);
    h.clock.advance(30 * 60_000);
    const late = await confirm({ token, new_password: NEW_PASSWORD });
    expect(late.status).toBe(400);
    expect(late.body).toEqual(INVALID_LINK);
    expect(await signsIn(account.email, account.password)).toBe(200);

    const fresh = await resetToken(account, 2);
    h.clock.advance(29 * 60_000);
    expect((await confirm({ token: fresh, new_password: NEW_PASSWORD })).status).toBe(200);
  });

  it('only the newest link works; a successful reset also spends the others', async () => {
    const account = await signupAndVerify(h);
    const first = await resetToken(account, 1);
    const second = await resetToken(account, 2);
    const old = await confirm({ token: first, new_password: NEW_PASSWORD });
    expect(old.status).toBe(400);
    expect(old.body).toEqual(INVALID_LINK);
    expect(await signsIn(account.email, account.password)).toBe(200);
    expect((await confirm({ token: second, new_password: NEW_PASSWORD })).status).toBe(200);
    expect(await h.deps.prisma.emailToken.count({ where: { userId: account.userId, purpose: 'reset_password', usedAt: null } })).toBe(0);
  });

  it('a link of one purpose is no link of the other: an e-mail verification token resets nothing, a reset token verifies nothing', async () => {
    const pending = await signupViaApi(h);
    const verification = verificationTokenFor(h, pending.email);
    const res = await confirm({ token: verification, new_password: NEW_PASSWORD });
    expect(res.status).toBe(400);
    expect(res.body).toEqual(INVALID_LINK);
    // The verification token is still good for what it is for.
    expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: verification, password: pending.password })).status).toBe(200);
    expect(await signsIn(pending.email, pending.password)).toBe(200);

    const account = await signupAndVerify(h);
    const token = await resetToken(account);
    expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token, password: account.password })).status).toBe(400);
    expect((await confirm({ token, new_password: NEW_PASSWORD })).status).toBe(200);
  });

  it('refuses a new password the signup would refuse (400 naming new_password), leaving the link usable', async () => {
    const account = await signupAndVerify(h);
    const token = await resetToken(account);
    for (const new_password of ['short', 'x'.repeat(73), undefined]) {
      const res = await confirm({ token, new_password });
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('new_password');
    }
    expect((await confirm({ new_password: NEW_PASSWORD })).status).toBe(400);
    expect(await signsIn(account.email, account.password)).toBe(200);
    expect((await confirm({ token, new_password: NEW_PASSWORD })).status).toBe(200);
  });

  it('an account without a password (GitHub or Google sign-in) may set one this way', async () => {
    const account = await signupAndVerify(h);
    await h.deps.prisma.user.update({ where: { id: account.userId }, data: { passwordHash: null } });
    expect(await signsIn(account.email, account.password)).toBe(401);
    const token = await resetToken(account);
    expect((await confirm({ token, new_password: NEW_PASSWORD })).status).toBe(200);
    expect(await signsIn(account.email, NEW_PASSWORD)).toBe(200);
  });
});

describe('password reset and two-factor authentication', () => {
  it('needs a current code: missing (400 naming code), wrong or replayed (400, counted) change nothing; a fresh code resets', async () => {
    const account = await userWith2fa();
    const token = await resetToken(account);

    const missing = await confirm({ token, new_password: NEW_PASSWORD });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ detail: expect.stringContaining('"code"'), code: 'TOTP_REQUIRED' });

    const wrong = await confirm({ token, new_password: NEW_PASSWORD, code: wrongCode(account.secret, h.clock.now()) });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: 'Invalid two-factor code.' });

    // The code the enable step used is spent: refused as a replay.
    const { totpLastStep } = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    const replay = await confirm({ token, new_password: NEW_PASSWORD, code: oathtoolCode(account.secret, new Date(Number(totpLastStep) * STEP_MS)) });
    expect(replay.status).toBe(400);
    expect(replay.body).toEqual({ detail: 'Invalid two-factor code.' });

    // Nothing changed: the password, the session, the link.
    expect((await me(account.token)).status).toBe(200);
    expect((await loginRequest(h, { email: account.email, password: account.password })).body.requires_2fa).toBe(true);
    expect(await h.deps.prisma.emailToken.count({ where: { userId: account.userId, purpose: 'reset_password', usedAt: null } })).toBe(1);

    h.clock.advance(STEP_MS);
    const code = oathtoolCode(account.secret, h.clock.now());
    const ok = await confirm({ token, new_password: NEW_PASSWORD, code });
    expect(ok.status).toBe(200);
    expect((await me(account.token)).status).toBe(401);
    // 2FA stays on, and the accepted code is spent: it cannot also finish a sign-in.
    const partial = await loginRequest(h, { email: account.email, password: NEW_PASSWORD });
    expect(partial.body.requires_2fa).toBe(true);
    const reused = await request(h.app).post('/api/v1/auth/login/2fa').send({ partial_token: partial.body.partial_token, code });
    expect(reused.status).toBe(401);
    const entries = await h.deps.prisma.auditEvent.findMany({ where: { action: 'auth.password_reset', actorId: account.userId } });
    expect(entries.map((e) => e.metadata)).toEqual([{ sessions_revoked: true, second_factor: 'totp' }]);
  });

  it('wrong codes count with the user\'s other wrong codes: past TOTP_MAX_FAILURES even a right code is refused (429), and so is the sign-in', async () => {
    const account = await userWith2fa();
    const token = await resetToken(account);
    h.clock.advance(STEP_MS);
    for (let i = 0; i < 5; i++) {
      const res = await confirm({ token, new_password: NEW_PASSWORD, code: wrongCode(account.secret, h.clock.now()) });
      expect(res.status).toBe(400);
    }
    const right = await confirm({ token, new_password: NEW_PASSWORD, code: oathtoolCode(account.secret, h.clock.now()) });
    expect(right.status).toBe(429);
    expect(right.body.detail).toMatch(/^Rate limit exceeded/);
    const partial = await loginRequest(h, { email: account.email, password: account.password });
    const signIn = await request(h.app).post('/api/v1/auth/login/2fa').send({ partial_token: partial.body.partial_token, code: oathtoolCode(account.secret, h.clock.now()) });
    expect(signIn.status).toBe(429);
    expect(await signsIn(account.email, NEW_PASSWORD)).toBe(401);
  });

  it('a partial token (2FA) earned with the old password cannot be exchanged after the reset', async () => {
    const account = await userWith2fa();
    h.clock.advance(STEP_MS);
    const partial = await loginRequest(h, { email: account.email, password: account.password });
    expect(partial.body.requires_2fa).toBe(true);

    const token = await resetToken(account);
    h.clock.advance(STEP_MS);
    expect((await confirm({ token, new_password: NEW_PASSWORD, code: oathtoolCode(account.secret, h.clock.now()) })).status).toBe(200);

    h.clock.advance(STEP_MS);
    const exchanged = await request(h.app)
      .post('/api/v1/auth/login/2fa')
      .send({ partial_token: partial.body.partial_token, code: oathtoolCode(account.secret, h.clock.now()) });
    expect(exchanged.status).toBe(401);
    expect(await h.deps.prisma.session.count({ where: { userId: account.userId, revokedAt: null } })).toBe(0);
  });
});

describe('password reset racing other changes', () => {
  it('a reset and a change of password at once: whichever commits first holds, the other changes nothing', async () => {
    const account = await signupAndVerify(h);
    const session = await loginViaApi(h, account.email, account.password);
    const token = await resetToken(account);
    const changedPassword = `${NEW_PASSWORD} changed`;
    const [reset, change] = await Promise.all([
      confirm({ token, new_password: NEW_PASSWORD }),
      request(h.app).post('/api/v1/auth/password').set(bearer(session.token)).send({ current_password: account.password, new_password: changedPassword }),
    ]);
    if (reset.status === 200) {
      // The reset committed first (a change committed first would have spent the link): the change found the password
      // changed (409), its session ended (401) or its current password no longer right (400).
      expect([400, 401, 409]).toContain(change.status);
      expect(await signsIn(account.email, NEW_PASSWORD)).toBe(200);
      expect(await signsIn(account.email, changedPassword)).toBe(401);
      expect((await me(session.token)).status).toBe(401);
    } else {
      // The change won and spent the link: the reset is the unknown-link 400 and the changing session stays.
      expect(change.status).toBe(200);
      expect(reset.status).toBe(400);
      expect(reset.body).toEqual(INVALID_LINK);
      expect(await signsIn(account.email, changedPassword)).toBe(200);
      expect(await signsIn(account.email, NEW_PASSWORD)).toBe(401);
      expect((await me(session.token)).status).toBe(200);
    }
  });

  it('a change of password spends the reset links asked for before it (one read from the mail sets nothing)', async () => {
    const account = await signupAndVerify(h);
    const session = await loginViaApi(h, account.email, account.password);
    const token = await resetToken(account);
    const changedPassword = `${NEW_PASSWORD} by the owner`;
    const change = await request(h.app).post('/api/v1/auth/password').set(bearer(session.token)).send({ current_password: account.password, new_password: changedPassword });
    expect(change.status).toBe(200);
    const late = await confirm({ token, new_password: NEW_PASSWORD });
    expect(late.status).toBe(400);
    expect(late.body).toEqual(INVALID_LINK);
    expect(await signsIn(account.email, changedPassword)).toBe(200);
    expect((await me(session.token)).status).toBe(200);
    // A link asked for after the change works as ever.
    expect((await confirm({ token: await resetToken(account, 2), new_password: NEW_PASSWORD })).status).toBe(200);
  });

  it('a session opened before the reset cannot change the password afterwards (401)', async () => {
    const account = await signupAndVerify(h);
    const session = await loginViaApi(h, account.email, account.password);
    const token = await resetToken(account);
    expect((await confirm({ token, new_password: NEW_PASSWORD })).status).toBe(200);
    const change = await request(h.app).post('/api/v1/auth/password').set(bearer(session.token)).send({ current_password: account.password, new_password: `${NEW_PASSWORD} x` });
    expect(change.status).toBe(401);
    expect(await signsIn(account.email, NEW_PASSWORD)).toBe(200);
  });

  it('the link of one user resets nothing of another, even one with the same password: their sessions stay', async () => {
    const a = await signupAndVerify(h);
    const b = await signupAndVerify(h); // same SIGNUP_PASSWORD
    const bSession = await loginViaApi(h, b.email, b.password);
    const token = await resetToken(a);
    expect((await confirm({ token, new_password: NEW_PASSWORD })).status).toBe(200);
    expect(await liveSessions(b.userId)).toBe(1);
    expect((await me(bSession.token)).status).toBe(200);
    expect(await signsIn(b.email, b.password)).toBe(200);
  });
});

describe('password reset and an erased account (GDPR)', () => {
  /** What the erasure's account step writes (apps/worker/src/erasure.ts eraseAccount), in `db`: the address becomes the pseudonym. */
  async function eraseAccount(db: pg.Client | typeof h.deps.prisma, userId: string) {
    const pseudonym = pseudonymFor(newId('era'));
    const sql = [
      ['DELETE FROM email_tokens WHERE user_id = $1', [userId]],
      ['UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL', [userId]],
      [
        'UPDATE users SET name = $2, email = $3, password_hash = NULL, totp_secret_enc = NULL, totp_pending_enc = NULL, totp_enabled = false, totp_last_step = NULL WHERE id = $1',
        [userId, pseudonym.name, pseudonym.email],
      ],
    ] as const;
    for (const [text, values] of sql) {
      if (db instanceof pg.Client) await db.query(text, [...values]);
      else await db.$executeRawUnsafe(text, ...values);
    }
    return pseudonym;
  }
  const settle = () => new Promise((r) => setTimeout(r, 500));
  const liveResetTokens = (userId: string) => h.deps.prisma.emailToken.count({ where: { userId, purpose: 'reset_password', usedAt: null } });

  it('an erased account gets no link at its pseudonymous address: the same 202, no token stored, no mail', async () => {
    const account = await signupAndVerify(h);
    const pseudonym = await eraseAccount(h.deps.prisma, account.userId);
    const res = await askReset(pseudonym.email);
    expect({ status: res.status, body: res.body }).toEqual({ status: 202, body: { accepted: true } });
    await settle();
    expect(resetMailsTo(h, pseudonym.email)).toEqual([]);
    expect(await h.deps.prisma.emailToken.count({ where: { userId: account.userId } })).toBe(0);
    // Nor an audit entry (a real erasure leaves the account in no organization anyway).
    expect(await requestEntries(account.organizationId, account.userId)).toEqual([]);
  });

  it('an erasure committed while the link was being made: no link reaches the address the account had, none is stored', async () => {
    const account = await signupAndVerify(h);
    const holder = new pg.Client(pgFields(h.config.databaseUrl));
    await holder.connect();
    try {
      // The erasure's transaction holds the user's row; the request is answered (it found the active account) and
      // its link waits for the row.
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [account.userId]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      expect((await askReset(account.email)).status).toBe(202);
      await untilBlockedBy(h, pid, 1);
      await eraseAccount(holder, account.userId);
      await holder.query('COMMIT');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    await settle();
    // The person asked to be forgotten: their former mailbox gets no link to set a password on what is left.
    expect(resetMailsTo(h, account.email)).toEqual([]);
    expect(await liveResetTokens(account.userId)).toBe(0);
    const { passwordHash } = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(passwordHash).toBeNull();
    // Recorded where the account still is a member (here: the erasure's account step only), labelled with the
    // pseudonym, not the address the person had.
    const entries = await eventually(() => requestEntries(account.organizationId, account.userId), (rows) => rows.length > 0);
    expect(entries.map((e) => [e.actorLabel, e.metadata])).toEqual([[expect.stringMatching(/^erased-/), { mail: 'not_sent_account_changed' }]]);
  });
});

describe('logs', () => {
  it('no log line carries the reset token or the new password', async () => {
    const lines: string[] = [];
    const logged = await createHarness({ LOG_LEVEL: 'debug' });
    const logger = logged.deps.logger;
    logger.silent = false;
    logger.clear();
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    logger.add(new winston.transports.Stream({ stream }));
    try {
      const account = await signupAndVerify(logged);
      expect((await askReset(account.email, logged.app)).status).toBe(202);
      const { token } = await resetLinkFor(logged, account.email);
      expect((await confirm({ token, new_password: 'short' }, logged.app)).status).toBe(400);
      expect((await confirm({ token: `${token}x`, new_password: NEW_PASSWORD }, logged.app)).status).toBe(400);
      expect((await confirm({ token, new_password: NEW_PASSWORD }, logged.app)).status).toBe(200);
      // The access log saw the requests, and nothing of their bodies.
      expect(lines.some((l) => l.includes('/auth/password-reset/confirm'))).toBe(true);
      const all = lines.join('\n');
      expect(all).not.toContain(token);
      expect(all).not.toContain(NEW_PASSWORD);
    } finally {
      await logged.close();
    }
  });
});
