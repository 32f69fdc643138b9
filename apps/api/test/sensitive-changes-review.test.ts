// Review of sudo mode (reauthentication.ts confirmSensitiveChange) from an attacker's side: a thief holding an old
// session cookie, a lower role, another organization, the Idempotency-Key path, clock skew, the login limiter.
// The findings are first (each failed before its fix, or still fails: see the describe's note); then properties
// that sensitive-changes.test.ts does not already prove.
import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { A_WHILE_AGO, signedInAgo, keysOf as keysOfUser, mintKey as mintKeyAs } from './support/reauthentication';
import { bearer, createOrg, createUserInOrg, TEST_PASSWORD, type TestOrg, type TestUser } from './support/fixtures';
import { issueSession } from '../src/modules/auth/sessions';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const mintKey = (token: string, body?: Record<string, unknown>, headers?: Record<string, string>) => mintKeyAs(h, token, body, headers);
const keysOf = (user: TestUser) => keysOfUser(h, user.id);

/** Forgets the login limiter's counts (its window is a real minute in Redis), as a minute passing would. */
async function loginLimitPasses(): Promise<void> {
  const keys = await h.deps.redis.keys(`${h.config.redisPrefix}:rl:login*`);
  await Promise.all(keys.map((key) => h.deps.redis.del(key)));
}

/** Wrong passwords from the user's old session until the login limiter answers 429; returns the 429. */
async function guessUntilLimited(user: TestUser, headers: Record<string, string> = {}): Promise<request.Response> {
  for (let i = 0; i < 50; i += 1) {
    const res = await mintKey(user.token, { current_password: `wrong guess ${i}` }, headers);
    if (res.status === 429) return res;
    expect(res.status).toBe(400);
  }
  throw new Error('the login limiter never answered 429');
}

describe('finding: a 429 of the password check under an Idempotency-Key', () => {
  // The login limiter's 429 is thrown inside the handler, after the key was taken; it was stored as the key's answer
  // (any status < 500 is) and replayed for 24 h, to the retry with the right password too: the owner who mistyped
  // could not mint with that key once the limit had passed. docs/api.md: "a request refused by ... rate limit never
  // takes the key".
  it('is not stored: once the limit has passed, the same request with the right password and the same key mints', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const key = { 'Idempotency-Key': `sudo-429-${uniqueSuffix()}` };
    const limited = await guessUntilLimited(org.admin, key);
    expect(limited.headers['retry-after']).toEqual(expect.any(String));

    await loginLimitPasses();
    const minted = await mintKey(org.admin.token, { current_password: TEST_PASSWORD }, key);
    expect([minted.status, minted.headers['idempotent-replayed']]).toEqual([201, undefined]);
    expect(minted.body.key).toEqual(expect.any(String));
    expect(await keysOf(org.admin)).toBe(1);
  });
});

describe('finding: a session whose sign-in time is ahead of the app clock', () => {
  // now - created_at was negative, so "within the window": a session written by an instance whose clock ran ahead
  // (or before the clock was set back) counted as just signed in for as long as the skew, however old it really was.
  it('is asked for the password when its sign-in is more than a minute in the future', async () => {
    const org = await createOrg(h);
    for (const ahead of [60 * 60_000, 365 * 24 * 60 * 60_000]) {
      await signedInAgo(h, org.manager.token, -ahead);
      const res = await mintKey(org.manager.token);
      expect([res.status, res.body.code]).toEqual([403, 'REAUTHENTICATION_REQUIRED']);
    }
    expect(await keysOf(org.manager)).toBe(0);
    expect((await mintKey(org.manager.token, { current_password: TEST_PASSWORD })).status).toBe(201);
  });

  it('still counts as recent within a few seconds of skew between instances', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.manager.token, -5_000);
    expect((await mintKey(org.manager.token)).status).toBe(201);
  });
});

describe('open finding (not fixed here): the stored answer of a key minted from a fresh session', () => {
  // Idempotency keys belong to the user, every session of it (docs/api.md, "a dashboard retry from another tab"), and
  // a replay runs no handler, so no sudo check: an old (stolen) session that sends the same request with the same
  // Idempotency-Key within 24 h gets the minted key's value back, with no password. The thief needs the key text and
  // the body (a script's logs, a proxy's). Fixing it is a design choice (check sudo on the replay of a sensitive route,
  // or scope keys of sensitive routes to the session): this test fails until then.
  it('is not replayed to an old session of the same user without the password', async () => {
    const org = await createOrg(h);
    const fresh = await issueSession(h.deps, org.admin.id, org.id);
    const key = { 'Idempotency-Key': `sudo-replay-${uniqueSuffix()}` };
    const minted = await mintKey(fresh.token, {}, key);
    expect(minted.status).toBe(201);

    await signedInAgo(h, org.admin.token, A_WHILE_AGO); // the thief's cookie, another session of the same user
    const stolen = await mintKey(org.admin.token, {}, key);
    expect(stolen.body.key).toBeUndefined();
    expect([stolen.status, stolen.body.code]).toEqual([403, 'REAUTHENTICATION_REQUIRED']);
  });
});

describe('properties (hold on current code)', () => {
  let org: TestOrg;
  beforeEach(async () => {
    org = await createOrg(h);
  });

  it('a lower role is refused by its scope first, with or without the password: no password check, nothing counted', async () => {
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    for (const body of [{}, { current_password: 'a wrong one' }, { current_password: TEST_PASSWORD }]) {
      const transfer = await request(h.app).post('/api/v1/organization/transfer-ownership').set(bearer(org.admin.token)).send({ user_id: org.manager.id, ...body });
      const del = await request(h.app).delete('/api/v1/organization').set(bearer(org.admin.token)).send({ confirm: org.name, ...body });
      for (const res of [transfer, del]) {
        expect(res.status).toBe(403);
        expect(res.body.code).toBeUndefined();
      }
    }
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.login_failed', actorId: org.admin.id } })).toBe(0);
    const roles = await h.deps.prisma.membership.findMany({ where: { organizationId: org.id }, select: { userId: true, role: true } });
    expect(roles.find((m) => m.userId === org.owner.id)?.role).toBe('owner');
  });

  it('an owner with the password cannot hand another organization\'s member its ownership, nor touch the other organization', async () => {
    const other = await createOrg(h);
    await signedInAgo(h, org.owner.token, A_WHILE_AGO);
    const res = await request(h.app)
      .post('/api/v1/organization/transfer-ownership')
      .set(bearer(org.owner.token))
      .send({ user_id: other.admin.id, current_password: TEST_PASSWORD });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    const owners = await h.deps.prisma.membership.findMany({ where: { role: 'owner', organizationId: { in: [org.id, other.id] } } });
    expect(owners.map((m) => m.userId).sort()).toEqual([org.owner.id, other.owner.id].sort());
    expect(await h.deps.prisma.membership.count({ where: { organizationId: org.id, userId: other.admin.id } })).toBe(0);
  });

  it("wrong passwords sent to sudo mode count per session, apart from the login form's: neither blocks the other, a cookie thief gets one count more, no faster", async () => {
    await signedInAgo(h, org.manager.token, A_WHILE_AGO);
    await guessUntilLimited(org.manager);
    // The session's count is spent: the right password from it is refused too, and no key is minted.
    expect((await mintKey(org.manager.token, { current_password: TEST_PASSWORD })).status).toBe(429);
    expect(await keysOf(org.manager)).toBe(0);
    // The owner of the account is not held back at the login form by what was guessed in a session.
    const login = await request(h.app).post('/api/v1/auth/login').send({ email: org.manager.email, password: TEST_PASSWORD });
    expect(login.status).toBe(200);
    await loginLimitPasses();
    // And the reverse: a flood of guesses at the login form leaves sudo mode its own budget.
    let limited = false;
    for (let i = 0; i < 50 && !limited; i += 1) {
      const res = await request(h.app).post('/api/v1/auth/login').send({ email: org.manager.email, password: `login guess ${i}` });
      limited = res.status === 429;
      if (!limited) expect(res.status).toBe(401);
    }
    expect(limited).toBe(true);
    expect((await mintKey(org.manager.token, { current_password: TEST_PASSWORD })).status).toBe(201);
    expect(await keysOf(org.manager)).toBe(1);
    await loginLimitPasses();
  });

  it('a missing password from an old session is refused without spending the login budget or auditing a failure', async () => {
    await signedInAgo(h, org.manager.token, A_WHILE_AGO);
    for (let i = 0; i < 15; i += 1) expect((await mintKey(org.manager.token)).status).toBe(403);
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'auth.login_failed', actorId: org.manager.id } })).toBe(0);
    expect((await mintKey(org.manager.token, { current_password: TEST_PASSWORD })).status).toBe(201);
  });

  it('a failed check is audited in each of the user\'s organizations, with its address and user agent, never the password', async () => {
    const second = await createOrg(h);
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: second.id, userId: org.owner.id, role: 'member' } });
    await signedInAgo(h, org.owner.token, A_WHILE_AGO);
    const guess = 'Tr0ub4dor&3 guess';
    const res = await request(h.app)
      .delete('/api/v1/organization')
      .set({ ...bearer(org.owner.token), 'User-Agent': 'thief-agent/1.0' })
      .send({ confirm: org.name, current_password: guess });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).not.toContain(guess);
    const entries = await h.deps.prisma.auditEvent.findMany({ where: { action: 'auth.login_failed', actorId: org.owner.id } });
    expect(entries.map((e) => e.organizationId).sort()).toEqual([org.id, second.id].sort());
    for (const entry of entries) {
      expect(entry).toMatchObject({ userAgent: 'thief-agent/1.0', metadata: { reason: 'invalid_current_password', operation: 'organization_delete' } });
      expect(entry.ip).toEqual(expect.any(String));
      expect(JSON.stringify(entry)).not.toContain(guess);
    }
    expect(await h.deps.prisma.organization.count({ where: { id: org.id } })).toBe(1);
  });

  it('a password check the thief passes from an old session does not make the session recent for the next change', async () => {
    await signedInAgo(h, org.owner.token, A_WHILE_AGO);
    expect((await mintKey(org.owner.token, { current_password: TEST_PASSWORD })).status).toBe(201);
    const res = await request(h.app).post('/api/v1/organization/transfer-ownership').set(bearer(org.owner.token)).send({ user_id: org.admin.id });
    expect([res.status, res.body.code]).toEqual([403, 'REAUTHENTICATION_REQUIRED']);
  });

  it('a refusal under an Idempotency-Key followed by a different request with the same key runs that request, once', async () => {
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const key = { 'Idempotency-Key': `sudo-body-${uniqueSuffix()}` };
    expect((await mintKey(org.admin.token, {}, key)).status).toBe(403);
    // The key was released, not bound to the refused body: another body takes it (like a request refused by
    // validation), and from then on the key is that request's.
    const other = await mintKey(org.admin.token, { name: 'other', current_password: TEST_PASSWORD }, key);
    expect(other.status).toBe(201);
    expect((await mintKey(org.admin.token, { current_password: TEST_PASSWORD }, key)).status).toBe(422);
    expect(await keysOf(org.admin)).toBe(1);
  });

  it('concurrent requests with one Idempotency-Key, one without the password and one with it, mint at most one key', async () => {
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const key = { 'Idempotency-Key': `sudo-race-${uniqueSuffix()}` };
    const results = await Promise.all([
      mintKey(org.admin.token, {}, key),
      mintKey(org.admin.token, { current_password: TEST_PASSWORD }, key),
      mintKey(org.admin.token, { current_password: TEST_PASSWORD }, key),
    ]);
    for (const res of results) expect([201, 403, 409]).toContain(res.status);
    expect(await keysOf(org.admin)).toBeLessThanOrEqual(1);
    const minted = results.filter((r) => r.status === 201).map((r) => r.body.id);
    expect(new Set(minted).size).toBeLessThanOrEqual(1);
  });
});
