// Sudo mode (reauthentication.ts confirmSensitiveChange): minting an API key, inviting someone, raising a member's
// role, deleting the organization, handing its ownership over, and a webhook's destination or signing secret. A session signed in within the window makes them as it is; an older one (a cookie left behind,
// or stolen) confirms with the current password, else 403 REAUTHENTICATION_REQUIRED and nothing changes. API keys
// are not asked. Under an Idempotency-Key, the refusal is not stored and the password is not hashed into the row.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { A_WHILE_AGO, expectAskedForPassword, failedPasswordChecks, keysOf as keysOfUser, mintKey as mintKeyAs, signedInAgo } from './support/reauthentication';
import { bearer, createOrg, createUserInOrg, TEST_PASSWORD, type TestOrg, type TestUser } from './support/fixtures';
import { createKey, PUBLIC_URL, subscribe } from './support/domain';
import { RECENT_SIGN_IN_WINDOW_MS } from '../src/modules/auth/reauthentication';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const mintKey = (token: string, body?: Record<string, unknown>, headers?: Record<string, string>) => mintKeyAs(h, token, body, headers);
const keysOf = (user: TestUser) => keysOfUser(h, user.id);
const failedChecks = (user: TestUser, operation: string) => failedPasswordChecks(h, user.id, operation);

describe('minting an API key', () => {
  let org: TestOrg;
  beforeEach(async () => {
    org = await createOrg(h);
  });

  it('a session signed in within the window mints without a password', async () => {
    await signedInAgo(h, org.manager.token, RECENT_SIGN_IN_WINDOW_MS - 60_000);
    const res = await mintKey(org.manager.token);
    expect(res.status).toBe(201);
    expect(res.body.key).toEqual(expect.any(String));
  });

  it('an older session is asked for the password (403, no key); a wrong one is 400 and audited without it; the right one mints', async () => {
    await signedInAgo(h, org.manager.token, A_WHILE_AGO);
    expectAskedForPassword(await mintKey(org.manager.token));
    expect(await keysOf(org.manager)).toBe(0);

    const wrong = await mintKey(org.manager.token, { current_password: 'not the password at all' });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: 'The current password is not correct.', code: 'INVALID_CURRENT_PASSWORD' });
    expect(await keysOf(org.manager)).toBe(0);
    const failures = await failedChecks(org.manager, 'api_key_create');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ organizationId: org.id, metadata: { reason: 'invalid_current_password', operation: 'api_key_create' } });
    expect(JSON.stringify(failures[0])).not.toContain('not the password at all');
    expect(await h.deps.prisma.auditEvent.count({ where: { action: 'api_key.created', actorId: org.manager.id } })).toBe(0);

    const right = await mintKey(org.manager.token, { current_password: TEST_PASSWORD });
    expect(right.status).toBe(201);
    expect(await keysOf(org.manager)).toBe(1);
    // The key it minted works, and the password went nowhere near the audit entry.
    expect((await request(h.app).get('/api/v1/projects').set(bearer(right.body.key))).status).toBe(200);
    const created = await h.deps.prisma.auditEvent.findFirstOrThrow({ where: { action: 'api_key.created', actorId: org.manager.id } });
    expect(JSON.stringify(created)).not.toContain(TEST_PASSWORD);
  });

  it('the clock moving on past the window has the same effect as an old sign-in', async () => {
    h.clock.advance(A_WHILE_AGO);
    try {
      expectAskedForPassword(await mintKey(org.admin.token));
      expect((await mintKey(org.admin.token, { current_password: TEST_PASSWORD })).status).toBe(201);
    } finally {
      h.clock.reset();
    }
  });

  it('an API key that may mint keys is not asked (it has no password, and was minted for this)', async () => {
    const minter = await createKey(h, org.admin.token, ['api_keys:create', 'projects:read']);
    h.clock.advance(A_WHILE_AGO);
    try {
      const res = await mintKey(minter);
      expect(res.status).toBe(201);
    } finally {
      h.clock.reset();
    }
  });

  it('an account without a password (GitHub or Google sign-in) is told to sign in again; a password it sends changes nothing', async () => {
    const oauthOnly = await createUserInOrg(h, org.id, 'manager', 'oauth');
    await h.deps.prisma.user.update({ where: { id: oauthOnly.id }, data: { passwordHash: null } });
    await signedInAgo(h, oauthOnly.token, A_WHILE_AGO);
    for (const body of [{}, { current_password: TEST_PASSWORD }]) {
      const res = await mintKey(oauthOnly.token, body);
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ detail: expect.stringContaining('Sign in again'), code: 'REAUTHENTICATION_REQUIRED' });
    }
    expect(await keysOf(oauthOnly)).toBe(0);
    await signedInAgo(h, oauthOnly.token, 0);
    expect((await mintKey(oauthOnly.token)).status).toBe(201);
  });

  it('a request that fails for another reason answers that first (no password asked for a key it could not mint)', async () => {
    await signedInAgo(h, org.member.token, A_WHILE_AGO);
    const res = await mintKey(org.member.token, { scopes: ['webhooks:write'] });
    expect(res.status).toBe(403);
    expect(res.body.code).toBeUndefined();
  });

  it('a key the organization\'s key policy refuses is refused first, without asking for the password', async () => {
    await request(h.app)
      .put('/api/v1/organization/api-key-policy')
      .set(bearer(org.owner.token))
      .send({ enabled: true, require_expiration: true, max_lifetime_days: null });
    await signedInAgo(h, org.manager.token, A_WHILE_AGO);
    const res = await mintKey(org.manager.token);
    expect(res.status).toBe(422);
    expect(res.body.detail).toContain('require_expiration');
    expect(await failedChecks(org.manager, 'api_key_create')).toHaveLength(0);
  });

  it('wrong passwords count with the e-mail\'s sign-ins: a guesser with the old cookie is stopped at the login\'s pace', async () => {
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const statuses: number[] = [];
    for (let i = 0; i < 12; i += 1) statuses.push((await mintKey(org.admin.token, { current_password: `guess number ${i}` })).status);
    expect(statuses).toContain(429);
    expect(statuses.indexOf(429)).toBeGreaterThan(0);
    expect(statuses.slice(statuses.indexOf(429)).every((s) => s === 429)).toBe(true);
    expect(await keysOf(org.admin)).toBe(0);
  });
});

describe('under an Idempotency-Key', () => {
  let org: TestOrg;
  beforeAll(async () => {
    org = await createOrg(h);
  });

  it('the refusal is not stored: the same request sent again with the password (same key) mints, and its replay needs no password', async () => {
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const key = { 'Idempotency-Key': `sudo-${Date.now()}` };
    expectAskedForPassword(await mintKey(org.admin.token, {}, key));
    const wrong = await mintKey(org.admin.token, { current_password: 'a wrong password here' }, key);
    expect(wrong.status).toBe(400);
    expect(wrong.headers['idempotent-replayed']).toBeUndefined();

    const minted = await mintKey(org.admin.token, { current_password: TEST_PASSWORD }, key);
    expect(minted.status).toBe(201);
    expect(minted.headers['idempotent-replayed']).toBeUndefined();
    // The password is not part of the request as the key remembers it: with it or without it, the same answer.
    for (const body of [{ current_password: TEST_PASSWORD }, {}]) {
      const replay = await mintKey(org.admin.token, body, key);
      expect([replay.status, replay.headers['idempotent-replayed'], replay.body.id]).toEqual([201, 'true', minted.body.id]);
    }
    expect(await keysOf(org.admin)).toBe(1);
  });
});

describe('deleting the organization', () => {
  it('an older session is asked for the password (403, the organization stays); with it, the organization is deleted', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.owner.token, A_WHILE_AGO);
    const del = (body: Record<string, unknown>) => request(h.app).delete('/api/v1/organization').set(bearer(org.owner.token)).send(body);
    expectAskedForPassword(await del({ confirm: org.name }));
    expect((await del({ confirm: org.name, current_password: 'definitely wrong' })).status).toBe(400);
    expect(await h.deps.prisma.organization.count({ where: { id: org.id } })).toBe(1);
    expect(await failedChecks(org.owner, 'organization_delete')).toHaveLength(1);
    // The name is checked first: a wrong one says so, whatever the session's age.
    expect((await del({ confirm: 'not its name' })).body.detail).toMatch(/exact name/);

    const done = await del({ confirm: org.name, current_password: TEST_PASSWORD });
    expect(done.status).toBe(204);
    expect(await h.deps.prisma.organization.count({ where: { id: org.id } })).toBe(0);
  });

  it('a session signed in within the window deletes with the name alone', async () => {
    const org = await createOrg(h);
    const done = await request(h.app).delete('/api/v1/organization').set(bearer(org.owner.token)).send({ confirm: org.name });
    expect(done.status).toBe(204);
  });
});

describe('transferring ownership', () => {
  it('an older session is asked for the password (403, the owner stays); with it, ownership moves', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.owner.token, A_WHILE_AGO);
    const transfer = (body: Record<string, unknown>) =>
      request(h.app).post('/api/v1/organization/transfer-ownership').set(bearer(org.owner.token)).send({ user_id: org.admin.id, ...body });
    expectAskedForPassword(await transfer({}));
    expect((await transfer({ current_password: 'definitely wrong' })).status).toBe(400);
    const roleOf = async (user: TestUser) =>
      (await h.deps.prisma.membership.findFirstOrThrow({ where: { organizationId: org.id, userId: user.id } })).role;
    expect([await roleOf(org.owner), await roleOf(org.admin)]).toEqual(['owner', 'admin']);
    expect(await failedChecks(org.owner, 'ownership_transfer')).toHaveLength(1);
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'organization.ownership_transferred' } })).toBe(0);

    // Someone who is not a member is refused first, without asking for the password.
    const stranger = await request(h.app)
      .post('/api/v1/organization/transfer-ownership')
      .set(bearer(org.owner.token))
      .send({ user_id: 'usr_not_a_member' });
    expect([stranger.status, stranger.body.code]).toEqual([404, undefined]);

    const done = await transfer({ current_password: TEST_PASSWORD });
    expect(done.status).toBe(200);
    expect([await roleOf(org.owner), await roleOf(org.admin)]).toEqual(['admin', 'owner']);
  });
});

describe('inviting someone', () => {
  it('an older session is asked for the password (403, no invitation, no mail); with it, the invitation is made', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const email = `invitee-${Date.now()}@example.test`;
    const invite = (body: Record<string, unknown>) =>
      request(h.app).post('/api/v1/invitations').set(bearer(org.admin.token)).send({ email, role: 'admin', ...body });
    expectAskedForPassword(await invite({}));
    expect((await invite({ current_password: 'definitely wrong' })).status).toBe(400);
    expect(await h.deps.prisma.invitation.count({ where: { organizationId: org.id } })).toBe(0);
    expect(h.mail().filter((m: { to?: string }) => m.to === email)).toHaveLength(0);
    expect(await failedChecks(org.admin, 'invitation_create')).toHaveLength(1);
    // A request that fails anyway says so first: a role above one's own is refused without asking.
    const above = await request(h.app).post('/api/v1/invitations').set(bearer(org.manager.token)).send({ email, role: 'admin' });
    expect(above.status).toBe(403);
    expect(above.body.code).toBeUndefined();

    expect((await invite({ current_password: TEST_PASSWORD })).status).toBe(201);
    expect(await h.deps.prisma.invitation.count({ where: { organizationId: org.id } })).toBe(1);
  });

  it('a session signed in within the window, and an API key, invite without a password', async () => {
    const org = await createOrg(h);
    const res = await request(h.app).post('/api/v1/invitations').set(bearer(org.admin.token)).send({ email: `a-${Date.now()}@example.test`, role: 'member' });
    expect(res.status).toBe(201);
    const key = await createKey(h, org.admin.token, ['members:invite']);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const byKey = await request(h.app).post('/api/v1/invitations').set(bearer(key)).send({ email: `b-${Date.now()}@example.test`, role: 'member' });
    expect(byKey.status).toBe(201);
  });
});

describe('changing a role', () => {
  it('raising one from an older session needs the password; lowering one never does', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.owner.token, A_WHILE_AGO);
    const change = (user: TestUser, body: Record<string, unknown>) =>
      request(h.app).patch(`/api/v1/members/${user.id}`).set(bearer(org.owner.token)).send(body);
    const roleOf = async (user: TestUser) =>
      (await h.deps.prisma.membership.findFirstOrThrow({ where: { organizationId: org.id, userId: user.id } })).role;

    expectAskedForPassword(await change(org.member, { role: 'admin' }));
    expect(await roleOf(org.member)).toBe('member');
    expect((await change(org.member, { role: 'admin', current_password: 'definitely wrong' })).status).toBe(400);
    expect(await failedChecks(org.owner, 'role_raise')).toHaveLength(1);
    expect((await change(org.member, { role: 'admin', current_password: TEST_PASSWORD })).status).toBe(200);
    expect(await roleOf(org.member)).toBe('admin');

    // Taking access away is not held up by a password prompt.
    expect((await change(org.admin, { role: 'member' })).status).toBe(200);
    expect(await roleOf(org.admin)).toBe('member');
    // The same role again is no raise either.
    expect((await change(org.manager, { role: 'manager' })).status).toBe(200);
  });
});

describe('webhooks: where signed events go, and the secret they are signed with', () => {
  const SUBS = '/api/v1/webhooks/subscriptions';

  it('creating a subscription from an older session asks for the password; with it, the subscription and its secret', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const create = (body: Record<string, unknown>) =>
      request(h.app).post(SUBS).set(bearer(org.admin.token)).send({ name: 'siem', url: PUBLIC_URL, events: ['finding.created'], ...body });
    expectAskedForPassword(await create({}));
    expect((await create({ current_password: 'definitely wrong' })).status).toBe(400);
    expect(await h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id } })).toBe(0);
    expect(await failedChecks(org.admin, 'webhook_create')).toHaveLength(1);
    const made = await create({ current_password: TEST_PASSWORD });
    expect(made.status).toBe(201);
    expect(made.body.secret).toMatch(/^whsec_/);
    // The password is neither stored nor audited with the subscription.
    const entry = await h.deps.prisma.auditEvent.findFirstOrThrow({ where: { organizationId: org.id, action: 'webhook.subscription_created' } });
    expect(JSON.stringify(entry)).not.toContain('current_password');
    expect(JSON.stringify(entry)).not.toContain(TEST_PASSWORD);
  });

  it('a new URL asks for the password; a new name, events or the same URL do not', async () => {
    const org = await createOrg(h);
    const id = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const patch = (body: Record<string, unknown>) => request(h.app).patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send(body);
    expect((await patch({ name: 'renamed', events: ['finding.created', 'finding.status_changed'] })).status).toBe(200);
    expect((await patch({ url: PUBLIC_URL })).status).toBe(200);
    const elsewhere = 'https://203.0.114.10/elsewhere'; // another path: another destination all the same
    expectAskedForPassword(await patch({ url: elsewhere }));
    expect((await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).url).toBe(PUBLIC_URL);
    expect(await failedChecks(org.admin, 'webhook_url_change')).toHaveLength(0);
    expect((await patch({ url: elsewhere, current_password: TEST_PASSWORD })).status).toBe(200);
    expect((await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).url).toBe(elsewhere);
    // The password alone is no change.
    expect((await patch({ current_password: TEST_PASSWORD })).status).toBe(400);
  });

  it('rotating the secret from an older session asks for the password; an API key is not asked', async () => {
    const org = await createOrg(h);
    const id = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);
    const key = await createKey(h, org.admin.token, ['webhooks:update']);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const before = (await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).secretEnc;
    const rotate = (token: string, body?: Record<string, unknown>) => {
      const req = request(h.app).post(`${SUBS}/${id}/rotate-secret`).set(bearer(token));
      return body === undefined ? req : req.send(body);
    };
    expectAskedForPassword(await rotate(org.admin.token));
    expect((await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).secretEnc).toBe(before);
    const rotated = await rotate(org.admin.token, { current_password: TEST_PASSWORD });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect((await rotate(key)).status).toBe(200);
  });
});
