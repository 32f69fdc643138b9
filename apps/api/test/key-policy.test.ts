// The API-key lifecycle policy (SPEC: API key): who reads and changes it, its validation, and the creation rules
// (require an expiration, cap the lifetime, fill in the expiration) with 422 details naming the broken rule. The
// scheduled half (expiry warnings, inactivity revocation) is tested in apps/worker/test/key-lifecycle.test.ts.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import { whileRowsHeld } from './support/row-locks';

const DAY = 24 * 3600 * 1000;
const POLICY = '/api/v1/organization/api-key-policy';

let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

const putPolicy = (token: string, body: Record<string, unknown>) => request(h.app).put(POLICY).set(bearer(token)).send(body);
const createKey = (token: string, body: Record<string, unknown> = {}) =>
  request(h.app).post('/api/v1/api-keys').set(bearer(token)).send({ name: 'ci', scopes: ['projects:read'], ...body });

async function setPolicy(body: Record<string, unknown>) {
  const res = await putPolicy(org.owner.token, body);
  expect(res.status).toBe(200);
  return res.body;
}

const inDays = (days: number) => new Date(h.clock.now().getTime() + days * DAY);

// Every test starts from the defaults.
beforeEach(() => setPolicy({ enabled: false, require_expiration: false, max_lifetime_days: 90, warn_days_before: 7, inactivity_days: 90 }));

describe('reading and changing the policy', () => {
  it('is off by default, with 90 days lifetime, a warning 7 days before and 90 days inactivity once on', async () => {
    const res = await request(h.app).get(POLICY).set(bearer(other.member.token));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      enabled: false,
      require_expiration: false,
      max_lifetime_days: 90,
      warn_days_before: 7,
      inactivity_days: 90,
    });
  });

  it('needs org:read to read and org:update to change (a manager reads, cannot change)', async () => {
    expect((await request(h.app).get(POLICY).set(bearer(org.manager.token))).status).toBe(200);
    for (const user of [org.manager, org.member]) {
      const res = await putPolicy(user.token, { enabled: true });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('org:update');
    }
    expect((await request(h.app).get(POLICY)).status).toBe(401);
  });

  it('turns on with the defaults, keeps left-out fields, and null switches a rule off', async () => {
    const o = await createOrg(h);
    const on = await putPolicy(o.admin.token, { enabled: true });
    expect(on.status).toBe(200);
    expect(on.body).toEqual({ enabled: true, require_expiration: false, max_lifetime_days: 90, warn_days_before: 7, inactivity_days: 90 });

    const changed = await putPolicy(o.owner.token, { enabled: true, require_expiration: true, max_lifetime_days: null, inactivity_days: 30 });
    expect(changed.body).toEqual({ enabled: true, require_expiration: true, max_lifetime_days: null, warn_days_before: 7, inactivity_days: 30 });
    expect((await request(h.app).get(POLICY).set(bearer(o.member.token))).body).toEqual(changed.body);

    const row = await h.deps.prisma.organization.findUniqueOrThrow({ where: { id: o.id } });
    expect(row).toMatchObject({ keyPolicyEnabled: true, keyPolicyRequireExpiry: true, keyPolicyMaxLifetimeDays: null, keyPolicyInactivityDays: 30 });
    // Another organization's policy is untouched.
    expect((await request(h.app).get(POLICY).set(bearer(other.owner.token))).body.enabled).toBe(false);
  });

  it.each([
    ['enabled missing', { max_lifetime_days: 30 }],
    ['enabled not a boolean', { enabled: 'yes' }],
    ['max_lifetime_days 0', { enabled: true, max_lifetime_days: 0 }],
    ['max_lifetime_days over 3650', { enabled: true, max_lifetime_days: 3651 }],
    ['max_lifetime_days fractional', { enabled: true, max_lifetime_days: 1.5 }],
    ['warn_days_before 0', { enabled: true, warn_days_before: 0 }],
    ['warn_days_before over 365', { enabled: true, warn_days_before: 366 }],
    ['inactivity_days negative', { enabled: true, inactivity_days: -1 }],
    ['an unknown field', { enabled: true, rotate_every_days: 30 }],
  ])('refuses %s with 400', async (_label, body) => {
    const res = await putPolicy(org.owner.token, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.any(String) });
  });

  it('refuses a warning window as long as the lifetime with 422 naming both rules', async () => {
    const res = await putPolicy(org.owner.token, { enabled: true, max_lifetime_days: 7, warn_days_before: 7 });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/warn_days_before.*max_lifetime_days/);
  });

  it('an owner and an admin changing different fields at once: both answer 200 and the stored policy has both changes', async () => {
    const o = await createOrg(h);
    // Both changes wait for the organization's row, held here: each has begun before either commits.
    const [first, second] = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM organizations WHERE id = ${o.id} FOR NO KEY UPDATE`,
      () => Promise.all([
        putPolicy(o.owner.token, { enabled: true, inactivity_days: 30 }).then((r) => r),
        putPolicy(o.admin.token, { enabled: true, max_lifetime_days: 60 }).then((r) => r),
      ]),
      2,
    );
    expect([first.status, second.status]).toEqual([200, 200]);
    const stored = await request(h.app).get(POLICY).set(bearer(o.member.token));
    expect(stored.body).toEqual({ enabled: true, require_expiration: false, max_lifetime_days: 60, warn_days_before: 7, inactivity_days: 30 });
  });
});

describe('key creation under the policy', () => {
  it('policy off: no expiration required and none filled in, any lifetime accepted', async () => {
    await setPolicy({ enabled: false, require_expiration: true, max_lifetime_days: 30 });
    const none = await createKey(org.manager.token);
    expect(none.status).toBe(201);
    expect(none.body.expires_at).toBeNull();
    const far = await createKey(org.manager.token, { expires_at: inDays(1000).toISOString() });
    expect(far.status).toBe(201);
  });

  it('max_lifetime_days: no expires_at -> filled in as now + the maximum lifetime', async () => {
    await setPolicy({ enabled: true, max_lifetime_days: 30 });
    const before = inDays(30).getTime();
    const res = await createKey(org.manager.token);
    const after = inDays(30).getTime();
    expect(res.status).toBe(201);
    const expiresAt = new Date(res.body.expires_at).getTime();
    expect(expiresAt).toBeGreaterThanOrEqual(before - 1000);
    expect(expiresAt).toBeLessThanOrEqual(after + 1000);
    const row = await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.expiresAt?.toISOString()).toBe(res.body.expires_at);
  });

  it('max_lifetime_days follows the clock when filling in', async () => {
    await setPolicy({ enabled: true, max_lifetime_days: 10 });
    h.clock.advance(DAY); // sessions live 48 hours; one signed in a day ago confirms with the password
    const res = await createKey(org.manager.token, { current_password: TEST_PASSWORD });
    expect(Math.abs(new Date(res.body.expires_at).getTime() - inDays(10).getTime())).toBeLessThan(5000);
  });

  it('max_lifetime_days: an expires_at beyond it -> 422 naming the rule and the latest allowed time; within it -> kept', async () => {
    await setPolicy({ enabled: true, max_lifetime_days: 30 });
    const tooFar = await createKey(org.manager.token, { expires_at: inDays(31).toISOString() });
    expect(tooFar.status).toBe(422);
    expect(tooFar.body).toEqual({ detail: expect.stringContaining('max_lifetime_days') });
    expect(tooFar.body.detail).toContain('30 days');

    const within = inDays(29);
    const ok = await createKey(org.manager.token, { expires_at: within.toISOString() });
    expect(ok.status).toBe(201);
    expect(ok.body.expires_at).toBe(within.toISOString());
  });

  it('require_expiration without a maximum lifetime: no expires_at -> 422 naming the rule; any future one is accepted', async () => {
    await setPolicy({ enabled: true, require_expiration: true, max_lifetime_days: null });
    const before = await h.deps.prisma.apiKey.count({ where: { organizationId: org.id } });
    const res = await createKey(org.admin.token);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: expect.stringContaining('require_expiration') });
    expect(await h.deps.prisma.apiKey.count({ where: { organizationId: org.id } })).toBe(before);

    const far = await createKey(org.admin.token, { expires_at: inDays(2000).toISOString() });
    expect(far.status).toBe(201);
  });

  it('require_expiration with a maximum lifetime: the expiration is filled in rather than refused', async () => {
    await setPolicy({ enabled: true, require_expiration: true, max_lifetime_days: 14 });
    const res = await createKey(org.manager.token);
    expect(res.status).toBe(201);
    expect(Math.abs(new Date(res.body.expires_at).getTime() - inDays(14).getTime())).toBeLessThan(5000);
  });

  it('neither rule: a key without expiration is still allowed', async () => {
    await setPolicy({ enabled: true, require_expiration: false, max_lifetime_days: null });
    const res = await createKey(org.manager.token);
    expect(res.status).toBe(201);
    expect(res.body.expires_at).toBeNull();
  });

  it('an expires_at in the past is refused whatever the policy', async () => {
    await setPolicy({ enabled: true, max_lifetime_days: 30 });
    const res = await createKey(org.manager.token, { expires_at: new Date(h.clock.now().getTime() - 1000).toISOString() });
    expect(res.status).toBe(422);
  });

  it('require_expiration without a maximum: a key minted by an expiring key without expires_at takes that key\'s expiration (docs/api.md)', async () => {
    const parentExpiry = inDays(3);
    const minting = await createKey(org.admin.token, { scopes: ['api_keys:create', 'projects:read'], expires_at: parentExpiry.toISOString() });
    expect(minting.status).toBe(201);
    await setPolicy({ enabled: true, require_expiration: true, max_lifetime_days: null });
    const child = await createKey(minting.body.key, { name: 'child of an expiring key' });
    expect(child.status).toBe(201);
    expect(child.body.expires_at).toBe(parentExpiry.toISOString());
  });

  it('applies to keys created by keys too, and only in its own organization', async () => {
    const minting = await createKey(org.admin.token, { scopes: ['api_keys:create', 'projects:read'] });
    expect(minting.status).toBe(201);
    await setPolicy({ enabled: true, require_expiration: true, max_lifetime_days: null });
    const byKey = await createKey(minting.body.key);
    expect(byKey.status).toBe(422);
    expect(byKey.body.detail).toContain('require_expiration');

    const elsewhere = await createKey(other.manager.token);
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.expires_at).toBeNull();
  });
});

describe('last use', () => {
  it('is recorded when a key authenticates, refreshed at most every 5 minutes', async () => {
    const key = await createKey(org.manager.token, { scopes: ['profile:read'] });
    expect(key.status).toBe(201);
    expect(key.body.last_used_at).toBeNull();
    const lastUsed = async () => (await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.body.id } })).lastUsedAt;
    const waitFor = async (check: (d: Date | null) => boolean) => {
      for (let i = 0; i < 100; i++) {
        const value = await lastUsed();
        if (check(value)) return value;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('last_used_at did not change');
    };

    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(key.body.key))).status).toBe(200);
    const first = (await waitFor((d) => d !== null))!;
    h.clock.advance(60_000);
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(key.body.key))).status).toBe(200);
    await new Promise((r) => setTimeout(r, 150));
    expect((await lastUsed())?.getTime()).toBe(first.getTime());

    h.clock.advance(5 * 60_000);
    expect((await request(h.app).get('/api/v1/auth/me').set(bearer(key.body.key))).status).toBe(200);
    const second = (await waitFor((d) => d !== null && d.getTime() > first.getTime()))!;
    expect(second.getTime() - first.getTime()).toBeGreaterThanOrEqual(6 * 60_000 - 1000);
  });
});
