import bcrypt from 'bcrypt';
import jwt from 'jsonwebtoken';
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import {
  SIGNUP_PASSWORD,
  loginRequest,
  loginViaApi,
  setCookies,
  signupAndVerify,
  signupViaApi,
  verificationTokenFor,
} from './support/auth-helpers';
import { AN_ADDRESS, whileMailRefused } from './support/smtp';
import { DECLINED_SIGNUP_HOLD_SECONDS, declinedSignupKey } from '../src/modules/auth/accounts';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  // Many logins come from one address here; the login limit itself is tested in rate-limit.test.ts.
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
  org = await createOrg(h);
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

const me = (token: string) => request(h.app).get('/api/v1/auth/me').set(bearer(token));

describe('signup and e-mail verification', () => {
  it('signs up a pending owner, mails a link, refuses login until verified, then logs in with secure cookies', async () => {
    const email = `Signup-${uniqueSuffix()}@Example.test`;
    const res = await request(h.app)
      .post('/api/v1/auth/signup')
      .send({ email, password: SIGNUP_PASSWORD, name: 'Ada', organization_name: 'Analytical Engines' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ user_id: expect.stringMatching(/^usr_/), organization_id: expect.stringMatching(/^org_/), status: 'pending' });

    const stored = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: res.body.user_id } });
    expect(stored.email).toBe(email.toLowerCase());
    expect(stored.status).toBe('pending');
    expect(stored.passwordHash).toMatch(/^\$2[aby]\$/);
    const membership = await h.deps.prisma.membership.findFirstOrThrow({ where: { userId: stored.id } });
    expect(membership).toMatchObject({ organizationId: res.body.organization_id, role: 'owner' });

    const mails = h.mail().filter((m) => m.to === email.toLowerCase());
    expect(mails).toHaveLength(1);
    expect(mails[0].text).toContain(`${h.config.publicBaseUrl}/verify-email?token=`);
    const token = verificationTokenFor(h, email.toLowerCase());
    const row = await h.deps.prisma.emailToken.findFirstOrThrow({ where: { userId: stored.id } });
    expect(row.purpose).toBe('verify_email');
    expect(row.tokenHash).not.toContain(token);
    expect(row.expiresAt.getTime() - row.createdAt.getTime()).toBeGreaterThan(23.9 * 3600_000);

    const early = await loginRequest(h, { email, password: SIGNUP_PASSWORD });
    expect(early.status).toBe(403);
    expect(early.body).toEqual({ detail: expect.any(String), code: 'EMAIL_NOT_VERIFIED' });

    const verified = await request(h.app).post('/api/v1/auth/verify-email').send({ token, password: SIGNUP_PASSWORD });
    expect(verified.status).toBe(200);
    expect(verified.body).toEqual({ status: 'active' });

    const login = await loginRequest(h, { email, password: SIGNUP_PASSWORD });
    expect(login.status).toBe(200);
    expect(login.body).toEqual({ token: expect.any(String), expires_at: expect.any(String), csrf_token: expect.any(String) });
    const expiresIn = new Date(login.body.expires_at).getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(47.9 * 3600_000);
    expect(expiresIn).toBeLessThanOrEqual(48 * 3600_000);

    const cookies = setCookies(login);
    const session = cookies.get('session')!;
    expect(session.value).toBe(login.body.token);
    expect(session.attributes.has('httponly')).toBe(true);
    expect(session.attributes.has('secure')).toBe(true);
    expect(session.attributes.get('samesite')).toBe('Strict');
    expect(session.attributes.get('path')).toBe('/');
    const csrf = cookies.get('csrf_token')!;
    expect(csrf.value).toBe(login.body.csrf_token);
    expect(csrf.attributes.has('httponly')).toBe(false);
    expect(csrf.attributes.has('secure')).toBe(true);
    expect(csrf.attributes.get('samesite')).toBe('Strict');

    const viaBearer = await me(login.body.token);
    expect(viaBearer.status).toBe(200);
    expect(viaBearer.body).toEqual({
      user: { id: res.body.user_id, email: email.toLowerCase(), name: 'Ada', two_factor_enabled: false, has_password: true },
      organization: { id: res.body.organization_id, name: 'Analytical Engines' },
      role: 'owner',
      credential: { type: 'session' },
      scopes: expect.arrayContaining(['org:delete', 'org:transfer_ownership', 'webhooks:read']),
    });
    expect(viaBearer.body.scopes).toEqual([...viaBearer.body.scopes].sort());
    const viaCookie = await request(h.app).get('/api/v1/auth/me').set('Cookie', `session=${login.body.token}`);
    expect(viaCookie.status).toBe(200);
    expect(viaCookie.body).toEqual(viaBearer.body);
  });

  it('answers 409 for the e-mail of an active account (whatever its case)', async () => {
    const first = await signupAndVerify(h);
    const again = await request(h.app)
      .post('/api/v1/auth/signup')
      .send({ email: first.email.toUpperCase(), password: SIGNUP_PASSWORD, name: 'Twin', organization_name: 'Other' });
    expect(again.status).toBe(409);
    expect(again.body).toEqual({ detail: expect.any(String) });
    expect((await loginRequest(h, { email: first.email, password: first.password })).status).toBe(200);
  });

  describe("a signup with the address of an account still pending (a stranger's signup, never verified)", () => {
    const STRANGERS_PASSWORD = 'the stranger chose this passphrase';
    const OWNERS_PASSWORD = 'the owner chose this passphrase';
    const signupWith = (email: string, password: string, organizationName: string) =>
      request(h.app).post('/api/v1/auth/signup').send({ email, password, name: 'Someone', organization_name: organizationName });

    it("once its link has expired: starts afresh (201, new ids), the stranger's account and organization gone, only the owner's password signs in", async () => {
      // Refused with 409 before: an address anyone signed up with first was locked out for good once the link expired
      // (a reset mails only active accounts).
      const email = `squatted-${uniqueSuffix()}@example.test`;
      const stranger = await signupWith(email, STRANGERS_PASSWORD, 'Squat');
      expect(stranger.status).toBe(201);
      const strangersLink = verificationTokenFor(h, email);
      h.clock.advance(24 * 3600_000 + 1000);

      const owner = await signupWith(email, OWNERS_PASSWORD, 'The Real One');
      expect(owner.status).toBe(201);
      expect(owner.body.user_id).not.toBe(stranger.body.user_id);
      expect(owner.body.organization_id).not.toBe(stranger.body.organization_id);
      expect(await h.deps.prisma.user.findUnique({ where: { id: stranger.body.user_id } })).toBeNull();
      expect(await h.deps.prisma.organization.findUnique({ where: { id: stranger.body.organization_id } })).toBeNull();
      const ownersLink = verificationTokenFor(h, email);
      expect(ownersLink).not.toBe(strangersLink);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: strangersLink, password: STRANGERS_PASSWORD })).status).toBe(400);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: ownersLink, password: OWNERS_PASSWORD })).status).toBe(200);

      expect((await loginRequest(h, { email, password: STRANGERS_PASSWORD })).status).toBe(401);
      const login = await loginRequest(h, { email, password: OWNERS_PASSWORD });
      expect(login.status).toBe(200);
      expect((await me(login.body.token)).body).toMatchObject({ organization: { id: owner.body.organization_id, name: 'The Real One' }, role: 'owner' });
    });

    it('while its link is live: 409, and the person who signed up keeps their password and their link', async () => {
      // A stranger's second signup must not put the stranger's password under the link its owner is about to open.
      const email = `midway-${uniqueSuffix()}@example.test`;
      const owner = await signupWith(email, OWNERS_PASSWORD, 'Mine');
      expect(owner.status).toBe(201);
      const ownersLink = verificationTokenFor(h, email);
      h.clock.advance(23 * 3600_000);
      const stranger = await signupWith(email, STRANGERS_PASSWORD, 'Mine');
      expect(stranger.status).toBe(409);
      expect(stranger.body).toEqual({ detail: expect.stringContaining('once its link has expired') });
      expect(h.mail().filter((m) => m.to === email)).toHaveLength(1);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: ownersLink, password: OWNERS_PASSWORD })).status).toBe(200);
      expect((await loginRequest(h, { email, password: STRANGERS_PASSWORD })).status).toBe(401);
      expect((await loginRequest(h, { email, password: OWNERS_PASSWORD })).status).toBe(200);
    });
    it("opening its link activates nothing without the stranger's password: the address's holder cannot be made to activate it", async () => {
      // Before, the link alone activated the account: a stranger signed up with someone's address, that person opened
      // the mail, and the stranger signed in to a verified account (later linked to the holder's Google sign-in).
      const email = `lured-${uniqueSuffix()}@example.test`;
      const stranger = await signupWith(email, STRANGERS_PASSWORD, 'Lure');
      expect(stranger.status).toBe(201);
      const link = verificationTokenFor(h, email);
      expect(h.mail().filter((m) => m.to === email).at(-1)!.text).toContain('enter the password you chose when you signed up');

      const byHolder = await request(h.app).post('/api/v1/auth/verify-email').send({ token: link, password: OWNERS_PASSWORD });
      expect(byHolder.status).toBe(400);
      expect(byHolder.body).toEqual({ detail: 'The password is not the one chosen at signup. The link stays valid until it expires.' });
      const withoutPassword = await request(h.app).post('/api/v1/auth/verify-email').send({ token: link });
      expect(withoutPassword.status).toBe(400);
      expect(withoutPassword.body.detail).toMatch(/password/);

      const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: stranger.body.user_id } });
      expect(user).toMatchObject({ status: 'pending', emailVerifiedAt: null });
      expect(await h.deps.prisma.emailToken.count({ where: { userId: user.id, usedAt: { not: null } } })).toBe(0);
      const strangersLogin = await loginRequest(h, { email, password: STRANGERS_PASSWORD });
      expect(strangersLogin.status).toBe(403);
      expect(strangersLogin.body.code).toBe('EMAIL_NOT_VERIFIED');
    });

    it('"I did not sign up": the link removes the stranger\'s pending account and organization, and holds the address from password signups for 24 hours', async () => {
      const email = `declined-${uniqueSuffix()}@example.test`;
      const stranger = await signupWith(email, STRANGERS_PASSWORD, 'Squat');
      const link = verificationTokenFor(h, email);
      expect(h.mail().filter((m) => m.to === email).at(-1)!.text).toContain('choose "I did not sign up"');
      const decline = (token: string) => request(h.app).post('/api/v1/auth/verify-email/decline').send({ token });

      expect((await decline('not-a-link')).status).toBe(400);
      // The stranger tried to sign in meanwhile (403, audited in the signup's organization): removed all the same.
      expect((await loginRequest(h, { email, password: STRANGERS_PASSWORD })).status).toBe(403);
      const info = jest.spyOn(h.deps.logger, 'info');
      const declined = await decline(link);
      expect(declined.status).toBe(200);
      expect(declined.body).toEqual({ signup_removed: true });
      expect(await h.deps.prisma.user.findUnique({ where: { id: stranger.body.user_id } })).toBeNull();
      expect(await h.deps.prisma.organization.findUnique({ where: { id: stranger.body.organization_id } })).toBeNull();
      expect((await decline(link)).status).toBe(400);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: link, password: STRANGERS_PASSWORD })).status).toBe(400);
      expect((await loginRequest(h, { email, password: STRANGERS_PASSWORD })).status).toBe(401);

      // The stranger cannot sign up again at once (and mail the holder again): password signups with the address wait
      // 24 hours. The operator's log says what was removed.
      const again = await signupWith(email, STRANGERS_PASSWORD, 'Squat again');
      expect(again.status).toBe(409);
      expect(again.body.detail).toMatch(/^The holder of this e-mail address removed a signup made with it \("I did not sign up"\): signing up with it is possible again in 24 hours\./);
      expect(h.mail().filter((m) => m.to === email)).toHaveLength(1);
      const ttl = await h.deps.redis.ttl(declinedSignupKey(h.deps, email));
      expect(ttl).toBeGreaterThan(DECLINED_SIGNUP_HOLD_SECONDS - 60);
      expect(ttl).toBeLessThanOrEqual(DECLINED_SIGNUP_HOLD_SECONDS);
      expect(info).toHaveBeenCalledWith(expect.stringContaining('I did not sign up'), {
        user_id: stranger.body.user_id,
        organization_ids: [stranger.body.organization_id],
      });
      info.mockRestore();

      // Once the hold has run out (its key gone), the address signs up.
      await h.deps.redis.del(declinedSignupKey(h.deps, email));
      const owner = await signupWith(email, OWNERS_PASSWORD, 'The Real One');
      expect(owner.status).toBe(201);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: verificationTokenFor(h, email), password: OWNERS_PASSWORD })).status).toBe(200);
    });

    it("a verified account's link removes nothing, nor does an organization that has other members", async () => {
      const active = await signupViaApi(h);
      const link = verificationTokenFor(h, active.email);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: link, password: active.password })).status).toBe(200);
      expect((await request(h.app).post('/api/v1/auth/verify-email/decline').send({ token: link })).status).toBe(400);
      expect(await h.deps.prisma.user.findUniqueOrThrow({ where: { id: active.userId } })).toMatchObject({ status: 'active' });

      // A pending account that is also a member of another organization (added there directly): only the account and
      // the organization of its own signup go; the other organization and its members stay.
      const pending = await signupViaApi(h);
      const other = await signupAndVerify(h);
      await h.deps.prisma.membership.create({ data: { id: `mem_${uniqueSuffix()}`, organizationId: other.organizationId, userId: pending.userId, role: 'member' } });
      expect((await request(h.app).post('/api/v1/auth/verify-email/decline').send({ token: verificationTokenFor(h, pending.email) })).status).toBe(200);
      expect(await h.deps.prisma.organization.findUnique({ where: { id: pending.organizationId } })).toBeNull();
      expect(await h.deps.prisma.organization.findUnique({ where: { id: other.organizationId } })).not.toBeNull();
      expect(await h.deps.prisma.membership.count({ where: { organizationId: other.organizationId } })).toBe(1);
      expect((await loginRequest(h, { email: other.email, password: other.password })).status).toBe(200);
    });

    it('a wrong password leaves the link usable by the person who signed up, once', async () => {
      const email = `typo-${uniqueSuffix()}@example.test`;
      expect((await signupWith(email, OWNERS_PASSWORD, 'Mine')).status).toBe(201);
      const link = verificationTokenFor(h, email);
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: link, password: `${OWNERS_PASSWORD}!` })).status).toBe(400);
      const verified = await request(h.app).post('/api/v1/auth/verify-email').send({ token: link, password: OWNERS_PASSWORD });
      expect(verified.status).toBe(200);
      expect(verified.body).toEqual({ status: 'active' });
      expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: link, password: OWNERS_PASSWORD })).status).toBe(400);
      expect((await loginRequest(h, { email, password: OWNERS_PASSWORD })).status).toBe(200);
    });
  });

  it('undoes the signup when the verification e-mail cannot be sent, so the person can sign up again', async () => {
    const email = `nomail-${uniqueSuffix()}@example.test`;
    const body = { email, password: SIGNUP_PASSWORD, name: 'N', organization_name: `Org ${uniqueSuffix()}` };
    const send = jest.spyOn(h.deps.mailer, 'send').mockRejectedValueOnce(new Error('SMTP down'));
    try {
      const failed = await request(h.app).post('/api/v1/auth/signup').send(body);
      expect(failed.status).toBe(503);
      expect(failed.headers['retry-after']).toMatch(/^\d+$/);
      expect(failed.body).toEqual({ detail: expect.stringContaining('the mail server') });
    } finally {
      send.mockRestore();
    }
    expect(await h.deps.prisma.user.findUnique({ where: { email } })).toBeNull();
    expect(await h.deps.prisma.organization.findFirst({ where: { name: body.organization_name } })).toBeNull();
    expect((await request(h.app).post('/api/v1/auth/signup').send(body)).status).toBe(201);
  });

  it('keeps an account activated while its verification e-mail was failing (an invitation accepted meanwhile): only a pending one is undone', async () => {
    const email = `busy-${uniqueSuffix()}@example.test`;
    expect((await request(h.app).post('/api/v1/invitations').set(bearer(org.admin.token)).send({ email, role: 'member' })).status).toBe(201);
    const invitation = /accept-invite\?token=([A-Za-z0-9_-]+)/.exec(h.mail().filter((m) => m.to === email).at(-1)!.text)![1];
    const working = h.deps.mailer.send.bind(h.deps.mailer);
    const send = jest.spyOn(h.deps.mailer, 'send').mockImplementation(async (message) => {
      if (message.to !== email) return working(message);
      // The mail server hangs; meanwhile the person accepts the invitation, which activates the pending account.
      const accepted = await request(h.app).post('/api/v1/invitations/accept').send({ token: invitation, password: 'my own passphrase 1' });
      expect(accepted.status).toBe(200);
      throw new Error('SMTP timed out');
    });
    try {
      const body = { email, password: SIGNUP_PASSWORD, name: 'B', organization_name: `Org ${uniqueSuffix()}` };
      expect((await request(h.app).post('/api/v1/auth/signup').send(body)).status).toBe(503);
    } finally {
      send.mockRestore();
    }
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { email } });
    expect(user.status).toBe('active');
    expect(await h.deps.prisma.membership.count({ where: { userId: user.id, organizationId: org.id } })).toBe(1);
    expect((await loginRequest(h, { email, password: 'my own passphrase 1' })).status).toBe(200);
  });

  it("logs a mail server's refusal of the verification e-mail without the address it quotes", async () => {
    const email = `refused-${uniqueSuffix()}@example.test`;
    const { logged, refused } = await whileMailRefused(h, async () => {
      const body = { email, password: SIGNUP_PASSWORD, name: 'R', organization_name: `Org ${uniqueSuffix()}` };
      // Refused for good (SMTP 550): 422, the address to be checked (a server out of reach: 503, above).
      expect((await request(h.app).post('/api/v1/auth/signup').send(body)).status).toBe(422);
    });
    expect(refused).toEqual([email]);
    expect(logged).toContainEqual(['Could not send the verification e-mail; signup undone', { error: expect.stringContaining('Recipient address rejected') }]);
    expect(JSON.stringify(logged)).not.toMatch(AN_ADDRESS);
  });

  it('validates the signup body (400), including passwords longer than 72 bytes', async () => {
    const base = { email: `v-${uniqueSuffix()}@example.test`, password: SIGNUP_PASSWORD, name: 'V', organization_name: 'V' };
    const cases = [
      { ...base, email: 'not-an-email' },
      { ...base, password: 'short' },
      { ...base, password: 'é'.repeat(40) }, // 40 characters, 80 bytes
      { ...base, name: '' },
      { email: base.email, password: base.password, name: 'V' },
    ];
    for (const body of cases) {
      const res = await request(h.app).post('/api/v1/auth/signup').send(body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
    expect((await request(h.app).post('/api/v1/auth/signup').send({ ...base, password: 'x'.repeat(72) })).status).toBe(201);
  });

  it('refuses invalid, used and expired verification tokens with 400', async () => {
    expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: 'nonsense', password: SIGNUP_PASSWORD })).status).toBe(400);

    const used = await signupViaApi(h);
    const usedToken = verificationTokenFor(h, used.email);
    expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: usedToken, password: used.password })).status).toBe(200);
    const again = await request(h.app).post('/api/v1/auth/verify-email').send({ token: usedToken, password: used.password });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ detail: expect.any(String) });

    const late = await signupViaApi(h);
    h.clock.advance(24 * 3600_000 + 1000);
    expect((await request(h.app).post('/api/v1/auth/verify-email').send({ token: verificationTokenFor(h, late.email), password: late.password })).status).toBe(400);
    h.clock.reset();
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { email: late.email } });
    expect(user.status).toBe('pending');
  });
});

describe('password login', () => {
  it('answers a wrong password and an unknown e-mail identically, each after one bcrypt comparison', async () => {
    const account = await signupAndVerify(h);
    const compare = jest.spyOn(bcrypt, 'compare');
    try {
      const wrongPassword = await loginRequest(h, { email: account.email, password: 'not the password at all' });
      expect(compare).toHaveBeenCalledTimes(1);
      const unknownEmail = await loginRequest(h, { email: `nobody-${uniqueSuffix()}@example.test`, password: 'not the password at all' });
      expect(compare).toHaveBeenCalledTimes(2);
      expect(wrongPassword.status).toBe(401);
      expect(unknownEmail.status).toBe(401);
      expect(unknownEmail.body).toEqual(wrongPassword.body);
      expect(wrongPassword.body).toEqual({ detail: expect.any(String) });
      expect(wrongPassword.headers['set-cookie']).toBeUndefined();
      // The signup length rule does not apply at login: a short wrong password is just wrong.
      const short = await loginRequest(h, { email: account.email, password: 'short' });
      expect(short.status).toBe(401);
      expect(short.body).toEqual(wrongPassword.body);
      // A pending user with a wrong password learns nothing either.
      compare.mockClear();
      const pending = await signupViaApi(h);
      const pendingWrong = await loginRequest(h, { email: pending.email, password: 'not the password at all' });
      expect(pendingWrong.status).toBe(401);
      expect(pendingWrong.body).toEqual(wrongPassword.body);
    } finally {
      compare.mockRestore();
    }
  });

  it('refuses passwords longer than 72 bytes with 400 instead of truncating them', async () => {
    const account = await signupAndVerify(h);
    const res = await loginRequest(h, { email: account.email, password: `${account.password}${'x'.repeat(80)}` });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.any(String) });
    expect((await loginRequest(h, { email: account.email })).status).toBe(400);
  });

  it('logs into the organization named by organization_id, and refuses one the user is not a member of', async () => {
    const account = await signupAndVerify(h);
    await h.deps.prisma.membership.create({ data: { id: `mem_${uniqueSuffix()}`, organizationId: org.id, userId: account.userId, role: 'member' } });

    const home = await loginRequest(h, { email: account.email, password: account.password });
    expect((await me(home.body.token)).body.organization.id).toBe(account.organizationId);

    const other = await loginRequest(h, { email: account.email, password: account.password, organization_id: org.id });
    expect(other.status).toBe(200);
    const body = (await me(other.body.token)).body;
    expect(body.organization).toEqual({ id: org.id, name: org.name });
    expect(body.role).toBe('member');
    expect(body.scopes).not.toContain('api_keys:create');

    const stranger = await createOrg(h);
    const refused = await loginRequest(h, { email: account.email, password: account.password, organization_id: stranger.id });
    expect(refused.status).toBe(403);
    const missing = await loginRequest(h, { email: account.email, password: account.password, organization_id: 'org_doesnotexist' });
    expect(missing.status).toBe(403);
    expect(missing.body).toEqual(refused.body);
  });
});

describe('sessions', () => {
  it('needs X-CSRF-Token for state-changing requests authenticated by the cookie alone', async () => {
    const account = await signupAndVerify(h);
    const { token, csrfToken } = await loginViaApi(h, account.email, account.password);
    const cookie = `session=${token}; csrf_token=${csrfToken}`;

    const without = await request(h.app).post('/api/v1/auth/2fa/setup').set('Cookie', cookie);
    expect(without.status).toBe(403);
    expect(without.body).toEqual({ detail: expect.stringContaining('CSRF') });
    const wrong = await request(h.app).post('/api/v1/auth/2fa/setup').set('Cookie', cookie).set('X-CSRF-Token', 'f'.repeat(64));
    expect(wrong.status).toBe(403);
    const withToken = await request(h.app).post('/api/v1/auth/2fa/setup').set('Cookie', cookie).set('X-CSRF-Token', csrfToken);
    expect(withToken.status).toBe(200);
    expect(withToken.body.secret).toMatch(/^[A-Z2-7]{32}$/);

    // A bearer request needs no CSRF token: browsers never add Authorization on their own.
    expect((await request(h.app).post('/api/v1/auth/2fa/setup').set(bearer(token))).status).toBe(200);

    expect((await request(h.app).post('/api/v1/auth/logout').set('Cookie', cookie)).status).toBe(403);
    const logout = await request(h.app).post('/api/v1/auth/logout').set('Cookie', cookie).set('X-CSRF-Token', csrfToken);
    expect(logout.status).toBe(204);
    expect((await request(h.app).get('/api/v1/auth/me').set('Cookie', cookie)).status).toBe(401);
  });

  it('logout revokes the session (then 401) and clears both cookies', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    expect((await me(token)).status).toBe(200);
    const res = await request(h.app).post('/api/v1/auth/logout').set(bearer(token));
    expect(res.status).toBe(204);
    const cleared = setCookies(res);
    for (const name of ['session', 'csrf_token']) {
      expect(cleared.get(name)?.value).toBe('');
      expect(new Date(cleared.get(name)!.attributes.get('expires')!).getTime()).toBeLessThan(Date.now());
    }
    const after = await me(token);
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ detail: expect.any(String) });
    expect((await request(h.app).post('/api/v1/auth/logout').set(bearer(token))).status).toBe(401);
  });

  it('expires sessions after 48 hours', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    h.clock.advance(48 * 3600_000 - 60_000);
    expect((await me(token)).status).toBe(200);
    h.clock.reset();
    h.clock.advance(48 * 3600_000 + 1000);
    const res = await me(token);
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ detail: expect.any(String) });
  });

  it('rejects tampered, unsigned (alg none), foreign-key and foreign-audience tokens with 401', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const [header, payload, signature] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

    const tampered = `${header}.${b64({ ...claims, org: org.id })}.${signature}`;
    const algNone = `${b64({ alg: 'none', typ: 'JWT' })}.${payload}.`;
    const foreignKey = jwt.sign({ org: claims.org }, 'another-secret-of-sufficient-length-0123456789', {
      algorithm: 'HS256', subject: claims.sub, jwtid: claims.jti, issuer: claims.iss, audience: claims.aud, expiresIn: 3600,
    });
    const otherAudience = jwt.sign({ org: claims.org }, h.config.jwtSecret, {
      algorithm: 'HS256', subject: claims.sub, jwtid: claims.jti, issuer: claims.iss, audience: 'login-2fa', expiresIn: 3600,
    });
    const noExpiry = jwt.sign({ org: claims.org, sub: claims.sub, jti: claims.jti, iss: claims.iss, aud: claims.aud }, h.config.jwtSecret, {
      algorithm: 'HS256',
    });
    for (const bad of [tampered, algNone, foreignKey, otherAudience, noExpiry, `${token}x`, 'a.b.c']) {
      const res = await me(bad);
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
    expect((await me(token)).status).toBe(200);
  });
});

describe('API keys at /auth/me and /auth/logout', () => {
  it('describes a key principal, and refuses to "log out" a key with 400', async () => {
    const created = await request(h.app).post('/api/v1/api-keys').set(bearer(org.admin.token))
      .send({ name: 'me', scopes: ['profile:read', 'profile:update'] });
    expect(created.status).toBe(201);
    const res = await me(created.body.key);
    expect(res.status).toBe(200);
    expect(res.body.credential).toEqual({ type: 'api_key', key_prefix: created.body.prefix });
    expect(res.body.role).toBe('admin');
    expect(res.body.scopes).toEqual(['profile:read', 'profile:update']);
    const logout = await request(h.app).post('/api/v1/auth/logout').set(bearer(created.body.key));
    expect(logout.status).toBe(400);
    expect(logout.body.detail).toContain('/api-keys/');
    expect((await me(created.body.key)).status).toBe(200);
    // 2FA settings are not for keys (keys bypass 2FA).
    expect((await request(h.app).post('/api/v1/auth/2fa/setup').set(bearer(created.body.key))).status).toBe(403);
  });

  it('drops webhooks:read from a key\'s scopes when its creator is demoted from admin to manager', async () => {
    const creator = await createUserInOrg(h, org.id, 'admin', 'demoted-me');
    const created = await request(h.app).post('/api/v1/api-keys').set(bearer(creator.token))
      .send({ name: 'k', scopes: ['profile:read', 'webhooks:read'] });
    expect(created.status).toBe(201);
    expect((await me(created.body.key)).body.scopes).toEqual(['profile:read', 'webhooks:read']);
    expect((await me(created.body.key)).status).toBe(200);
    const demote = await request(h.app).patch(`/api/v1/members/${creator.id}`).set(bearer(org.owner.token)).send({ role: 'manager' });
    expect(demote.status).toBe(200);
    const after = await me(created.body.key);
    expect(after.status).toBe(200);
    expect(after.body.role).toBe('manager');
    expect(after.body.scopes).toEqual(['profile:read']);
    // The creator's own session now carries the manager bundle too.
    const session = await me(creator.token);
    expect(session.body.scopes).not.toContain('webhooks:read');
    expect(session.body.scopes).toContain('projects:create');
  });

  it('every role has profile:read and profile:update', async () => {
    for (const user of [org.owner, org.admin, org.manager, org.member]) {
      const res = await me(user.token);
      expect(res.status).toBe(200);
      expect(res.body.role).toBe(user.role);
      expect(res.body.scopes).toEqual(expect.arrayContaining(['profile:read', 'profile:update']));
    }
    expect((await loginRequest(h, { email: org.member.email, password: TEST_PASSWORD })).status).toBe(200);
  });
});
