// Changing one's own password (POST /auth/password): with a session and the current password; the other sessions
// end, a sign-in started with the old password cannot finish, and the change is audited in each of the user's
// organizations only.
import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import { loginRequest, loginViaApi, oathtoolCode, sessionIdOf, signupAndVerify, type SignedUp } from './support/auth-helpers';
import { completeFirstFactor } from '../src/modules/auth/login';
import { auditLog, sentWhileHeld } from './support/audit-log';

const NEW_PASSWORD = 'another long enough passphrase';

let h: Harness;
let bystanders: TestOrg;

beforeAll(async () => {
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
  bystanders = await createOrg(h);
});
afterAll(() => h.close());

const changePassword = (token: string, body: Record<string, unknown>) =>
  request(h.app).post('/api/v1/auth/password').set(bearer(token)).send(body);
const me = (token: string) => request(h.app).get('/api/v1/auth/me').set(bearer(token));
const auditOf = async (token: string) => {
  const res = await request(h.app).get('/api/v1/audit-events?action=auth.password_changed&limit=100').set(bearer(token));
  expect(res.status).toBe(200);
  return res.body.data as Array<{ action: string; actor: { id: string }; target: { id: string }; metadata: Record<string, unknown> }>;
};
const signsIn = async (account: SignedUp, password: string) => (await loginRequest(h, { email: account.email, password })).status;

describe('POST /auth/password', () => {
  it('changes the password, ends the other sessions but this one, keeps API keys, and audits it in each organization of the user', async () => {
    const account = await signupAndVerify(h);
    // A second organization of the same user: the entry goes there too.
    const second = await h.deps.prisma.organization.create({ data: { id: newId('org'), name: `Second ${newId('org')}` } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: account.userId, role: 'owner' } });
    const current = await loginViaApi(h, account.email, account.password);
    const other = await loginViaApi(h, account.email, account.password);
    const key = await request(h.app).post('/api/v1/api-keys').set(bearer(current.token)).send({ name: 'ci', scopes: ['profile:read'] });
    expect(key.status).toBe(201);

    const res = await changePassword(current.token, { current_password: account.password, new_password: NEW_PASSWORD });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ password_changed: true, other_sessions_revoked: true });

    expect(await signsIn(account, account.password)).toBe(401);
    expect(await signsIn(account, NEW_PASSWORD)).toBe(200);
    expect((await me(current.token)).status).toBe(200);
    expect((await me(other.token)).status).toBe(401);
    expect((await me(key.body.key)).status).toBe(200);

    const entries = await auditOf(current.token);
    expect(entries).toEqual([
      expect.objectContaining({
        action: 'auth.password_changed',
        actor_type: 'user',
        actor_id: account.userId,
        target_type: 'user',
        target_id: account.userId,
        metadata: { other_sessions_revoked: true },
      }),
    ]);
    const inSecond = await h.deps.prisma.auditEvent.count({ where: { organizationId: second.id, action: 'auth.password_changed', actorId: account.userId } });
    expect(inSecond).toBe(1);
    // Another organization's log shows nothing of it.
    expect(await auditOf(bystanders.owner.token)).toEqual([]);
    expect(JSON.stringify(entries)).not.toContain(NEW_PASSWORD);
  });

  it('refuses a wrong current password with 400 and changes nothing; the attempt is audited like a failed sign-in, in each organization of the user', async () => {
    const account = await signupAndVerify(h);
    const second = await h.deps.prisma.organization.create({ data: { id: newId('org'), name: `Second ${newId('org')}` } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: account.userId, role: 'member' } });
    const { token } = await loginViaApi(h, account.email, account.password);
    const res = await changePassword(token, { current_password: 'not the password at all', new_password: NEW_PASSWORD });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: 'The current password is not correct.', code: 'INVALID_CURRENT_PASSWORD' });
    expect(await signsIn(account, account.password)).toBe(200);
    expect(await signsIn(account, NEW_PASSWORD)).toBe(401);
    expect(await auditOf(token)).toEqual([]);

    // (The sign-in with the new password just above failed too: recorded as any failed sign-in is.)
    const isWrongCurrent = (metadata: unknown) => (metadata as { reason?: string } | null)?.reason === 'invalid_current_password';
    const failed = (await auditLog(h, token, { action: 'auth.login_failed' })).filter((e) => isWrongCurrent(e.metadata));
    expect(failed).toEqual([
      expect.objectContaining({
        actor_type: 'user',
        actor_id: account.userId,
        actor_label: account.email,
        target_type: 'user',
        target_id: account.userId,
        metadata: { reason: 'invalid_current_password', operation: 'password_change' },
      }),
    ]);
    expect(JSON.stringify(failed)).not.toContain('not the password at all');
    expect(JSON.stringify(failed)).not.toContain(NEW_PASSWORD);
    const inSecond = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: second.id, action: 'auth.login_failed', actorId: account.userId } });
    expect(inSecond.filter((e) => isWrongCurrent(e.metadata)).map((e) => e.metadata)).toEqual([{ reason: 'invalid_current_password', operation: 'password_change' }]);
    expect((await auditLog(h, bystanders.owner.token, { action: 'auth.login_failed' })).filter((e) => e.actor_id === account.userId)).toEqual([]);
  });

  it('refuses a new password the signup would refuse (400 naming new_password), changing nothing', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    for (const new_password of ['short', 'x'.repeat(73)]) {
      const res = await changePassword(token, { current_password: account.password, new_password });
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('new_password');
    }
    expect(await signsIn(account, account.password)).toBe(200);
  });

  it('refuses an API key, even one with profile:update (403), and an account without a password (409)', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const key = await request(h.app).post('/api/v1/api-keys').set(bearer(token)).send({ name: 'profile', scopes: ['profile:update'] });
    expect(key.status).toBe(201);
    const byKey = await changePassword(key.body.key, { current_password: account.password, new_password: NEW_PASSWORD });
    expect(byKey.status).toBe(403);
    expect(byKey.body.detail).toContain('session');
    expect(await signsIn(account, account.password)).toBe(200);

    // An account made through GitHub or Google has no password to prove.
    await h.deps.prisma.user.update({ where: { id: account.userId }, data: { passwordHash: null } });
    const none = await changePassword(token, { current_password: account.password, new_password: NEW_PASSWORD });
    expect(none.status).toBe(409);
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).passwordHash).toBeNull();
  });

  it("counts wrong current passwords per session (429 past the login limit), apart from the e-mail's sign-ins", async () => {
    const strict = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '3' });
    try {
      const account = await signupAndVerify(strict);
      const { token } = await loginViaApi(strict, account.email, account.password);
      const hashBefore = (await strict.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).passwordHash;
      const attempt = (current_password = 'guess number one') =>
        request(strict.app).post('/api/v1/auth/password').set(bearer(token)).send({ current_password, new_password: NEW_PASSWORD });
      for (let i = 0; i < 3; i++) expect((await attempt()).status).toBe(400);
      const limited = await attempt(account.password);
      expect(limited.status).toBe(429);
      expect(limited.body).toEqual({ detail: `Rate limit exceeded. Retry after ${limited.headers['retry-after']}s.` });
      expect((await strict.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } })).passwordHash).toBe(hashBefore);
      // The e-mail's sign-ins have their own count: the owner signs in, and that new session confirms the change.
      const again = await loginRequest(strict, { email: account.email, password: account.password });
      expect(again.status).toBe(200);
      const changed = await request(strict.app)
        .post('/api/v1/auth/password')
        .set(bearer(again.body.token))
        .send({ current_password: account.password, new_password: NEW_PASSWORD });
      expect(changed.status).toBe(200);
    } finally {
      await strict.close();
    }
  });

  it('refuses a partial token (2FA) earned with the old password, at the second step', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const setup = await request(h.app).post('/api/v1/auth/2fa/setup').set(bearer(token));
    const secret = setup.body.secret as string;
    const enable = request(h.app).post('/api/v1/auth/2fa/enable').set(bearer(token));
    expect((await enable.send({ code: oathtoolCode(secret, h.clock.now()), current_password: account.password })).status).toBe(200);
    h.clock.advance(30_000);
    const partial = await loginRequest(h, { email: account.email, password: account.password });
    expect(partial.body.requires_2fa).toBe(true);

    expect((await changePassword(token, { current_password: account.password, new_password: NEW_PASSWORD })).status).toBe(200);
    const exchanged = await request(h.app)
      .post('/api/v1/auth/login/2fa')
      .send({ partial_token: partial.body.partial_token, code: oathtoolCode(secret, h.clock.now()) });
    expect(exchanged.status).toBe(401);
    expect(await h.deps.prisma.session.count({ where: { userId: account.userId, revokedAt: null } })).toBe(1); // this one only

    // A partial token earned with the new password goes through.
    h.clock.advance(30_000);
    const fresh = await loginRequest(h, { email: account.email, password: NEW_PASSWORD });
    const ok = await request(h.app).post('/api/v1/auth/login/2fa').send({ partial_token: fresh.body.partial_token, code: oathtoolCode(secret, h.clock.now()) });
    expect(ok.status).toBe(200);
    h.clock.reset();
  });

  it('with the session cookie, needs the CSRF header like every other state-changing request (403 without, nothing changed)', async () => {
    const account = await signupAndVerify(h);
    const { token, csrfToken } = await loginViaApi(h, account.email, account.password);
    const body = { current_password: account.password, new_password: NEW_PASSWORD };
    const viaCookie = () => request(h.app).post('/api/v1/auth/password').set('Cookie', `session=${token}`);
    expect((await viaCookie().send(body)).status).toBe(403);
    expect((await viaCookie().set('X-CSRF-Token', 'f'.repeat(64)).send(body)).status).toBe(403);
    expect(await signsIn(account, account.password)).toBe(200);
    expect((await viaCookie().set('X-CSRF-Token', csrfToken).send(body)).status).toBe(200);
    expect(await signsIn(account, NEW_PASSWORD)).toBe(200);
  });

  it("ends the user's sessions in their other organizations too", async () => {
    const account = await signupAndVerify(h);
    const second = await h.deps.prisma.organization.create({ data: { id: newId('org'), name: `Second ${newId('org')}` } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: account.userId, role: 'member' } });
    const here = await loginViaApi(h, account.email, account.password);
    const there = await loginRequest(h, { email: account.email, password: account.password, organization_id: second.id });
    expect(there.status).toBe(200);
    expect((await changePassword(here.token, { current_password: account.password, new_password: NEW_PASSWORD })).status).toBe(200);
    expect((await me(there.body.token)).status).toBe(401);
    expect((await me(here.token)).status).toBe(200);
  });

  it('a request whose own session ended while it ran (2FA turned on from another session) changes nothing', async () => {
    // Someone holding a stolen session and the password asks for a change; the owner, from their own session, turns
    // 2FA on meanwhile, which updates the user row and ends the other sessions, the thief's among them. The change
    // was authenticated before that, and then spent two bcrypt rounds: it must not go on to set the thief's
    // password and end the owner's session.
    const account = await signupAndVerify(h);
    const thief = await loginViaApi(h, account.email, account.password);
    const owner = await loginViaApi(h, account.email, account.password);
    const res = await sentWhileHeld(
      h,
      [
        ['SELECT id FROM users WHERE id = $1 FOR NO KEY UPDATE', [account.userId]],
        ['UPDATE sessions SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL AND id <> $2', [account.userId, sessionIdOf(owner.token)]],
      ],
      () => changePassword(thief.token, { current_password: account.password, new_password: NEW_PASSWORD }),
    );
    expect(res.status).toBe(401);
    expect(await signsIn(account, account.password)).toBe(200);
    expect(await signsIn(account, NEW_PASSWORD)).toBe(401);
    expect((await me(owner.token)).status).toBe(200);
    expect(await auditOf(owner.token)).toEqual([]);
  });

  it('a sign-in whose password changed after it was checked gets no session', async () => {
    // The window between the password check and the session: completeFirstFactor reads the password again, under
    // the user row's lock, and refuses when it is not the one the sign-in checked.
    const account = await signupAndVerify(h);
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: account.userId } });
    const before = await h.deps.prisma.session.count({ where: { userId: user.id } });
    await expect(completeFirstFactor(h.deps, user, undefined, { method: 'password' }, { passwordHash: '$2b$04$stale.hash.of.an.older.password' })).rejects.toMatchObject({
      status: 401,
    });
    expect(await h.deps.prisma.session.count({ where: { userId: user.id } })).toBe(before);
    const outcome = await completeFirstFactor(h.deps, user, undefined, { method: 'password' }, { passwordHash: user.passwordHash! });
    expect(outcome.kind).toBe('session');
  });
});
