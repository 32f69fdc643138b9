import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, type TestOrg } from './support/fixtures';

let h: Harness;
let org: TestOrg;
let otherOrg: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, otherOrg] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());

async function mintKey(token: string, body: Record<string, unknown>) {
  return request(h.app).post('/api/v1/api-keys').set(bearer(token)).send(body);
}

describe('creating API keys', () => {
  it('returns the key value once, with the sk-svc- prefix, and stores the explicit scopes', async () => {
    const res = await mintKey(org.admin.token, { name: 'ci', scopes: ['projects:read', 'assessments:read'] });
    expect(res.status).toBe(201);
    expect(res.body.key).toMatch(/^sk-svc-[A-Za-z0-9_-]{43}[0-9A-Za-z]{6}$/);
    expect(res.body.scopes).toEqual(['assessments:read', 'projects:read']);
    const list = await request(h.app).get('/api/v1/api-keys').set(bearer(org.admin.token));
    expect(list.status).toBe(200);
    const listed = list.body.data.find((k: { id: string }) => k.id === res.body.id);
    expect(listed.prefix).toBe(res.body.key.slice(0, 11));
    expect(JSON.stringify(list.body)).not.toContain(res.body.key);
  });

  it('expands an owner\'s wildcards to concrete scopes before storage', async () => {
    const res = await mintKey(org.owner.token, { name: 'all findings', scopes: ['findings:*'] });
    expect(res.status).toBe(201);
    expect(res.body.scopes).toEqual([
      'findings:accept_risk', 'findings:edit_severity', 'findings:export', 'findings:export_issue',
      'findings:read', 'findings:suppress', 'findings:triage',
    ]);
  });

  it('refuses wildcards from non-owners with 403', async () => {
    for (const user of [org.admin, org.manager]) {
      const res = await mintKey(user.token, { name: 'x', scopes: ['*'] });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('*');
    }
  });

  it('refuses scopes outside the creator\'s bundle with 403 naming them', async () => {
    const res = await mintKey(org.manager.token, { name: 'x', scopes: ['projects:read', 'webhooks:read', 'billing:manage'] });
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('webhooks:read');
    expect(res.body.detail).toContain('billing:manage');
    expect(res.body.detail).not.toContain('projects:read');
  });

  it('refuses unknown scope names with 422', async () => {
    const res = await mintKey(org.owner.token, { name: 'x', scopes: ['projects:fly'] });
    expect(res.status).toBe(422);
    expect(res.body.detail).toContain('projects:fly');
  });

  it('refuses a member (no api_keys:create) with 403 naming the scope', async () => {
    const res = await mintKey(org.member.token, { name: 'x', scopes: ['projects:read'] });
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('api_keys:create');
  });

  it('rejects a malformed body with 400 and a past expiry with 422', async () => {
    expect((await mintKey(org.admin.token, { scopes: ['projects:read'] })).status).toBe(400);
    expect((await mintKey(org.admin.token, { name: 'x', scopes: 'projects:read' })).status).toBe(400);
    const past = await mintKey(org.admin.token, { name: 'x', scopes: ['projects:read'], expires_at: '2001-01-01T00:00:00Z' });
    expect(past.status).toBe(422);
  });
});

describe('keys minted by a key', () => {
  it('never outlive the key that minted them: no expiry takes its expiry, a later one is 422', async () => {
    // A short-lived key that may mint keys falls into an attacker's hands.
    const parentExpiry = new Date(h.clock.now().getTime() + 3600_000);
    const parent = await mintKey(org.admin.token, {
      name: 'short-lived deploy key',
      scopes: ['api_keys:create', 'projects:read'],
      expires_at: parentExpiry.toISOString(),
    });
    expect(parent.status).toBe(201);

    const later = await mintKey(parent.body.key, {
      name: 'longer',
      scopes: ['projects:read'],
      expires_at: new Date(parentExpiry.getTime() + 24 * 3600_000).toISOString(),
    });
    expect(later.status).toBe(422);
    expect(later.body).toEqual({ detail: expect.stringContaining(parentExpiry.toISOString()) });

    const child = await mintKey(parent.body.key, { name: 'no expiry given', scopes: ['projects:read'] });
    expect(child.status).toBe(201);
    expect(child.body.expires_at).toBe(parentExpiry.toISOString());
    expect(await h.deps.prisma.apiKey.count({ where: { name: 'longer' } })).toBe(0);

    // Once the minting key has expired, nothing it minted still works.
    h.clock.advance(2 * 3600_000);
    try {
      expect((await request(h.app).get('/api/v1/projects').set(bearer(parent.body.key))).status).toBe(401);
      expect((await request(h.app).get('/api/v1/projects').set(bearer(child.body.key))).status).toBe(401);
    } finally {
      h.clock.reset();
    }
  });

  it('an earlier expiry than the minting key is kept as asked', async () => {
    const parent = await mintKey(org.admin.token, {
      name: 'parent',
      scopes: ['api_keys:create', 'projects:read'],
      expires_at: new Date(h.clock.now().getTime() + 3600_000).toISOString(),
    });
    const asked = new Date(h.clock.now().getTime() + 600_000).toISOString();
    const child = await mintKey(parent.body.key, { name: 'child', scopes: ['projects:read'], expires_at: asked });
    expect(child.status).toBe(201);
    expect(child.body.expires_at).toBe(asked);
  });
});

describe('authenticating with API keys', () => {
  it('accepts a key for the scopes it holds and names the missing scope otherwise', async () => {
    const { body } = await mintKey(org.admin.token, { name: 'reader', scopes: ['api_keys:read'] });
    expect((await request(h.app).get('/api/v1/api-keys').set(bearer(body.key))).status).toBe(200);
    const denied = await request(h.app).post('/api/v1/api-keys').set(bearer(body.key)).send({ name: 'y', scopes: ['api_keys:read'] });
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain('api_keys:create');
  });

  it('stops working on the next request after revocation (401), and revoking twice is 409', async () => {
    const { body } = await mintKey(org.admin.token, { name: 'short-lived', scopes: ['api_keys:read'] });
    expect((await request(h.app).get('/api/v1/api-keys').set(bearer(body.key))).status).toBe(200);
    const del = await request(h.app).delete(`/api/v1/api-keys/${body.id}`).set(bearer(org.admin.token));
    expect(del.status).toBe(204);
    const after = await request(h.app).get('/api/v1/api-keys').set(bearer(body.key));
    expect(after.status).toBe(401);
    expect(after.body).toEqual({ detail: expect.any(String) });
    expect((await request(h.app).delete(`/api/v1/api-keys/${body.id}`).set(bearer(org.admin.token))).status).toBe(409);
  });

  it('rejects an expired key with 401', async () => {
    const expiresAt = new Date(Date.now() + 60_000).toISOString();
    const { body } = await mintKey(org.admin.token, { name: 'expiring', scopes: ['api_keys:read'], expires_at: expiresAt });
    expect((await request(h.app).get('/api/v1/api-keys').set(bearer(body.key))).status).toBe(200);
    h.clock.advance(120_000);
    try {
      expect((await request(h.app).get('/api/v1/api-keys').set(bearer(body.key))).status).toBe(401);
    } finally {
      h.clock.reset();
    }
  });

  it('rejects unknown keys, keys with a bad checksum and garbage with 401', async () => {
    const { body } = await mintKey(org.admin.token, { name: 'k', scopes: ['api_keys:read'] });
    const flipped = body.key.slice(0, 20) + (body.key[20] === 'A' ? 'B' : 'A') + body.key.slice(21);
    for (const credential of [flipped, 'sk-svc-nope', 'not-a-token', `${body.key}x`]) {
      const res = await request(h.app).get('/api/v1/api-keys').set(bearer(credential));
      expect(res.status).toBe(401);
    }
    expect((await request(h.app).get('/api/v1/api-keys').set('Authorization', `Basic ${body.key}`)).status).toBe(401);
    expect((await request(h.app).get('/api/v1/api-keys')).status).toBe(401);
  });

  it('loses scopes when its creator is demoted, and stops working when the creator is removed', async () => {
    const creator = await createUserInOrg(h, org.id, 'admin', 'demoted');
    const { body } = await request(h.app).post('/api/v1/api-keys').set(bearer(creator.token))
      .send({ name: 'k', scopes: ['api_keys:read', 'webhooks:read'] });
    // Used first, so the API caches its principal: the changes below must still apply on the next request.
    for (let i = 0; i < 2; i++) expect((await request(h.app).get('/api/v1/webhooks/subscriptions').set(bearer(body.key))).status).toBe(200);
    const demote = await request(h.app).patch(`/api/v1/members/${creator.id}`).set(bearer(org.owner.token)).send({ role: 'manager' });
    expect(demote.status).toBe(200);
    const me = await request(h.app).get('/api/v1/api-keys').set(bearer(body.key));
    expect(me.status).toBe(200);
    expect((await request(h.app).get('/api/v1/webhooks/subscriptions').set(bearer(body.key))).status).toBe(403);
    expect((await request(h.app).delete(`/api/v1/members/${creator.id}`).set(bearer(org.owner.token))).status).toBe(204);
    expect((await request(h.app).get('/api/v1/api-keys').set(bearer(body.key))).status).toBe(401);
  });
});

describe('listing and revoking', () => {
  it('shows members only their own keys and admins the organization\'s', async () => {
    const mine = await mintKey(org.manager.token, { name: 'manager key', scopes: ['projects:read'] });
    const memberList = await request(h.app).get('/api/v1/api-keys').set(bearer(org.member.token));
    expect(memberList.status).toBe(200);
    expect(memberList.body.data.map((k: { id: string }) => k.id)).not.toContain(mine.body.id);
    const adminList = await request(h.app).get('/api/v1/api-keys?limit=100').set(bearer(org.admin.token));
    expect(adminList.body.data.map((k: { id: string }) => k.id)).toContain(mine.body.id);
  });

  it('paginates with limit and next_cursor', async () => {
    for (let i = 0; i < 3; i++) await mintKey(org.owner.token, { name: `page ${i}`, scopes: ['org:read'] });
    const first = await request(h.app).get('/api/v1/api-keys?limit=2').set(bearer(org.owner.token));
    expect(first.body.data).toHaveLength(2);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const second = await request(h.app).get(`/api/v1/api-keys?limit=2&cursor=${first.body.next_cursor}`).set(bearer(org.owner.token));
    expect(second.body.data[0].id < first.body.data[1].id).toBe(true);
    expect((await request(h.app).get('/api/v1/api-keys?limit=0').set(bearer(org.owner.token))).status).toBe(400);
  });

  it('answers 404 for another organization\'s key, and for a member revoking someone else\'s', async () => {
    const theirs = await mintKey(otherOrg.admin.token, { name: 'theirs', scopes: ['projects:read'] });
    expect((await request(h.app).delete(`/api/v1/api-keys/${theirs.body.id}`).set(bearer(org.owner.token))).status).toBe(404);
    const managers = await mintKey(org.manager.token, { name: 'm', scopes: ['projects:read'] });
    expect((await request(h.app).delete(`/api/v1/api-keys/${managers.body.id}`).set(bearer(org.member.token))).status).toBe(404);
    const still = await request(h.app).get('/api/v1/api-keys').set(bearer(otherOrg.admin.token));
    expect(still.body.data.find((k: { id: string }) => k.id === theirs.body.id).revoked_at).toBeNull();
  });

  it("an admin revokes a manager's or another admin's key, not the owner's (403 naming the role; the key keeps working)", async () => {
    const owners = await mintKey(org.owner.token, { name: 'owner automation', scopes: ['org:read'] });
    const refused = await request(h.app).delete(`/api/v1/api-keys/${owners.body.id}`).set(bearer(org.admin.token));
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ detail: 'You cannot revoke the API key of someone whose role (owner) is above yours.' });
    expect((await request(h.app).get('/api/v1/organization').set(bearer(owners.body.key))).status).toBe(200);

    const otherAdmin = await createUserInOrg(h, org.id, 'admin', 'second-admin');
    const admins = await mintKey(otherAdmin.token, { name: 'admin automation', scopes: ['org:read'] });
    const managers = await mintKey(org.manager.token, { name: 'manager automation', scopes: ['projects:read'] });
    expect((await request(h.app).delete(`/api/v1/api-keys/${admins.body.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await request(h.app).delete(`/api/v1/api-keys/${managers.body.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await request(h.app).delete(`/api/v1/api-keys/${owners.body.id}`).set(bearer(org.owner.token))).status).toBe(204);
  });
});
