// The in-process API-key principal cache (API_KEY_CACHE_TTL_SECONDS) and its invalidation through Redis auth
// epochs: with the cache warm, taking access away through the API refuses the key on the very next request, on
// this API instance and on another one (a second createApp over the same PostgreSQL and Redis, its own cache).
import request from 'supertest';
import { createApp, type App } from '../src/app';
import { invalidateCachedPrincipals } from '../src/auth/auth-epochs';
import { newId } from '@svc/db';
import { displayPrefix, generateApiKeyValue, hashApiKey } from '../src/auth/api-key-material';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertAssessment, insertGrant, insertProject, type TestOrg, type TestUser } from './support/fixtures';

let h: Harness;
/** A second API instance: same database, same Redis and prefix, its own principal cache. */
let other: App;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness({ API_KEY_CACHE_TTL_SECONDS: '60' });
  other = createApp(h.deps);
  org = await createOrg(h);
});
afterAll(() => h.close());

async function mintKey(token: string, scopes = ['profile:read']) {
  const res = await request(h.app).post('/api/v1/api-keys').set(bearer(token)).send({ name: 'cached', scopes });
  expect(res.status).toBe(201);
  return res.body as { id: string; key: string };
}

const me = (app: App, key: string) => request(app).get('/api/v1/auth/me').set(bearer(key));

/** Uses the key a few times on both instances, so both hold its principal. */
async function warm(key: string) {
  for (const app of [h.app, other, h.app, other]) expect((await me(app, key)).status).toBe(200);
}

describe('with a warm cache', () => {
  it('serves the key from the cache: a change written behind the service\'s back shows only after a bump', async () => {
    // This is what the cache saves (the database lookup), shown by a change that skips the service's paths.
    const user = await createUserInOrg(h, org.id, 'admin', 'direct');
    const { key } = await mintKey(user.token);
    await warm(key);
    await h.deps.prisma.membership.updateMany({ where: { organizationId: org.id, userId: user.id }, data: { role: 'member' } });
    expect((await me(h.app, key)).body.role).toBe('admin');
    expect((await me(other, key)).body.role).toBe('admin');
    await invalidateCachedPrincipals(h.deps, { organizationIds: [org.id] });
    expect((await me(h.app, key)).body.role).toBe('member');
    expect((await me(other, key)).body.role).toBe('member');
  });

  it('refuses a revoked key on the very next request, on both instances', async () => {
    const { id, key } = await mintKey(org.manager.token);
    await warm(key);
    const revoke = await request(h.app).delete(`/api/v1/api-keys/${id}`).set(bearer(org.manager.token));
    expect(revoke.status).toBe(204);
    expect((await me(other, key)).status).toBe(401);
    expect((await me(h.app, key)).status).toBe(401);
  });

  it("refuses a revoked key whose epoch read shares a batch with another organization's valid key, while reads are in flight", async () => {
    const otherOrg = await createOrg(h);
    const { id, key } = await mintKey(org.manager.token);
    const { key: kept } = await mintKey(otherOrg.manager.token);
    await warm(key);
    await warm(kept);
    // Another organization's traffic keeps the epoch reads busy: the revoked key's request arrives while one is in flight.
    let busy = true;
    const traffic = (async () => {
      const statuses: number[] = [];
      for (let i = 0; busy && i < 100; i++) statuses.push(...(await Promise.all([me(h.app, kept), me(h.app, kept)])).map((r) => r.status));
      return statuses;
    })();
    expect((await request(h.app).delete(`/api/v1/api-keys/${id}`).set(bearer(org.manager.token))).status).toBe(204);
    const [revoked, valid] = await Promise.all([me(h.app, key), me(h.app, kept)]);
    busy = false;
    expect(revoked.status).toBe(401);
    expect(valid.status).toBe(200);
    expect(new Set(await traffic)).toEqual(new Set([200]));
  });

  it('refuses a revoked key on the instance that revoked it, when the revocation came through another', async () => {
    const { id, key } = await mintKey(org.manager.token);
    await warm(key);
    expect((await request(other).delete(`/api/v1/api-keys/${id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await me(h.app, key)).status).toBe(401);
  });

  it('refuses a removed member\'s key on the next request', async () => {
    const leaver: TestUser = await createUserInOrg(h, org.id, 'manager', 'leaver');
    const { key } = await mintKey(leaver.token);
    await warm(key);
    expect((await request(h.app).delete(`/api/v1/members/${leaver.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await me(other, key)).status).toBe(401);
    expect((await me(h.app, key)).status).toBe(401);
  });

  it('applies a role downgrade at once: the key loses the scopes of the old role', async () => {
    const demoted = await createUserInOrg(h, org.id, 'admin', 'demoted');
    const { key } = await mintKey(demoted.token, ['profile:read', 'webhooks:read']);
    await warm(key);
    expect((await request(other).get('/api/v1/webhooks/subscriptions').set(bearer(key))).status).toBe(200);
    const patch = await request(h.app).patch(`/api/v1/members/${demoted.id}`).set(bearer(org.owner.token)).send({ role: 'manager' });
    expect(patch.status).toBe(200);
    const after = await me(other, key);
    expect(after.status).toBe(200);
    expect(after.body.role).toBe('manager');
    expect(after.body.scopes).toEqual(['profile:read']);
    expect((await request(other).get('/api/v1/webhooks/subscriptions').set(bearer(key))).status).toBe(403);
    expect((await me(h.app, key)).body.role).toBe('manager');
  });

  it("refuses a manager's key minted before the manager bundle followed SPEC's table: 403 for notification_targets:configure and source:upload_zip, from the cache too", async () => {
    const manager = await createUserInOrg(h, org.id, 'manager', 'old-key');
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessment(h, org.id, project.id);
    await insertGrant(h, org.id, { projectId: project.id }, { userId: manager.id }, 'write');
    // Minting such a key is refused now; the row stands for one minted under the old bundle.
    const mint = await request(h.app).post('/api/v1/api-keys').set(bearer(manager.token))
      .send({ name: 'old', scopes: ['notification_targets:configure', 'source:upload_zip'] });
    expect(mint.status).toBe(403);
    expect(mint.body.detail).toContain('notification_targets:configure');
    const key = generateApiKeyValue();
    const stored = ['profile:read', 'notification_targets:read', 'notification_targets:configure', 'notification_targets:test', 'issue_exports:configure', 'source:upload_zip'];
    await h.deps.prisma.apiKey.create({
      data: { id: newId('key'), organizationId: org.id, userId: manager.id, name: 'minted before', displayPrefix: displayPrefix(key), keyHash: hashApiKey(key, h.config.apiKeyPepper), scopes: stored },
    });
    await warm(key);
    for (const app of [h.app, other]) {
      expect((await me(app, key)).body.scopes).toEqual(['notification_targets:read', 'profile:read']);
      const target = await request(app).post('/api/v1/notification-targets').set(bearer(key))
        .send({ kind: 'email', name: 'outside', recipients: ['someone@outside.example'], events: ['finding.created'] });
      expect(target.status).toBe(403);
      expect(target.body.detail).toBe('Missing required scope: notification_targets:configure.');
      const upload = await request(app).post(`/api/v1/assessments/${assessment.id}/source`).set(bearer(key))
        .set('Content-Type', 'application/zip').send(Buffer.from('PK\u0005\u0006'.padEnd(22, '\u0000')));
      expect(upload.status).toBe(403);
      expect(upload.body.detail).toBe('Missing required scope: source:upload_zip.');
    }
    expect(await h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id } })).toBe(0);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
  });

  it('demotes the previous owner\'s key when ownership moves', async () => {
    const t = await createOrg(h);
    const { key } = await mintKey(t.owner.token, ['profile:read', 'org:delete']);
    await warm(key);
    const moved = await request(h.app).post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: t.admin.id });
    expect(moved.status).toBe(200);
    const after = await me(other, key);
    expect(after.body.role).toBe('admin');
    expect(after.body.scopes).not.toContain('org:delete');
  });

  it('refuses every key of a deleted organization', async () => {
    const t = await createOrg(h);
    const { key } = await mintKey(t.admin.token);
    await warm(key);
    const del = await request(h.app).delete('/api/v1/organization').set(bearer(t.owner.token)).send({ confirm: t.name });
    expect(del.status).toBe(204);
    expect((await me(other, key)).status).toBe(401);
  });

  it('refuses a key whose user is no longer active once the user\'s epoch moves', async () => {
    // No API route deactivates a user today; whatever does must call invalidateCachedPrincipals({ userIds }).
    const user = await createUserInOrg(h, org.id, 'manager', 'deactivated');
    const { key } = await mintKey(user.token);
    await warm(key);
    await h.deps.prisma.user.update({ where: { id: user.id }, data: { status: 'pending' } });
    await invalidateCachedPrincipals(h.deps, { userIds: [user.id] });
    expect((await me(other, key)).status).toBe(401);
    expect((await me(h.app, key)).status).toBe(401);
  });

  it('still refuses an expired key, whatever the cache holds', async () => {
    const res = await request(h.app).post('/api/v1/api-keys').set(bearer(org.manager.token))
      .send({ name: 'short', scopes: ['profile:read'], expires_at: new Date(h.clock.now().getTime() + 60_000).toISOString() });
    expect(res.status).toBe(201);
    await warm(res.body.key);
    h.clock.advance(120_000);
    try {
      expect((await me(other, res.body.key)).status).toBe(401);
      expect((await me(h.app, res.body.key)).status).toBe(401);
    } finally {
      h.clock.reset();
    }
  });
});

describe('API_KEY_CACHE_TTL_SECONDS=0', () => {
  let uncached: Harness;
  beforeAll(async () => {
    uncached = await createHarness({ API_KEY_CACHE_TTL_SECONDS: '0' });
  });
  afterAll(() => uncached.close());

  it('reads the database on every request: even a change behind the service\'s back shows at once', async () => {
    const t = await createOrg(uncached);
    const res = await request(uncached.app).post('/api/v1/api-keys').set(bearer(t.admin.token)).send({ name: 'k', scopes: ['profile:read'] });
    const key = res.body.key as string;
    for (let i = 0; i < 3; i++) expect((await me(uncached.app, key)).body.role).toBe('admin');
    await uncached.deps.prisma.membership.updateMany({ where: { organizationId: t.id, userId: t.admin.id }, data: { role: 'member' } });
    expect((await me(uncached.app, key)).body.role).toBe('member');
  });
});
