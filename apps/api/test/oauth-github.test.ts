// Sign-in with GitHub against a loopback server implementing GitHub's documented OAuth app endpoints
// (support/oauth-github.ts): authorize, access_token with PKCE, GET /user and GET /user/emails.
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { createOrg } from './support/fixtures';
import { auditLog } from './support/audit-log';
import { loginRequest, oathtoolCode, setCookies, signupAndVerify } from './support/auth-helpers';
import { githubEnvFor, startGithubServer, type GithubAccount, type GithubEmail, type LoopbackGithub } from './support/oauth-github';
import { APP_BASE_URL, callback, enableTotp, flowRedisKey, me, redirectUriOf, startFlow } from './support/oauth-flow';
import { bearer } from './support/fixtures';
import { signedInAgo } from './support/reauthentication';
import { RECENT_SIGN_IN_WINDOW_MS } from '../src/modules/auth/reauthentication';

const APP = { clientId: 'Iv1.loopback0123', clientSecret: 'loopback-github-secret-0123456789', redirectUri: redirectUriOf('github') };

let gh: LoopbackGithub;
let h: Harness;
let nextId = 1000;

function githubEnv(server: LoopbackGithub): Record<string, string> {
  return { PUBLIC_BASE_URL: APP_BASE_URL, ...githubEnvFor(server, APP), LOGIN_RATE_LIMIT_PER_MINUTE: '1000' };
}

beforeAll(async () => {
  gh = await startGithubServer(APP);
  h = await createHarness(githubEnv(gh));
});
afterAll(async () => {
  await h?.close();
  await gh?.close();
});

function newAccount(emails?: GithubEmail[], overrides: Partial<GithubAccount> = {}): GithubAccount {
  const login = `octo-${uniqueSuffix()}`;
  const account: GithubAccount = {
    id: nextId++,
    login,
    name: 'Mona Lisa Octocat',
    emails: emails ?? [
      { email: `${login}@users.noreply.github.test`, primary: false, verified: true },
      { email: `${login}@example.test`, primary: true, verified: true, visibility: 'private' },
    ],
    ...overrides,
  };
  gh.addAccount(account);
  return account;
}

const primaryEmail = (account: GithubAccount) => account.emails.find((e) => e.primary)!.email.toLowerCase();

/** What the browser does at GitHub: open the authorize URL as `login` and come back with its redirect. */
async function authorizeAtGithub(location: URL, login: string, options: { deny?: boolean } = {}): Promise<URL> {
  const url = new URL(location);
  url.searchParams.set('login', login);
  if (options.deny) url.searchParams.set('deny', '1');
  const res = await fetch(url, { redirect: 'manual' });
  if (res.status !== 302) throw new Error(`authorize answered ${res.status}: ${await res.text()}`);
  return new URL(res.headers.get('location')!);
}

async function signInWithGithub(account: GithubAccount, startQuery: Record<string, string> = {}) {
  const started = await startFlow(h, 'github', startQuery);
  const back = await authorizeAtGithub(started.location, account.login);
  const res = await callback(h, 'github', back, started.flowId);
  return { res, started, back };
}

describe('start', () => {
  it("redirects to GitHub's authorize endpoint with state, PKCE S256, the scopes and the exact redirect URI", async () => {
    const { location, cookie, flowId } = await startFlow(h, 'github');
    expect(`${location.origin}${location.pathname}`).toBe(`${gh.url}/login/oauth/authorize`);
    const q = location.searchParams;
    expect(q.get('client_id')).toBe(APP.clientId);
    expect(q.get('redirect_uri')).toBe(`${APP_BASE_URL}/api/v1/auth/oauth/github/callback`);
    expect(q.get('scope')).toBe('read:user user:email');
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')!.length).toBeGreaterThanOrEqual(43);
    expect(q.has('nonce')).toBe(false);
    expect(cookie.attributes.get('samesite')).toBe('Lax');
    expect(cookie.attributes.has('httponly')).toBe(true);
    expect(cookie.attributes.has('secure')).toBe(true);
    expect(cookie.attributes.get('path')).toBe('/api/v1/auth/oauth/github');
    expect(await h.deps.redis.exists(flowRedisKey(h, flowId))).toBe(1);
  });
});

describe('sign-in and signup', () => {
  it('signs up a new person with their verified primary address as owner of a new organization', async () => {
    const account = newAccount();
    const { res } = await signInWithGithub(account);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), expires_at: expect.any(String), csrf_token: expect.any(String) });
    expect(setCookies(res).get('session')?.value).toBe(res.body.token);
    const who = await me(h, res.body.token);
    expect(who.status).toBe(200);
    expect(who.body).toMatchObject({
      user: { email: primaryEmail(account), name: 'Mona Lisa Octocat' },
      organization: { name: "Mona Lisa Octocat's organization" },
      role: 'owner',
    });
    const identity = await h.deps.prisma.oAuthIdentity.findUniqueOrThrow({
      where: { provider_subject: { provider: 'github', subject: String(account.id) } },
      include: { user: true },
    });
    expect(identity.user).toMatchObject({ email: primaryEmail(account), status: 'active', passwordHash: null });
    const audit = await h.deps.prisma.auditEvent.findFirstOrThrow({ where: { actorId: identity.userId, action: 'auth.login' } });
    expect(audit).toMatchObject({ actorType: 'user', metadata: { method: 'oauth_github' } });
    expect(audit.ip).toEqual(expect.any(String));
  });

  it('names the organization after the login when the GitHub profile has no name', async () => {
    const account = newAccount(undefined, { name: null });
    const { res } = await signInWithGithub(account);
    expect(res.status).toBe(200);
    expect((await me(h, res.body.token)).body).toMatchObject({
      user: { name: account.login },
      organization: { name: `${account.login}'s organization` },
    });
  });

  it('recognises a returning person by the GitHub user id, not by login or address', async () => {
    const account = newAccount();
    const first = await signInWithGithub(account);
    const userId = (await me(h, first.res.body.token)).body.user.id;

    const renamed: GithubAccount = {
      ...account,
      login: `renamed-${uniqueSuffix()}`,
      emails: [{ email: `new-${uniqueSuffix()}@example.test`, primary: true, verified: true }],
    };
    gh.addAccount(renamed);
    const second = await signInWithGithub(renamed);
    expect(second.res.status).toBe(200);
    expect((await me(h, second.res.body.token)).body.user.id).toBe(userId);
    expect(await h.deps.prisma.user.count({ where: { email: renamed.emails[0].email } })).toBe(0);
  });

  it('links an existing password account by its verified e-mail', async () => {
    const existing = await signupAndVerify(h);
    const account = newAccount([{ email: existing.email.toUpperCase(), primary: true, verified: true }]);
    const { res } = await signInWithGithub(account);
    expect(res.status).toBe(200);
    const who = await me(h, res.body.token);
    expect(who.body.user.id).toBe(existing.userId);
    expect(who.body.organization.id).toBe(existing.organizationId);
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { userId: existing.userId, provider: 'github' } })).toBe(1);
    expect((await loginRequest(h, { email: existing.email, password: existing.password })).status).toBe(200);
  });

  it('lets an invited address join the inviting organization with the invited role, no organization of its own', async () => {
    const org = await createOrg(h);
    const invitee = `invitee-${uniqueSuffix()}@example.test`;
    const invite = await request(h.app)
      .post('/api/v1/invitations')
      .set('Authorization', `Bearer ${org.owner.token}`)
      .send({ email: invitee, role: 'manager' });
    expect(invite.status).toBe(201);
    const organizationsBefore = await h.deps.prisma.organization.count();

    const { res } = await signInWithGithub(newAccount([{ email: invitee, primary: true, verified: true }]));
    expect(res.status).toBe(200);
    const who = await me(h, res.body.token);
    expect(who.body).toMatchObject({ user: { email: invitee }, organization: { id: org.id, name: org.name }, role: 'manager' });
    expect(await h.deps.prisma.organization.count()).toBe(organizationsBefore);
    const invitation = await h.deps.prisma.invitation.findUniqueOrThrow({ where: { id: invite.body.id } });
    expect(invitation.acceptedAt).toBeInstanceOf(Date);
    expect(await h.deps.prisma.membership.count({ where: { userId: who.body.user.id } })).toBe(1);
    expect(await auditLog(h, org.owner.token, { action: 'invitation.accepted' })).toEqual([
      expect.objectContaining({
        actor_id: who.body.user.id, actor_label: invitee, target_type: 'user', target_id: who.body.user.id,
        metadata: { invitation_id: invite.body.id, role: 'manager', new_user: true },
      }),
    ]);
  });

  it('gives a user with 2FA on a partial token and no session', async () => {
    const existing = await signupAndVerify(h);
    const login = await loginRequest(h, { email: existing.email, password: existing.password });
    await enableTotp(h, login.body.token, existing.password);
    const { res } = await signInWithGithub(newAccount([{ email: existing.email, primary: true, verified: true }]));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
    expect(setCookies(res).has('session')).toBe(false);
    expect((await me(h, res.body.partial_token)).status).toBe(401);
  });

  it("sends a browser sign-in (redirect_after) of a 2FA user to the dashboard's TOTP page, the partial token in an httpOnly cookie", async () => {
    const existing = await signupAndVerify(h);
    const login = await loginRequest(h, { email: existing.email, password: existing.password });
    const secret = await enableTotp(h, login.body.token, existing.password);
    const account = newAccount([{ email: existing.email, primary: true, verified: true }]);
    const { res } = await signInWithGithub(account, { redirect_after: '/webhooks?x=1' });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('/login/2fa?next=%2Fwebhooks%3Fx%3D1');
    // No token in the redirect or a body; no session yet.
    expect(res.headers.location).not.toMatch(/ey[\w-]+\./);
    expect(res.text ?? '').not.toMatch(/ey[\w-]+\./);
    const cookies = setCookies(res);
    expect(cookies.has('session')).toBe(false);
    const partial = cookies.get('partial_token')!;
    expect(partial.value).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    expect(partial.attributes.has('httponly')).toBe(true);
    expect(partial.attributes.get('samesite')?.toLowerCase()).toBe('strict');
    expect(partial.attributes.get('path')).toBe('/api/v1/auth/login/2fa');
    expect(Number(partial.attributes.get('max-age'))).toBe(h.config.partialTokenTtlSeconds);
    expect((await me(h, partial.value)).status).toBe(401);

    h.clock.advance(30_000); // the enabling code's step is used up
    const exchange = () =>
      request(h.app)
        .post('/api/v1/auth/login/2fa')
        .set('Cookie', `partial_token=${partial.value}`)
        .send({ code: oathtoolCode(secret, h.clock.now()) });
    const wrong = await request(h.app).post('/api/v1/auth/login/2fa').set('Cookie', `partial_token=${partial.value}`).send({ code: '000000' });
    expect(wrong.status).toBe(401);
    const done = await exchange();
    expect(done.status).toBe(200);
    expect((await me(h, done.body.token)).body.user.email).toBe(existing.email);
    const after = setCookies(done);
    expect(after.has('session')).toBe(true);
    // The exchange spends the cookie: cleared in the browser, and refused if presented again.
    expect(after.get('partial_token')?.value).toBe('');
    expect(after.get('partial_token')?.attributes.get('path')).toBe('/api/v1/auth/login/2fa');
    h.clock.advance(30_000);
    expect((await exchange()).status).toBe(401);
    // Neither body nor cookie: a 400 that names the field.
    const none = await request(h.app).post('/api/v1/auth/login/2fa').send({ code: '123456' });
    expect(none.status).toBe(400);
    expect(none.body.detail).toMatch(/partial_token/);
  });
});

const post = (path: string, token: string, body: Record<string, unknown> = {}) => request(h.app).post(`/api/v1${path}`).set(bearer(token)).send(body);
const totpEnabled = async (userId: string) => (await h.deps.prisma.user.findUniqueOrThrow({ where: { id: userId } })).totpEnabled;

describe('an account without a password (made by GitHub sign-in) turns 2FA on from a recent sign-in', () => {
  afterEach(() => h.clock.reset());

  it('says it has no password (/auth/me), and turns 2FA on from a session signed in within the window, without one', async () => {
    const { res } = await signInWithGithub(newAccount());
    const token = res.body.token as string;
    const who = await me(h, token);
    expect(who.body.user).toMatchObject({ has_password: false, two_factor_enabled: false });
    await signedInAgo(h, token, RECENT_SIGN_IN_WINDOW_MS - 60_000);
    const setup = await post('/auth/2fa/setup', token);
    expect(setup.status).toBe(200);
    const enabled = await post('/auth/2fa/enable', token, { code: oathtoolCode(setup.body.secret, h.clock.now()) });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toEqual({ two_factor_enabled: true });
    expect(await totpEnabled(who.body.user.id)).toBe(true);
  });

  it('refuses a session signed in longer ago (403 REAUTHENTICATION_REQUIRED, nothing changed); signing in again lets it', async () => {
    const account = newAccount();
    const stolen = (await signInWithGithub(account)).res.body.token as string;
    const other = (await signInWithGithub(account)).res.body.token as string;
    const userId = (await me(h, stolen)).body.user.id as string;
    const setup = await post('/auth/2fa/setup', stolen);
    expect(setup.status).toBe(200);

    // The stolen cookie of a session signed in a while ago: no password to ask for, and the session is not recent.
    h.clock.advance(RECENT_SIGN_IN_WINDOW_MS + 1_000);
    for (const body of [{}, { current_password: 'anything at all' }]) {
      const refused = await post('/auth/2fa/enable', stolen, { code: oathtoolCode(setup.body.secret, h.clock.now()), ...body });
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ detail: expect.stringContaining('sign in again'), code: 'REAUTHENTICATION_REQUIRED' });
    }
    expect(await totpEnabled(userId)).toBe(false);
    for (const token of [stolen, other]) expect((await me(h, token)).status).toBe(200);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_enabled', targetId: userId } })).toBe(0);

    // The same, the sign-in's time set back in the database with the clock as it is.
    h.clock.reset();
    await signedInAgo(h, other, RECENT_SIGN_IN_WINDOW_MS + 60_000);
    const old = await post('/auth/2fa/enable', other, { code: oathtoolCode(setup.body.secret, h.clock.now()) });
    expect(old.status).toBe(403);
    expect(old.body.code).toBe('REAUTHENTICATION_REQUIRED');
    expect(await totpEnabled(userId)).toBe(false);

    // The owner signs in with GitHub again: that session turns 2FA on, and the older ones end.
    const fresh = (await signInWithGithub(account)).res.body.token as string;
    const own = await post('/auth/2fa/setup', fresh);
    const enabled = await post('/auth/2fa/enable', fresh, { code: oathtoolCode(own.body.secret, h.clock.now()) });
    expect(enabled.status).toBe(200);
    expect(await totpEnabled(userId)).toBe(true);
    expect((await me(h, stolen)).status).toBe(401);
    expect((await me(h, fresh)).status).toBe(200);
  });

  it('a session signed in longer ago cannot set 2FA up either: it cannot keep replacing the secret the owner turns on, so the owner still ends it', async () => {
    // Without a password, turning 2FA on from a new sign-in is the only way such an account ends a stolen session
    // (there is no password to change). If the stolen session could still call setup, it would replace the pending
    // secret whenever the owner set one up, and every code the owner typed would be refused.
    const account = newAccount();
    const stolen = (await signInWithGithub(account)).res.body.token as string;
    const userId = (await me(h, stolen)).body.user.id as string;
    await signedInAgo(h, stolen, RECENT_SIGN_IN_WINDOW_MS + 60_000);
    const pending = async () => (await h.deps.prisma.user.findUniqueOrThrow({ where: { id: userId } })).totpPendingEnc;

    const early = await post('/auth/2fa/setup', stolen);
    expect(early.status).toBe(403);
    expect(early.body).toEqual({ detail: expect.stringContaining('sign in again'), code: 'REAUTHENTICATION_REQUIRED' });
    expect(await pending()).toBeNull();

    // The owner signs in again and sets 2FA up; the stolen session tries to replace that secret while the owner types a code.
    const fresh = (await signInWithGithub(account)).res.body.token as string;
    const own = await post('/auth/2fa/setup', fresh);
    expect(own.status).toBe(200);
    const owners = await pending();
    const meanwhile = await post('/auth/2fa/setup', stolen);
    expect(meanwhile.status).toBe(403);
    expect(meanwhile.body.code).toBe('REAUTHENTICATION_REQUIRED');
    expect(await pending()).toEqual(owners);

    const enabled = await post('/auth/2fa/enable', fresh, { code: oathtoolCode(own.body.secret, h.clock.now()) });
    expect(enabled.status).toBe(200);
    expect(await totpEnabled(userId)).toBe(true);
    expect((await me(h, stolen)).status).toBe(401);
  });
});

describe('an account without a password (made by GitHub sign-in) turns 2FA off from a recent sign-in', () => {
  afterEach(() => h.clock.reset());
  const STEP_MS = 30_000;

  /** Signs in with GitHub and the second factor: a new session. */
  async function signInWithGithubAnd2fa(account: GithubAccount, secret: string): Promise<string> {
    const { res } = await signInWithGithub(account);
    expect(res.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
    const done = await request(h.app)
      .post('/api/v1/auth/login/2fa')
      .send({ partial_token: res.body.partial_token, code: oathtoolCode(secret, h.clock.now()) });
    expect(done.status).toBe(200);
    return done.body.token as string;
  }

  it('refuses a session signed in longer ago (403 REAUTHENTICATION_REQUIRED, before any code counts); a new sign-in turns 2FA off', async () => {
    const account = newAccount();
    const first = (await signInWithGithub(account)).res.body.token as string;
    const userId = (await me(h, first)).body.user.id as string;
    const secret = await enableTotp(h, first);
    h.clock.advance(STEP_MS);
    const stolen = await signInWithGithubAnd2fa(account, secret);
    await signedInAgo(h, stolen, RECENT_SIGN_IN_WINDOW_MS + 60_000);

    // The stolen cookie of an older session: a right code does not turn 2FA off, whatever it says for a password.
    h.clock.advance(STEP_MS);
    const code = oathtoolCode(secret, h.clock.now());
    for (const body of [{ code }, { code, current_password: 'anything at all' }]) {
      const refused = await post('/auth/2fa/disable', stolen, body);
      expect(refused.status).toBe(403);
      expect(refused.body).toEqual({ detail: expect.stringContaining('sign in again'), code: 'REAUTHENTICATION_REQUIRED' });
    }
    // Nor do its wrong codes count against the owner's sign-in.
    for (let i = 0; i < h.config.totpMaxFailures + 2; i++) {
      expect((await post('/auth/2fa/disable', stolen, { code: code === '000000' ? '111111' : '000000' })).status).toBe(403);
    }
    expect(await totpEnabled(userId)).toBe(true);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.2fa_disabled', targetId: userId } })).toBe(0);

    // The owner signs in again (GitHub and the code) and, within the window, turns 2FA off.
    const fresh = await signInWithGithubAnd2fa(account, secret);
    h.clock.advance(STEP_MS);
    const disabled = await post('/auth/2fa/disable', fresh, { code: oathtoolCode(secret, h.clock.now()) });
    expect(disabled.status).toBe(200);
    expect(disabled.body).toEqual({ two_factor_enabled: false });
    expect(await totpEnabled(userId)).toBe(false);
  });
});

describe('refusals', () => {
  it('refuses an account whose primary address is unverified, even with another verified one (403)', async () => {
    const login = `unverified-${uniqueSuffix()}`;
    const account = newAccount([
      { email: `${login}@example.test`, primary: true, verified: false },
      { email: `${login}@other.test`, primary: false, verified: true },
    ]);
    const { res } = await signInWithGithub(account);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: expect.stringMatching(/no verified primary e-mail/) });
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { provider: 'github', subject: String(account.id) } })).toBe(0);
    expect(await h.deps.prisma.user.count({ where: { email: { in: account.emails.map((e) => e.email) } } })).toBe(0);
  });

  it('never links an existing account through an unverified address', async () => {
    const existing = await signupAndVerify(h);
    const { res } = await signInWithGithub(newAccount([{ email: existing.email, primary: true, verified: false }]));
    expect(res.status).toBe(403);
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { userId: existing.userId } })).toBe(0);
  });

  it('refuses a wrong state and a missing state cookie without exchanging the code', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'github');
    const back = await authorizeAtGithub(started.location, account.login);
    const before = gh.tokenRequests;

    const noCookie = await callback(h, 'github', back);
    expect(noCookie.status).toBe(400);
    expect(noCookie.body).toEqual({ detail: expect.stringMatching(/state cookie is missing/) });

    const forged = new URL(back);
    forged.searchParams.set('state', 'y'.repeat(43));
    const badState = await callback(h, 'github', forged, started.flowId);
    expect(badState.status).toBe(400);
    expect(badState.body).toEqual({ detail: expect.stringMatching(/state parameter does not match/) });
    expect(gh.tokenRequests).toBe(before);
    // The flow was used up by the bad attempt.
    expect((await callback(h, 'github', back, started.flowId)).status).toBe(400);
  });

  it("refuses another provider's flow cookie", async () => {
    const account = newAccount();
    const started = await startFlow(h, 'github');
    const back = await authorizeAtGithub(started.location, account.login);
    const res = await request(h.app).get(back.pathname + back.search).set('Cookie', `oauth_google=${started.flowId}`);
    expect(res.status).toBe(400);
  });

  it('refuses a replayed callback, and the used code in a new sign-in (GitHub refuses it)', async () => {
    const account = newAccount();
    const { res, back, started } = await signInWithGithub(account);
    expect(res.status).toBe(200);
    const tokenRequests = gh.tokenRequests;
    const replay = await callback(h, 'github', back, started.flowId);
    expect(replay.status).toBe(400);
    expect(gh.tokenRequests).toBe(tokenRequests);

    const fresh = await startFlow(h, 'github');
    const smuggled = new URL(back);
    smuggled.searchParams.set('state', fresh.location.searchParams.get('state')!);
    const again = await callback(h, 'github', smuggled, fresh.flowId);
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ detail: expect.stringMatching(/GitHub refused the authorization code \(bad_verification_code/) });
    expect(gh.refusedTokenRequests).toBeGreaterThan(0);
  });

  it('reports a sign-in declined at GitHub as 400', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'github');
    const back = await authorizeAtGithub(started.location, account.login, { deny: true });
    const res = await callback(h, 'github', back, started.flowId);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringMatching(/GitHub did not authorize the sign-in \(access_denied/) });
  });

  it('expires a started sign-in with its TTL', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'github');
    const back = await authorizeAtGithub(started.location, account.login);
    await h.deps.redis.del(flowRedisKey(h, started.flowId)); // what the TTL does after 10 minutes
    const res = await callback(h, 'github', back, started.flowId);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringMatching(/expired/) });
  });
});

describe('provider problems', () => {
  let h2: Harness;
  let gh2: LoopbackGithub;

  afterAll(async () => {
    await h2?.close();
    await gh2?.close().catch(() => undefined);
  });

  it('answers 502 when GitHub refuses our client credentials, and when it cannot be reached', async () => {
    gh2 = await startGithubServer({ ...APP, clientSecret: 'a-different-secret-at-github' });
    h2 = await createHarness({ ...githubEnv(gh2), GITHUB_API_BASE_URL: 'http://127.0.0.1:9' });
    const account = { id: nextId++, login: `octo-${uniqueSuffix()}`, name: null, emails: [] };
    gh2.addAccount(account);

    const started = await startFlow(h2, 'github');
    const back = await authorizeAtGithub(started.location, account.login);
    const refused = await callback(h2, 'github', back, started.flowId);
    expect(refused.status).toBe(502);
    expect(refused.body).toEqual({ detail: expect.stringMatching(/refused this server's sign-in client \(incorrect_client_credentials/) });

    await gh2.close();
    const again = await startFlow(h2, 'github');
    const state = again.location.searchParams.get('state')!;
    const down = await request(h2.app)
      .get(`/api/v1/auth/oauth/github/callback?code=abc&state=${encodeURIComponent(state)}`)
      .set('Cookie', `oauth_github=${again.flowId}`);
    expect(down.status).toBe(502);
    expect(down.body).toEqual({ detail: expect.stringMatching(/GitHub could not be reached/) });
  });
});
