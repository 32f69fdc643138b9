// Sign-in with Google (OpenID Connect) against a real OpenID Provider on loopback: an `oidc-provider` instance
// (support/oauth-google.ts). The service discovers it, sends the browser there, exchanges the code with PKCE and
// verifies the ID token against the provider's JWKS. Tamper tests let the real token endpoint answer, then swap
// in an ID token that is genuine but meant for another client or another sign-in, or a forged one.
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { SIGNUP_PASSWORD, loginRequest, oathtoolCode, setCookies, signupAndVerify, signupViaApi } from './support/auth-helpers';
import { authorizeAtProvider, startOidcProvider, type LoopbackOidcProvider, type OidcAccount } from './support/oauth-google';
import { APP_BASE_URL, callback, enableTotp, flowRedisKey, me, redirectUriOf, startFlow } from './support/oauth-flow';

const CLIENT = { client_id: 'svc-google-client', client_secret: 'svc-google-secret-0123456789', redirect_uris: [redirectUriOf('google')] };
const OTHER_CLIENT = { client_id: 'another-app', client_secret: 'another-app-secret-0123456789', redirect_uris: ['http://other.test/cb'] };

let op: LoopbackOidcProvider;
let h: Harness;

beforeAll(async () => {
  op = await startOidcProvider([CLIENT, OTHER_CLIENT]);
  h = await createHarness({
    PUBLIC_BASE_URL: APP_BASE_URL,
    GOOGLE_CLIENT_ID: CLIENT.client_id,
    GOOGLE_CLIENT_SECRET: CLIENT.client_secret,
    GOOGLE_ISSUER_URL: op.issuer,
    LOGIN_RATE_LIMIT_PER_MINUTE: '1000',
  });
});
afterAll(async () => {
  await h?.close();
  await op?.close();
});
afterEach(() => {
  op.tokenResponseFilter = undefined;
  h.clock.reset();
});

function newAccount(overrides: Partial<OidcAccount> = {}): OidcAccount {
  const account = {
    sub: `g-${uniqueSuffix()}`,
    email: `person-${uniqueSuffix()}@gmail.test`,
    email_verified: true,
    name: 'Grace Hopper',
    ...overrides,
  };
  op.addAccount(account);
  return account;
}

/** The whole browser round trip: start at the service, sign in at the provider, back at the service's callback. */
async function signInWithGoogle(account: OidcAccount, startQuery: Record<string, string> = {}) {
  const started = await startFlow(h, 'google', startQuery);
  const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'));
  const res = await callback(h, 'google', back, started.flowId);
  return { res, started, back };
}

async function discovery(): Promise<Record<string, string>> {
  return (await fetch(`${op.issuer}/.well-known/openid-configuration`)).json() as Promise<Record<string, string>>;
}

/** A genuine ID token from the provider for `client`, signed in as `sub`, with the given nonce. */
async function idTokenFrom(client: typeof CLIENT, sub: string, nonce: string): Promise<string> {
  const d = await discovery();
  const verifier = randomBytes(32).toString('base64url');
  const auth = new URL(d.authorization_endpoint);
  auth.search = new URLSearchParams({
    response_type: 'code',
    client_id: client.client_id,
    redirect_uri: client.redirect_uris[0],
    scope: 'openid email profile',
    state: 'test',
    nonce,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
  }).toString();
  const back = await authorizeAtProvider(auth.toString(), sub, client.redirect_uris[0]);
  const res = await fetch(d.token_endpoint, {
    method: 'POST',
    headers: {
      Authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
      'Content-Type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: back.searchParams.get('code')!,
      redirect_uri: client.redirect_uris[0],
      code_verifier: verifier,
    }),
  });
  const body = (await res.json()) as { id_token?: string };
  if (!body.id_token) throw new Error(`no id_token: ${JSON.stringify(body)}`);
  return body.id_token;
}

const decodePart = (jwt: string, i: 0 | 1) => JSON.parse(Buffer.from(jwt.split('.')[i], 'base64url').toString('utf8'));

async function userCount(email: string) {
  return h.deps.prisma.user.count({ where: { email } });
}

describe('start', () => {
  it("redirects to the provider's authorization endpoint with state, PKCE S256, nonce and the exact redirect URI", async () => {
    const { location, cookie, flowId, response } = await startFlow(h, 'google');
    const d = await discovery();
    expect(`${location.origin}${location.pathname}`).toBe(d.authorization_endpoint);
    const q = location.searchParams;
    expect(q.get('response_type')).toBe('code');
    expect(q.get('client_id')).toBe(CLIENT.client_id);
    expect(q.get('redirect_uri')).toBe(`${APP_BASE_URL}/api/v1/auth/oauth/google/callback`);
    expect(q.get('scope')).toBe('openid email profile');
    expect(q.get('code_challenge_method')).toBe('S256');
    expect(q.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(q.get('state')!.length).toBeGreaterThanOrEqual(43);
    expect(q.get('nonce')!.length).toBeGreaterThanOrEqual(43);
    expect(response.headers['cache-control']).toBe('no-store');

    // The flow id cookie: httpOnly, Secure, SameSite=Lax, only for this provider's routes, 10 minutes.
    expect(cookie.attributes.has('httponly')).toBe(true);
    expect(cookie.attributes.has('secure')).toBe(true);
    expect(cookie.attributes.get('samesite')).toBe('Lax');
    expect(cookie.attributes.get('path')).toBe('/api/v1/auth/oauth/google');
    expect(cookie.attributes.get('max-age')).toBe('600');
    // Server-side, under a hash of the cookie's value, with a 10-minute TTL; no secret in the cookie itself.
    const ttl = await h.deps.redis.ttl(flowRedisKey(h, flowId));
    expect(ttl).toBeGreaterThan(590);
    expect(ttl).toBeLessThanOrEqual(600);
    const stored = JSON.parse((await h.deps.redis.get(flowRedisKey(h, flowId)))!);
    expect(stored.state).toBe(q.get('state'));
    expect(stored.nonce).toBe(q.get('nonce'));
    expect(createHash('sha256').update(stored.codeVerifier).digest('base64url')).toBe(q.get('code_challenge'));
    expect(flowId).not.toContain(stored.state);
  });

  it('takes only relative paths as redirect_after', async () => {
    for (const bad of ['https://evil.test/x', '//evil.test/x', '/\\evil.test', 'dashboard', '/ok\r\nx', 'javascript:alert(1)']) {
      const res = await request(h.app).get('/api/v1/auth/oauth/google/start').query({ redirect_after: bad });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.stringContaining('redirect_after') });
    }
    expect((await startFlow(h, 'google', { redirect_after: '/dashboard?tab=keys' })).location.hostname).toBe('127.0.0.1');
  });
});

describe('sign-in and signup', () => {
  it('signs up a new person as owner of a new organization and issues a session like password login', async () => {
    const account = newAccount({ name: 'Ada Lovelace' });
    const { res } = await signInWithGoogle(account);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ token: expect.any(String), expires_at: expect.any(String), csrf_token: expect.any(String) });
    expect(res.headers['cache-control']).toBe('no-store');
    const cookies = setCookies(res);
    expect(cookies.get('session')?.value).toBe(res.body.token);
    expect(cookies.get('session')?.attributes.get('samesite')).toBe('Strict');
    expect(cookies.get('csrf_token')?.value).toBe(res.body.csrf_token);
    // The flow cookie is cleared.
    expect(cookies.get('oauth_google')?.value).toBe('');

    const who = await me(h, res.body.token);
    expect(who.status).toBe(200);
    expect(who.body).toMatchObject({
      user: { email: account.email, name: 'Ada Lovelace', two_factor_enabled: false, has_password: false },
      organization: { name: "Ada Lovelace's organization" },
      role: 'owner',
      credential: { type: 'session' },
    });
    // The cookie alone works too (a safe method needs no CSRF token).
    const byCookie = await request(h.app).get('/api/v1/auth/me').set('Cookie', `session=${res.body.token}`);
    expect(byCookie.status).toBe(200);

    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { email: account.email }, include: { oauthIdentities: true } });
    expect(user).toMatchObject({ status: 'active', passwordHash: null });
    expect(user.emailVerifiedAt).toBeInstanceOf(Date);
    expect(user.oauthIdentities).toEqual([expect.objectContaining({ provider: 'google', subject: account.sub, email: account.email })]);
    // No password: password login answers like a wrong password.
    expect((await loginRequest(h, { email: account.email, password: SIGNUP_PASSWORD })).status).toBe(401);
  });

  it('recognises a returning person by the identity, even after the address changed at the provider', async () => {
    const account = newAccount();
    const first = await signInWithGoogle(account);
    expect(first.res.status).toBe(200);
    const userId = (await me(h, first.res.body.token)).body.user.id;

    const newEmail = `renamed-${uniqueSuffix()}@gmail.test`;
    op.addAccount({ ...account, email: newEmail });
    const second = await signInWithGoogle(account);
    expect(second.res.status).toBe(200);
    expect((await me(h, second.res.body.token)).body.user.id).toBe(userId);
    expect(await userCount(newEmail)).toBe(0);
    expect(await h.deps.prisma.oAuthIdentity.findMany({ where: { userId } })).toEqual([
      expect.objectContaining({ subject: account.sub, email: newEmail }),
    ]);
    expect(await h.deps.prisma.membership.count({ where: { userId } })).toBe(1);
  });

  it('links an existing password account still pending by its verified e-mail, activating it without its unproven password', async () => {
    const pending = await signupViaApi(h); // never opened the verification mail
    const account = newAccount({ email: pending.email.toUpperCase() });
    const { res } = await signInWithGoogle(account);
    expect(res.status).toBe(200);
    const who = await me(h, res.body.token);
    expect(who.body.user.id).toBe(pending.userId);
    expect(who.body.organization.id).toBe(pending.organizationId);
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: pending.userId }, include: { oauthIdentities: true } });
    expect(user.status).toBe('active');
    expect(user.oauthIdentities).toEqual([expect.objectContaining({ provider: 'google', subject: account.sub, email: pending.email })]);
    expect((await loginRequest(h, { email: pending.email, password: pending.password })).status).toBe(401);
  });

  it("a password chosen at a signup never verified does not survive the address owner's Google sign-in (no pre-account takeover)", async () => {
    // The attacker signs up with the victim's address and a password of their own; the mail goes to the victim, unread.
    const planted = await signupViaApi(h, { password: 'attacker-chosen-password' });
    // Later the victim signs in with Google, whose verified address it is: the pending account becomes theirs.
    const { res } = await signInWithGoogle(newAccount({ email: planted.email }));
    expect(res.status).toBe(200);
    expect((await me(h, res.body.token)).body.user.id).toBe(planted.userId);
    // The attacker's password no longer opens the now active account.
    const attacker = await loginRequest(h, { email: planted.email, password: 'attacker-chosen-password' });
    expect(attacker.status).toBe(401);
    expect(attacker.body).toEqual({ detail: expect.any(String) });
    expect(attacker.body.token).toBeUndefined();
    expect(await h.deps.prisma.user.findUniqueOrThrow({ where: { id: planted.userId } })).toMatchObject({ status: 'active', passwordHash: null });
  });

  describe("racing another change to the pending account it activates (the account read before the link, changed before the activation)", () => {
    /**
     * Holds the pending account's row (FOR NO KEY UPDATE: the link's FOR KEY SHARE passes, the activation's UPDATE
     * waits), signs in with Google, and once the activation waits, applies `change` in the holding transaction.
     */
    async function signInWhileHeld(userId: string, account: OidcAccount, change: (tx: Parameters<Parameters<Harness['deps']['prisma']['$transaction']>[0]>[0]) => Promise<unknown>) {
      let signIn!: ReturnType<typeof signInWithGoogle>;
      await h.deps.prisma.$transaction(
        async (tx) => {
          await tx.$queryRaw`SELECT id FROM users WHERE id = ${userId} FOR NO KEY UPDATE`;
          signIn = signInWithGoogle(account);
          signIn.catch(() => undefined);
          for (let waited = 0; ; waited += 20) {
            const [row] = await h.deps.prisma.$queryRaw<Array<{ n: number }>>`
              SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE%users%'`;
            if (row!.n > 0) break;
            if (waited > 15_000) throw new Error('the activation never waited for the held row');
            await new Promise((r) => setTimeout(r, 20));
          }
          await change(tx);
        },
        { timeout: 30_000 },
      );
      return (await signIn).res;
    }

    it('an invitation accepted meanwhile set a password: the sign-in keeps it (it no longer wipes it)', async () => {
      const pending = await signupViaApi(h);
      const chosenAtInvitation = '$2b$04$abcdefghijklmnopqrstuuL0cAJ0ZzbPqmnqM1Ct9Yp0kD7Gv4mOe';
      const res = await signInWhileHeld(pending.userId, newAccount({ email: pending.email }), (tx) =>
        tx.$executeRaw`UPDATE users SET status = 'active', password_hash = ${chosenAtInvitation}, email_verified_at = now() WHERE id = ${pending.userId}`,
      );
      expect(res.status).toBe(200);
      expect((await me(h, res.body.token)).body.user.id).toBe(pending.userId);
      expect(await h.deps.prisma.user.findUniqueOrThrow({ where: { id: pending.userId } })).toMatchObject({ status: 'active', passwordHash: chosenAtInvitation });
    });

    it('a new signup replaced it meanwhile (the pending account deleted): 409, not a 500', async () => {
      const pending = await signupViaApi(h);
      const res = await signInWhileHeld(pending.userId, newAccount({ email: pending.email }), (tx) => tx.$executeRaw`DELETE FROM users WHERE id = ${pending.userId}`);
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ detail: 'The account changed while you signed in; sign in again.' });
      expect(await h.deps.prisma.user.findUnique({ where: { id: pending.userId } })).toBeNull();
    });
  });

  it('redirects to redirect_after with the session cookies when it was given at start', async () => {
    const { res } = await signInWithGoogle(newAccount(), { redirect_after: '/dashboard/projects?tab=1' });
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('/dashboard/projects?tab=1');
    const token = setCookies(res).get('session')!.value;
    expect((await me(h, token)).status).toBe(200);
  });

  it('gives a user with 2FA on a partial token and no session; the 2FA login then completes it', async () => {
    const account = await signupAndVerify(h);
    const login = await loginRequest(h, { email: account.email, password: account.password });
    const secret = await enableTotp(h, login.body.token, account.password);

    const { res } = await signInWithGoogle(newAccount({ email: account.email }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
    expect(setCookies(res).has('session')).toBe(false);
    // The partial token is no session.
    expect((await me(h, res.body.partial_token)).status).toBe(401);

    h.clock.advance(30_000); // the enabling code's step is used up
    const second = await request(h.app)
      .post('/api/v1/auth/login/2fa')
      .send({ partial_token: res.body.partial_token, code: oathtoolCode(secret, h.clock.now()) });
    expect(second.status).toBe(200);
    expect((await me(h, second.body.token)).body.user.id).toBe(account.userId);
  });
});

describe('refusals', () => {
  it('refuses an address the provider has not verified (403) and creates nobody', async () => {
    const account = newAccount({ email_verified: false });
    const { res } = await signInWithGoogle(account);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: expect.stringMatching(/not verified/) });
    expect(await userCount(account.email)).toBe(0);
  });

  it('never links an existing account through an unverified address', async () => {
    const existing = await signupAndVerify(h);
    const { res } = await signInWithGoogle(newAccount({ email: existing.email, email_verified: false }));
    expect(res.status).toBe(403);
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { userId: existing.userId } })).toBe(0);
  });

  it('refuses a callback whose state does not match, before any code exchange', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'google');
    const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'));
    const before = op.tokenRequests;
    back.searchParams.set('state', 'x'.repeat(43));
    const res = await callback(h, 'google', back, started.flowId);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringMatching(/state/) });
    expect(op.tokenRequests).toBe(before);
    // The flow is gone: the right state no longer helps.
    back.searchParams.set('state', started.location.searchParams.get('state')!);
    expect((await callback(h, 'google', back, started.flowId)).status).toBe(400);
    expect(await userCount(account.email)).toBe(0);
  });

  it('refuses a callback without the state cookie (another browser), and one without a state parameter', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'google');
    const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'));
    const before = op.tokenRequests;
    const noCookie = await callback(h, 'google', back);
    expect(noCookie.status).toBe(400);
    expect(noCookie.body).toEqual({ detail: expect.stringMatching(/cookie/) });
    const noState = new URL(back);
    noState.searchParams.delete('state');
    expect((await callback(h, 'google', noState, started.flowId)).status).toBe(400);
    expect(op.tokenRequests).toBe(before);
  });

  it('refuses a replayed callback, and a used code smuggled into a new sign-in', async () => {
    const account = newAccount();
    const { res, back, started } = await signInWithGoogle(account);
    expect(res.status).toBe(200);
    const replay = await callback(h, 'google', back, started.flowId);
    expect(replay.status).toBe(400);
    expect(replay.body).toEqual({ detail: expect.stringMatching(/expired or was already completed/) });

    // A fresh flow in the same browser, with the old code: the provider refuses it (used, and PKCE-bound).
    const fresh = await startFlow(h, 'google');
    const smuggled = new URL(back);
    smuggled.searchParams.set('state', fresh.location.searchParams.get('state')!);
    const again = await callback(h, 'google', smuggled, fresh.flowId);
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ detail: expect.stringMatching(/Google refused the authorization code \(invalid_grant/) });
  });

  it('reports a sign-in declined at the provider as 400', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'google');
    const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'), { deny: true });
    expect(back.searchParams.get('error')).toBe('access_denied');
    const res = await callback(h, 'google', back, started.flowId);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringMatching(/Google did not authorize the sign-in \(access_denied/) });
  });

  it('refuses an authorization response that names another issuer (mix-up)', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'google');
    const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'));
    expect(back.searchParams.get('iss')).toBe(op.issuer);
    back.searchParams.set('iss', 'https://evil.test');
    expect((await callback(h, 'google', back, started.flowId)).status).toBe(400);
  });
});

describe('ID token verification', () => {
  type Swap = (genuineIdToken: string) => Promise<string> | string;
  /**
   * Runs a sign-in whose token response carries `swap(genuine id_token)` instead; `prepare` gets the nonce of
   * the sign-in first (and may run flows of its own at the provider before the filter is installed).
   */
  async function signInWithSwappedIdToken(account: OidcAccount, prepare: (nonce: string) => Promise<Swap> | Swap) {
    const started = await startFlow(h, 'google');
    const swap = await prepare(started.location.searchParams.get('nonce')!);
    op.tokenResponseFilter = async (body) => ({ ...body, id_token: await swap(body.id_token as string) });
    const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'));
    return callback(h, 'google', back, started.flowId);
  }

  it('accepts the genuine token through the filter (the harness itself changes nothing)', async () => {
    const res = await signInWithSwappedIdToken(newAccount(), () => (token) => token);
    expect(res.status).toBe(200);
  });

  it('refuses a genuine ID token issued to another client (wrong audience), even with the right nonce', async () => {
    const account = newAccount();
    let foreign = '';
    let ourNonce = '';
    const res = await signInWithSwappedIdToken(account, async (nonce) => {
      ourNonce = nonce;
      foreign = await idTokenFrom(OTHER_CLIENT, account.sub, nonce);
      return () => foreign;
    });
    expect(decodePart(foreign, 1)).toMatchObject({ aud: OTHER_CLIENT.client_id, nonce: ourNonce, iss: op.issuer });
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ detail: expect.stringMatching(/ID token failed verification.*aud/) });
    expect(await userCount(account.email)).toBe(0);
  });

  it('refuses a genuine ID token of another sign-in (nonce mismatch)', async () => {
    const account = newAccount();
    const res = await signInWithSwappedIdToken(account, async () => {
      const other = await idTokenFrom(CLIENT, account.sub, 'some-other-nonce');
      return () => other;
    });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringMatching(/nonce/) });
    expect(await userCount(account.email)).toBe(0);
  });

  it('refuses a token whose claims were altered after signing', async () => {
    const account = newAccount();
    const victim = `victim-${uniqueSuffix()}@gmail.test`;
    const res = await signInWithSwappedIdToken(account, () => (token) => {
      const [header, , signature] = token.split('.');
      const claims = { ...decodePart(token, 1), email: victim };
      return `${header}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${signature}`;
    });
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ detail: expect.stringMatching(/ID token failed verification/) });
    expect(await userCount(victim)).toBe(0);
  });

  it("refuses a token signed with a key that is not in the provider's JWKS (same kid)", async () => {
    const account = newAccount();
    const { SignJWT, importJWK } = await import('jose');
    const rogue = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
    const res = await signInWithSwappedIdToken(account, () => async (token) => {
      const key = await importJWK({ ...rogue, alg: 'RS256' } as never, 'RS256');
      return new SignJWT(decodePart(token, 1)).setProtectedHeader(decodePart(token, 0)).sign(key);
    });
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ detail: expect.stringMatching(/ID token failed verification/) });
  });

  it("refuses an unsigned token (alg none) and one signed with the client secret (HS256)", async () => {
    const { SignJWT } = await import('jose');
    for (const forge of [
      (token: string) => `${Buffer.from('{"alg":"none"}').toString('base64url')}.${token.split('.')[1]}.`,
      (token: string) => new SignJWT(decodePart(token, 1)).setProtectedHeader({ alg: 'HS256' }).sign(Buffer.from(CLIENT.client_secret)),
    ]) {
      const account = newAccount();
      const res = await signInWithSwappedIdToken(account, () => forge);
      expect(res.status).toBe(502);
      expect(await userCount(account.email)).toBe(0);
    }
  });

  it('refuses an expired ID token (the service clock is two hours ahead)', async () => {
    const account = newAccount();
    const started = await startFlow(h, 'google');
    const back = await authorizeAtProvider(started.location.toString(), account.sub, redirectUriOf('google'));
    h.clock.advance(2 * 3600 * 1000);
    const res = await callback(h, 'google', back, started.flowId);
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ detail: expect.stringMatching(/ID token failed verification.*exp/) });
  });
});
