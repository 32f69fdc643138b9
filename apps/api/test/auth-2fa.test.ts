// TOTP two-factor login, checked against codes from oathtool (an independent implementation). The harness
// clock is real time plus an offset; codes are computed for the clock's time, and the clock is moved by whole
// 30-second steps where a test needs a fresh code.
import { pbkdf2 } from 'node:crypto';
import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import { loginRequest, loginViaApi, oathtoolCode, sessionIdOf, setCookies, signupAndVerify, wrongCode, type SignedUp } from './support/auth-helpers';
import { auditLog, sentWhileHeld } from './support/audit-log';

const STEP_MS = 30_000;

let h: Harness;
let bystanders: TestOrg;

beforeAll(async () => {
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
  bystanders = await createOrg(h);
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

const codeNow = (secret: string) => oathtoolCode(secret, h.clock.now());
const nextStep = () => h.clock.advance(STEP_MS);
const post = (path: string, token: string, body: Record<string, unknown> = {}) =>
  request(h.app).post(`/api/v1${path}`).set(bearer(token)).send(body);
const loginWith2fa = (partialToken: string, code: string) =>
  request(h.app).post('/api/v1/auth/login/2fa').send({ partial_token: partialToken, code });

/** A verified user with 2FA enabled (through the API); returns the secret and a session token. */
async function userWith2fa(): Promise<SignedUp & { secret: string; token: string }> {
  const account = await signupAndVerify(h);
  const { token } = await loginViaApi(h, account.email, account.password);
  const setup = await post('/auth/2fa/setup', token);
  expect(setup.status).toBe(200);
  const enable = await post('/auth/2fa/enable', token, { code: codeNow(setup.body.secret), current_password: account.password });
  expect(enable.status).toBe(200);
  return { ...account, secret: setup.body.secret, token };
}

/** `count` distinct codes none of which is valid now (the step before, this one, the next). */
function wrongCodes(secret: string, count: number): string[] {
  const valid = new Set([-STEP_MS, 0, STEP_MS].map((d) => oathtoolCode(secret, new Date(h.clock.now().getTime() + d))));
  const codes: string[] = [];
  for (let n = 0; codes.length < count; n++) {
    const candidate = String((200_000 + n * 7919) % 1_000_000).padStart(6, '0');
    if (!valid.has(candidate)) codes.push(candidate);
  }
  return codes;
}

async function partialTokenFor(account: SignedUp): Promise<string> {
  const res = await loginRequest(h, { email: account.email, password: account.password });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
  return res.body.partial_token;
}

it('oathtool is installed (the 2FA tests need it; install with: apt-get install -y oathtool)', () => {
  expect(oathtoolCode('JBSWY3DPEHPK3PXP', new Date(1_700_000_000_000))).toBe('324550');
});

describe('2FA setup, enable and login', () => {
  it('runs the whole flow with oathtool codes, refusing reused codes and reused partial tokens', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);

    const setup = await post('/auth/2fa/setup', token);
    expect(setup.status).toBe(200);
    const { secret, otpauth_url: url } = setup.body;
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    const parsed = new URL(url);
    expect(parsed.protocol).toBe('otpauth:');
    expect(parsed.host).toBe('totp');
    expect(decodeURIComponent(parsed.pathname)).toContain(account.email);
    expect(parsed.searchParams.get('secret')).toBe(secret);
    expect(parsed.searchParams.get('issuer')).toBeTruthy();

    // Stored sealed, never in clear; not active until enabled.
    const pending = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(pending.totpPendingEnc).toMatch(/^v1\./);
    expect(pending.totpPendingEnc).not.toContain(secret);
    expect(pending.totpEnabled).toBe(false);
    expect((await loginRequest(h, { email: account.email, password: account.password })).body.token).toEqual(expect.any(String));

    const current_password = account.password;
    const bad = await post('/auth/2fa/enable', token, { code: wrongCode(secret, h.clock.now()), current_password });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ detail: expect.any(String) });
    expect((await post('/auth/2fa/enable', token, { code: 'abcdef', current_password })).status).toBe(400);

    const enableCode = codeNow(secret);
    const enabled = await post('/auth/2fa/enable', token, { code: enableCode, current_password });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toEqual({ two_factor_enabled: true });
    const stored = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(stored.totpEnabled).toBe(true);
    expect(stored.totpSecretEnc).toMatch(/^v1\./);
    expect(stored.totpPendingEnc).toBeNull();
    expect((await post('/auth/2fa/setup', token)).status).toBe(409);
    expect((await post('/auth/2fa/enable', token, { code: enableCode, current_password })).status).toBe(409);
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(token))).body.user.two_factor_enabled).toBe(true);

    // Password login now yields a partial token, and no session or cookie.
    const first = await loginRequest(h, { email: account.email, password: account.password });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
    expect(first.headers['set-cookie']).toBeUndefined();
    const partial = first.body.partial_token;

    // A partial token is never a session.
    const asSession = await request(h.app).get('/api/v1/auth/me').set(bearer(partial));
    expect(asSession.status).toBe(401);
    expect(asSession.body).toEqual({ detail: expect.any(String) });
    expect((await request(h.app).get('/api/v1/auth/me').set('Cookie', `session=${partial}`)).status).toBe(401);

    // The code that enabled 2FA was used: refused for the rest of its window (RFC 6238 5.2).
    const reused = await loginWith2fa(partial, enableCode);
    expect(reused.status).toBe(401);
    expect(reused.body).toEqual({ detail: 'Invalid two-factor code.' });

    nextStep();
    const loginCode = codeNow(secret);
    const ok = await loginWith2fa(partial, loginCode);
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ token: expect.any(String), expires_at: expect.any(String), csrf_token: expect.any(String) });
    const cookies = setCookies(ok);
    expect(cookies.get('session')?.value).toBe(ok.body.token);
    expect(cookies.get('session')?.attributes.has('httponly')).toBe(true);
    const session = await request(h.app).get('/api/v1/auth/me').set(bearer(ok.body.token));
    expect(session.status).toBe(200);
    expect(session.body.user.id).toBe(account.userId);

    // The same partial token a second time, even with a fresh code: refused.
    nextStep();
    const twice = await loginWith2fa(partial, codeNow(secret));
    expect(twice.status).toBe(401);
    expect(twice.body.detail).toContain('partial token');

    // The login code on a new partial token: refused (the code was used).
    h.clock.reset();
    h.clock.advance(STEP_MS);
    const replay = await loginWith2fa(await partialTokenFor(account), loginCode);
    expect(replay.status).toBe(401);
    expect(replay.body).toEqual({ detail: 'Invalid two-factor code.' });

    // Disable needs the password and a valid, unused code; afterwards password login gives a session again.
    nextStep();
    nextStep();
    expect((await post('/auth/2fa/disable', ok.body.token, { code: wrongCode(secret, h.clock.now()), current_password })).status).toBe(400);
    const disabled = await post('/auth/2fa/disable', ok.body.token, { code: codeNow(secret), current_password });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toEqual({ two_factor_enabled: false });
    expect((await post('/auth/2fa/disable', ok.body.token, { code: codeNow(secret), current_password })).status).toBe(409);
    const plain = await loginRequest(h, { email: account.email, password: account.password });
    expect(plain.status).toBe(200);
    expect(plain.body.token).toEqual(expect.any(String));
    const cleared = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(cleared.totpSecretEnc).toBeNull();
  });

  it('locks a partial token after 5 wrong codes: 429 with Retry-After, even for a right code', async () => {
    const account = await userWith2fa();
    nextStep();
    const partial = await partialTokenFor(account);
    const wrong = wrongCode(account.secret, h.clock.now());
    for (let i = 0; i < 5; i++) {
      const res = await loginWith2fa(partial, wrong);
      expect(res.status).toBe(401);
    }
    const locked = await loginWith2fa(partial, codeNow(account.secret));
    expect(locked.status).toBe(429);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(locked.body).toEqual({ detail: `Rate limit exceeded. Retry after ${locked.headers['retry-after']}s.` });
    // Wrong codes count per user as well: another partial token of the same user is locked too.
    const fresh = await loginWith2fa(await partialTokenFor(account), codeNow(account.secret));
    expect(fresh.status).toBe(429);
  });

  it('counts wrong codes per user across partial tokens: a fresh partial token does not buy 5 more guesses', async () => {
    const account = await userWith2fa();
    nextStep();
    const wrong = wrongCode(account.secret, h.clock.now());
    // An attacker who knows the password signs in again and again (the login limit allows 10 a minute per e-mail),
    // spending a few guesses on each partial token, so that no token is ever locked.
    for (let i = 0; i < 5; i++) {
      const res = await loginWith2fa(await partialTokenFor(account), wrong);
      expect(res.status).toBe(401);
    }
    const guess = await loginWith2fa(await partialTokenFor(account), wrong);
    expect(guess.status).toBe(429);
    expect(Number(guess.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(guess.body).toEqual({ detail: `Rate limit exceeded. Retry after ${guess.headers['retry-after']}s.` });
    // Locked for the user, whatever the token: even the right code gets no session until the window has passed.
    const sessionsBefore = await h.deps.prisma.session.count({ where: { userId: account.userId } });
    const right = await loginWith2fa(await partialTokenFor(account), codeNow(account.secret));
    expect(right.status).toBe(429);
    expect(right.body.token).toBeUndefined();
    expect(await h.deps.prisma.session.count({ where: { userId: account.userId } })).toBe(sessionsBefore);
  });

  it('a burst of concurrent guesses gets no more codes checked than the limit, however many requests it sends', async () => {
    // Each guess takes its point before its code is checked: counted only after a wrong answer, all twenty passed
    // the check of the count at once, and the right code among them signed in.
    const account = await userWith2fa();
    nextStep();
    const partial = await partialTokenFor(account);
    const guesses = [...wrongCodes(account.secret, 19), codeNow(account.secret)];
    const statuses = (await Promise.all(guesses.map((code) => loginWith2fa(partial, code)))).map((r) => r.status);
    const checked = statuses.filter((s) => s === 200 || s === 401);
    expect(checked.length).toBeLessThanOrEqual(h.config.totpMaxFailures);
    expect(statuses.filter((s) => s === 429)).toHaveLength(guesses.length - checked.length);
    const failures = await h.deps.prisma.auditEvent.count({ where: { action: 'auth.login_failed', targetId: account.userId } });
    expect(failures).toBeLessThanOrEqual(h.config.totpMaxFailures);
  });

  it('a right code gives its point back: wrong codes alone count toward the limit', async () => {
    const account = await userWith2fa();
    nextStep();
    const wrong = wrongCode(account.secret, h.clock.now());
    for (let i = 0; i < h.config.totpMaxFailures - 1; i++) expect((await loginWith2fa(await partialTokenFor(account), wrong)).status).toBe(401);
    expect((await loginWith2fa(await partialTokenFor(account), codeNow(account.secret))).status).toBe(200);
    nextStep();
    // One wrong code left before the lock, as before the right one.
    expect((await loginWith2fa(await partialTokenFor(account), wrong)).status).toBe(401);
    expect((await loginWith2fa(await partialTokenFor(account), codeNow(account.secret))).status).toBe(429);
  });

  it('refuses expired, forged and malformed partial tokens', async () => {
    const account = await userWith2fa();
    nextStep();
    const partial = await partialTokenFor(account);
    h.clock.advance(h.config.partialTokenTtlSeconds * 1000 + 1000);
    expect((await loginWith2fa(partial, codeNow(account.secret))).status).toBe(401);
    // A session token is not a partial token either.
    expect((await loginWith2fa(account.token, codeNow(account.secret))).status).toBe(401);
    expect((await loginWith2fa('garbage', '123456')).status).toBe(401);
    expect((await loginWith2fa(partial, '12345')).status).toBe(400);
    expect((await request(h.app).post('/api/v1/auth/login/2fa').send({ code: '123456' })).status).toBe(400);
  });

  it('stores the accepted time step so a concurrent replay of one code gets at most one session', async () => {
    const account = await userWith2fa();
    nextStep();
    const [a, b] = await Promise.all([partialTokenFor(account), partialTokenFor(account)]);
    const code = codeNow(account.secret);
    const results = await Promise.all([loginWith2fa(a, code), loginWith2fa(b, code)]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 401]);
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(user.totpLastStep).not.toBeNull();
  });
});

describe('enabling 2FA ends the account\'s other sessions', () => {
  it('a session signed in before 2FA was turned on answers 401; the session that turned it on and the API keys keep working', async () => {
    // Someone who had the password (and so a session) before the owner turned 2FA on must not keep that session.
    const account = await signupAndVerify(h);
    const { token: owners } = await loginViaApi(h, account.email, account.password);
    const { token: earlier } = await loginViaApi(h, account.email, account.password);
    const me = (token: string) => request(h.app).get('/api/v1/auth/me').set(bearer(token));
    expect((await me(earlier)).status).toBe(200);
    const key = await post('/api-keys', owners, { name: 'ci', scopes: ['projects:read'] });
    expect(key.status).toBe(201);

    const setup = await post('/auth/2fa/setup', owners);
    expect((await post('/auth/2fa/enable', owners, { code: codeNow(setup.body.secret), current_password: account.password })).status).toBe(200);

    const after = await me(earlier);
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ detail: expect.any(String) });
    expect((await me(owners)).status).toBe(200);
    expect((await request(h.app).get('/api/v1/projects').set(bearer(key.body.key))).status).toBe(200);
    const audit = await h.deps.prisma.auditEvent.findFirstOrThrow({ where: { action: 'auth.2fa_enabled', targetId: account.userId } });
    expect(audit.metadata).toMatchObject({ other_sessions_revoked: true });
  });

  it('a session that ended while its enable request ran (the password changed from another session) turns nothing on', async () => {
    // Someone holding a stolen session and the password turns 2FA on with their own authenticator; the owner, from their session,
    // changes the password meanwhile, which updates the user row and ends the other sessions, the thief's among
    // them. The enable was authenticated before that: it must not go on to switch 2FA on and end the owner's session.
    const account = await signupAndVerify(h);
    const { token: thief } = await loginViaApi(h, account.email, account.password);
    const { token: owner } = await loginViaApi(h, account.email, account.password);
    const setup = await post('/auth/2fa/setup', thief);
    expect(setup.status).toBe(200);
    const res = await sentWhileHeld(
      h,
      [
        ['SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE', [account.userId]],
        ['UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL AND id <> $2', [account.userId, sessionIdOf(owner)]],
      ],
      () => post('/auth/2fa/enable', thief, { code: codeNow(setup.body.secret), current_password: account.password }),
    );
    expect(res.status).toBe(401);
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).totpEnabled).toBe(false);
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(owner))).status).toBe(200);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_enabled', targetId: account.userId } })).toBe(0);
  });

  it('a password sign-in under way while 2FA is turned on gets no session that outlives it', async () => {
    // The attacker with the password signs in just as the owner turns 2FA on: the sign-in read "no 2FA", then its
    // session row was written after the transaction that ended the other sessions. A busy server (libuv's thread
    // pool held by other work, as bcrypt and file reads hold it) widens that window; here long pbkdf2 jobs do.
    const account = await signupAndVerify(h);
    const { token: owners } = await loginViaApi(h, account.email, account.password);
    const setup = await post('/auth/2fa/setup', owners);
    expect(setup.status).toBe(200);

    const order: string[] = [];
    const holdThePool = () =>
      Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, () =>
        new Promise<void>((resolve) => pbkdf2('x', 'y', 3_000_000, 32, 'sha256', () => resolve())),
      );
    // The enable request has counted its password check (per session, in Redis): its bcrypt comes next.
    const countedKey = `${h.config.redisPrefix}:rl:login:session:${sessionIdOf(owners)}`;
    const passwordCheckQueued = async () => {
      for (let i = 0; i < 2_000 && !(await h.deps.redis.exists(countedKey)); i++) await new Promise((r) => setTimeout(r, 5));
      await new Promise((resolve) => setTimeout(resolve, 50));
    };
    const firstRound = holdThePool();
    // The owner turns 2FA on: the check of the current password (bcrypt) waits for the pool first in line ...
    const enabling = post('/auth/2fa/enable', owners, { code: codeNow(setup.body.secret), current_password: account.password }).then(
      (res) => (order.push('enable'), res),
    );
    await passwordCheckQueued();
    // ... a second round of pool work queues behind it ...
    const secondRound = holdThePool();
    // ... and the attacker's sign-in reads the user (2FA still off), then waits for the pool (bcrypt) behind both:
    // the enable commits once the first round is done, the sign-in goes on after the second.
    const attackersLogin = loginRequest(h, { email: account.email, password: account.password }).then((res) => (order.push('login'), res));
    const enable = await enabling;
    expect(enable.status).toBe(200);
    const login = await attackersLogin;
    await Promise.all([...firstRound, ...secondRound]);
    expect(order).toEqual(['enable', 'login']);

    expect(login.status).toBe(200);
    if (login.body.token) {
      // A session was issued: it must not outlive the 2FA switch like one opened just before it.
      const me = await request(h.app).get('/api/v1/auth/me').set(bearer(login.body.token));
      expect(me.status).toBe(401);
    } else {
      expect(login.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
    }
    const live = await h.deps.prisma.session.findMany({ where: { userId: account.userId, revokedAt: null } });
    expect(live.map((s) => s.id)).toHaveLength(1);
  });
});

/** The account's `auth.login_failed` entries of a wrong or missing current password, as the organization sees them. */
const reauthFailures = async (token: string) =>
  (await auditLog(h, token, { action: 'auth.login_failed' })).filter((e) => String(e.metadata?.reason).endsWith('current_password'));

describe('turning 2FA on needs the current password (a session alone is not enough)', () => {
  it('a stolen session cannot turn 2FA on with its own authenticator: 400 without the password or with a wrong one, nothing changed, audited', async () => {
    // Someone holding a stolen session cookie (not the password) tries to lock the owner out: set up 2FA with their
    // own authenticator, turn it on, and so end the owner's sessions.
    const account = await signupAndVerify(h);
    // A second organization of the same user: the failed attempts are recorded there too.
    const second = await h.deps.prisma.organization.create({ data: { id: newId('org'), name: `Second ${newId('org')}` } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: account.userId, role: 'owner' } });
    const { token: owner } = await loginViaApi(h, account.email, account.password);
    const { token: thief } = await loginViaApi(h, account.email, account.password);
    const setup = await post('/auth/2fa/setup', thief);
    expect(setup.status).toBe(200);
    const code = codeNow(setup.body.secret);

    const missing = await post('/auth/2fa/enable', thief, { code });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ detail: expect.stringContaining('current_password'), code: 'INVALID_CURRENT_PASSWORD' });
    const wrong = await post('/auth/2fa/enable', thief, { code, current_password: 'a guess at the password' });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: 'The current password is not correct.', code: 'INVALID_CURRENT_PASSWORD' });

    // Nothing changed: 2FA is off, both sessions live, the owner signs in with the password alone.
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    expect(user.totpEnabled).toBe(false);
    expect(user.totpSecretEnc).toBeNull();
    for (const token of [owner, thief]) expect((await request(h.app).get('/api/v1/auth/me').set(bearer(token))).status).toBe(200);
    expect((await loginRequest(h, { email: account.email, password: account.password })).body.token).toEqual(expect.any(String));
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_enabled', targetId: account.userId } })).toBe(0);

    // Both attempts are in the audit log, like failed sign-ins, in each of the user's organizations, without the password.
    const entries = await reauthFailures(owner);
    expect(entries.map((e) => e.metadata)).toEqual([
      { reason: 'invalid_current_password', operation: '2fa_enable' },
      { reason: 'missing_current_password', operation: '2fa_enable' },
    ]);
    for (const e of entries) {
      expect(e).toMatchObject({ actor_type: 'user', actor_id: account.userId, actor_label: account.email, target_type: 'user', target_id: account.userId });
    }
    expect(JSON.stringify(entries)).not.toContain('a guess at the password');
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: second.id, action: 'auth.login_failed', actorId: account.userId } })).toBe(2);
    expect(await reauthFailures(bystanders.owner.token)).toEqual([]);
    expect(
      await h.deps.prisma.auditEvent.count({ where: { organizationId: bystanders.id, action: 'auth.login_failed', actorId: account.userId } }),
    ).toBe(0);

    // The owner, who knows the password, turns 2FA on: the thief's session ends.
    nextStep();
    const ownSetup = await post('/auth/2fa/setup', owner);
    const enabled = await post('/auth/2fa/enable', owner, { code: codeNow(ownSetup.body.secret), current_password: account.password });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toEqual({ two_factor_enabled: true });
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(thief))).status).toBe(401);
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(owner))).body.user).toMatchObject({ two_factor_enabled: true, has_password: true });
  });

  it('the right password with a wrong code turns nothing on, and is no failed password in the audit log', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const setup = await post('/auth/2fa/setup', token);
    const right = await post('/auth/2fa/enable', token, { code: wrongCode(setup.body.secret, h.clock.now()), current_password: account.password });
    expect(right.status).toBe(400);
    expect(right.body).toEqual({ detail: 'Invalid two-factor code.' });
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).totpEnabled).toBe(false);
    expect(await reauthFailures(token)).toEqual([]);
  });

  it("counts wrong current passwords per session (429 past the login limit, even for the right one), apart from the e-mail's sign-ins", async () => {
    const strict = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const account = await signupAndVerify(strict);
      const { token } = await loginViaApi(strict, account.email, account.password);
      const setup = await request(strict.app).post('/api/v1/auth/2fa/setup').set(bearer(token));
      const attempt = (current_password: string) =>
        request(strict.app)
          .post('/api/v1/auth/2fa/enable')
          .set(bearer(token))
          .send({ code: oathtoolCode(setup.body.secret, strict.clock.now()), current_password });
      for (const guess of ['guess number one', 'guess number two', 'guess number three']) expect((await attempt(guess)).status).toBe(400);
      const limited = await attempt(account.password);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(limited.body).toEqual({ detail: `Rate limit exceeded. Retry after ${limited.headers['retry-after']}s.` });
      expect((await strict.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).totpEnabled).toBe(false);
      // The e-mail's sign-ins have their own count.
      expect((await loginRequest(strict, { email: account.email, password: account.password })).status).toBe(200);
    } finally {
      await strict.close();
    }
  });

});

describe('turning 2FA off needs the current password (a session alone is not enough)', () => {
  const totpEnabled = async (userId: string) => (await h.deps.prisma.user.findUniqueOrThrow({ where: { id: userId } })).totpEnabled;

  it('a stolen session cannot turn 2FA off, even with a right code: 400 without the password or with a wrong one, 2FA stays on, audited', async () => {
    const account = await userWith2fa();
    nextStep();
    // The thief's session: signed in by the owner (password and code) and stolen from the browser.
    const ok = await loginWith2fa(await partialTokenFor(account), codeNow(account.secret));
    expect(ok.status).toBe(200);
    const thief = ok.body.token as string;
    nextStep();
    const code = codeNow(account.secret);

    const missing = await post('/auth/2fa/disable', thief, { code });
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ detail: expect.stringContaining('current_password'), code: 'INVALID_CURRENT_PASSWORD' });
    const wrong = await post('/auth/2fa/disable', thief, { code, current_password: 'a guess at the password' });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: 'The current password is not correct.', code: 'INVALID_CURRENT_PASSWORD' });

    expect(await totpEnabled(account.userId)).toBe(true);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_disabled', targetId: account.userId } })).toBe(0);
    expect((await loginRequest(h, { email: account.email, password: account.password })).body).toEqual({
      requires_2fa: true,
      partial_token: expect.any(String),
    });
    const entries = await reauthFailures(account.token);
    expect(entries.map((e) => e.metadata)).toEqual([
      { reason: 'invalid_current_password', operation: '2fa_disable' },
      { reason: 'missing_current_password', operation: '2fa_disable' },
    ]);
    expect(JSON.stringify(entries)).not.toContain('a guess at the password');

    // The code the thief sent was not used up: the owner, with the password, turns 2FA off with it.
    const disabled = await post('/auth/2fa/disable', account.token, { code, current_password: account.password });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toEqual({ two_factor_enabled: false });
    expect(await totpEnabled(account.userId)).toBe(false);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_disabled', targetId: account.userId } })).toBeGreaterThan(0);
  });

  it("a stolen session's wrong codes do not lock the owner out of the 2FA sign-in", async () => {
    // Wrong codes at the 2FA routes count with the sign-in's wrong codes of the same user. A thief with only a session
    // could spend them all, again every window, and the owner could never sign in to change the password (which is
    // what ends the stolen session). Without the password the thief never gets to the code.
    const account = await userWith2fa();
    nextStep();
    const wrong = wrongCode(account.secret, h.clock.now());
    const statuses: number[] = [];
    for (let i = 0; i < h.config.totpMaxFailures + 2; i++) {
      for (const body of [{ code: wrong }, { code: wrong, current_password: 'a guess at the password' }]) {
        statuses.push((await post('/auth/2fa/disable', account.token, body)).status);
      }
    }
    const signedIn = await loginWith2fa(await partialTokenFor(account), codeNow(account.secret));
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.token).toEqual(expect.any(String));
    expect(new Set(statuses)).toEqual(new Set([400]));
    expect(await totpEnabled(account.userId)).toBe(true);
  });

  it('a burst of concurrent codes with the password gets no more codes checked than the limit (the right one among them)', async () => {
    const account = await userWith2fa();
    nextStep();
    const codes = [...wrongCodes(account.secret, 19), codeNow(account.secret)];
    const statuses = (
      await Promise.all(codes.map((code) => post('/auth/2fa/disable', account.token, { code, current_password: account.password })))
    ).map((r) => r.status);
    const checked = statuses.filter((s) => s === 200 || s === 400);
    expect(checked.length).toBeLessThanOrEqual(h.config.totpMaxFailures);
    expect(statuses.filter((s) => s === 429)).toHaveLength(codes.length - checked.length);
    expect(await totpEnabled(account.userId)).toBe(!statuses.includes(200));
  });

  it('the right password with a wrong code turns nothing off, and is no failed password in the audit log', async () => {
    const account = await userWith2fa();
    nextStep();
    const res = await post('/auth/2fa/disable', account.token, { code: wrongCode(account.secret, h.clock.now()), current_password: account.password });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: 'Invalid two-factor code.' });
    expect(await totpEnabled(account.userId)).toBe(true);
    expect(await reauthFailures(account.token)).toEqual([]);
  });

  it('a password changed while the request runs (after its check) turns nothing off: 409, as turning it on', async () => {
    // The owner changes the password from another session at the moment a stolen one, holding the old password,
    // turns 2FA off: the change of password must win, not a downgrade confirmed with a password no longer valid.
    const account = await userWith2fa();
    nextStep();
    const res = await sentWhileHeld(h, [['UPDATE users SET password_hash = $1 WHERE id = $2', ['$2b$04$replacedreplacedreplacedreplacedreplacedreplacedrepla', account.userId]]], () =>
      post('/auth/2fa/disable', account.token, { code: codeNow(account.secret), current_password: account.password }),
    );
    expect(res.status).toBe(409);
    expect(await totpEnabled(account.userId)).toBe(true);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_disabled', targetId: account.userId } })).toBe(0);
  });
});

describe('the organization a sign-in names (chosen again when the session is issued)', () => {
  it('the second step after the membership the partial token names was removed: 403 as before, no session or entry there; a password sign-in naming it gets the same', async () => {
    const account = await userWith2fa();
    const membership = await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: bystanders.id, userId: account.userId, role: 'member' } });
    const res = await loginRequest(h, { email: account.email, password: account.password, organization_id: bystanders.id });
    expect(res.status).toBe(200);
    const partialToken = res.body.partial_token as string;
    await h.deps.prisma.membership.delete({ where: { id: membership.id } });

    nextStep();
    const second = await loginWith2fa(partialToken, codeNow(account.secret));
    expect([second.status, second.body]).toEqual([403, { detail: 'You are not a member of that organization.' }]);
    expect(await h.deps.prisma.session.count({ where: { userId: account.userId, organizationId: bystanders.id } })).toBe(0);
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: bystanders.id, actorId: account.userId } })).toBe(0);

    const named = await loginRequest(h, { email: account.email, password: account.password, organization_id: bystanders.id });
    expect([named.status, named.body]).toEqual([403, { detail: 'You are not a member of that organization.' }]);
  });
});
