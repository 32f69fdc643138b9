import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertProject, type TestOrg } from './support/fixtures';
import { auditLog } from './support/audit-log';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);

describe('GET /organization', () => {
  it('returns the caller\'s organization to every role', async () => {
    for (const user of [org.owner, org.admin, org.manager, org.member]) {
      const res = await api().get('/api/v1/organization').set(bearer(user.token));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ id: org.id, name: org.name, created_at: expect.any(String), updated_at: expect.any(String) });
    }
  });

  it('needs a credential', async () => {
    expect((await api().get('/api/v1/organization')).status).toBe(401);
  });
});

describe('PATCH /organization', () => {
  it('renames the organization for owners and admins', async () => {
    const fresh = await createOrg(h);
    const res = await api().patch('/api/v1/organization').set(bearer(fresh.admin.token)).send({ name: 'Renamed by admin' });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('Renamed by admin');
    expect((await h.deps.prisma.organization.findUnique({ where: { id: fresh.id } }))!.name).toBe('Renamed by admin');
  });

  it('refuses managers and members with 403 naming org:update', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await api().patch('/api/v1/organization').set(bearer(user.token)).send({ name: 'nope' });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('org:update');
    }
    expect((await h.deps.prisma.organization.findUnique({ where: { id: org.id } }))!.name).toBe(org.name);
  });

  it('rejects a body that does not match the schema with 400', async () => {
    for (const body of [{}, { name: '' }, { name: 42 }, { name: 'ok', extra: true }]) {
      const res = await api().patch('/api/v1/organization').set(bearer(org.owner.token)).send(body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });

  describe('organization.renamed in the audit log', () => {
    const rename = (token: string, name: string) => api().patch('/api/v1/organization').set(bearer(token)).send({ name });
    const renames = (t: TestOrg) => auditLog(h, t.owner.token, { action: 'organization.renamed' });

    it('records who renamed it, from what to what; the same name again records nothing', async () => {
      const t = await createOrg(h);
      expect((await rename(t.admin.token, 'Acme Security')).status).toBe(200);
      expect((await rename(t.owner.token, 'Acme Security')).status).toBe(200);
      expect(await renames(t)).toEqual([
        expect.objectContaining({
          actor_type: 'user', actor_id: t.admin.id, actor_label: t.admin.email, target_type: 'organization', target_id: t.id,
          metadata: { previous_name: t.name, name: 'Acme Security' },
        }),
      ]);
      expect((await rename(t.owner.token, 'Acme')).status).toBe(200);
      expect((await renames(t)).map((e) => e.metadata)).toEqual([
        { previous_name: 'Acme Security', name: 'Acme' },
        { previous_name: t.name, name: 'Acme Security' },
      ]);
    });

    it('records nothing for a refused rename (403, 400), and nothing in another organization', async () => {
      const t = await createOrg(h);
      const other = await createOrg(h);
      expect((await rename(t.manager.token, 'nope')).status).toBe(403);
      expect((await rename(t.member.token, 'nope')).status).toBe(403);
      expect((await api().patch('/api/v1/organization').set(bearer(t.admin.token)).send({ name: '' })).status).toBe(400);
      expect(await auditLog(h, t.owner.token)).toEqual([]);
      expect((await rename(t.admin.token, `${t.name} renamed`)).status).toBe(200);
      expect(await renames(t)).toHaveLength(1);
      const theirs = JSON.stringify(await auditLog(h, other.owner.token));
      expect(theirs).not.toContain(t.id);
      expect(theirs).not.toContain(`${t.name} renamed`);
    });

    it('says what each of two concurrent renames replaced: one previous name each, no stale one', async () => {
      const t = await createOrg(h);
      const results = await Promise.all(['First', 'Second'].map((name) => rename(t.owner.token, name)));
      expect(results.map((r) => r.status)).toEqual([200, 200]);
      const entries = (await renames(t)).map((e) => e.metadata as { previous_name: string; name: string });
      expect(entries).toHaveLength(2);
      // Whichever committed first replaced the original name; the other replaced that one, and stands.
      const first = entries.find((e) => e.previous_name === t.name)!;
      const second = entries.find((e) => e !== first)!;
      expect(second.previous_name).toBe(first.name);
      expect((await api().get('/api/v1/organization').set(bearer(t.owner.token))).body.name).toBe(second.name);
    });
  });
});

describe('DELETE /organization', () => {
  it('is for the owner only: admins and below get 403 naming org:delete', async () => {
    for (const user of [org.admin, org.manager, org.member]) {
      const res = await api().delete('/api/v1/organization').set(bearer(user.token)).send({ confirm: org.name });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('org:delete');
    }
  });

  it('requires the exact organization name in `confirm` (400 otherwise)', async () => {
    const missing = await api().delete('/api/v1/organization').set(bearer(org.owner.token));
    expect(missing.status).toBe(400);
    const wrong = await api().delete('/api/v1/organization').set(bearer(org.owner.token)).send({ confirm: `${org.name}x` });
    expect(wrong.status).toBe(400);
    expect(wrong.body.detail).toContain('confirm');
    expect(await h.deps.prisma.organization.count({ where: { id: org.id } })).toBe(1);
  });

  it('deletes the organization and everything in it, and its sessions stop working', async () => {
    const doomed = await createOrg(h);
    const project = await insertProject(h, doomed.id);
    const res = await api().delete('/api/v1/organization').set(bearer(doomed.owner.token)).send({ confirm: doomed.name });
    expect(res.status).toBe(204);
    expect(await h.deps.prisma.organization.count({ where: { id: doomed.id } })).toBe(0);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: doomed.id } })).toBe(0);
    expect(await h.deps.prisma.project.count({ where: { id: project.id } })).toBe(0);
    expect(await h.deps.prisma.session.count({ where: { organizationId: doomed.id } })).toBe(0);
    // The users themselves remain; only what belonged to the organization is gone.
    expect(await h.deps.prisma.user.count({ where: { id: doomed.owner.id } })).toBe(1);
    expect((await api().get('/api/v1/organization').set(bearer(doomed.owner.token))).status).toBe(401);
    // Other organizations are untouched.
    expect(await h.deps.prisma.organization.count({ where: { id: org.id } })).toBe(1);
  });
});

describe('POST /organization/transfer-ownership', () => {
  const roleOf = async (orgId: string, userId: string) =>
    (await h.deps.prisma.membership.findUnique({ where: { organizationId_userId: { organizationId: orgId, userId } } }))?.role;

  it('makes an active member the owner and the previous owner an admin', async () => {
    const t = await createOrg(h);
    const res = await api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: t.manager.id });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ owner_id: t.manager.id, previous_owner_id: t.owner.id, previous_owner_role: 'admin' });
    expect(await roleOf(t.id, t.manager.id)).toBe('owner');
    expect(await roleOf(t.id, t.owner.id)).toBe('admin');
    expect(await h.deps.prisma.membership.count({ where: { organizationId: t.id, role: 'owner' } })).toBe(1);
    // The former owner's session now carries the admin bundle: no more org:delete.
    const del = await api().delete('/api/v1/organization').set(bearer(t.owner.token)).send({ confirm: t.name });
    expect(del.status).toBe(403);
    expect(del.body.detail).toContain('org:delete');
    // And the new owner can transfer it onwards.
    const back = await api().post('/api/v1/organization/transfer-ownership').set(bearer(t.manager.token)).send({ user_id: t.owner.id });
    expect(back.status).toBe(200);
    expect(await roleOf(t.id, t.owner.id)).toBe('owner');
    expect(await roleOf(t.id, t.manager.id)).toBe('admin');
  });

  it('is for the owner only: admins get 403 naming org:transfer_ownership', async () => {
    const res = await api().post('/api/v1/organization/transfer-ownership').set(bearer(org.admin.token)).send({ user_id: org.admin.id });
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('org:transfer_ownership');
    expect(await roleOf(org.id, org.owner.id)).toBe('owner');
  });

  it('refuses a non-member (404), a pending user (400) and oneself (400)', async () => {
    const t = await createOrg(h);
    const outsider = await createOrg(h);
    const notMember = await api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: outsider.member.id });
    expect(notMember.status).toBe(404);
    const unknown = await api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: 'usr_nope' });
    expect(unknown.status).toBe(404);

    const pending = await createUserInOrg(h, t.id, 'member', 'pending');
    await h.deps.prisma.user.update({ where: { id: pending.id }, data: { status: 'pending' } });
    const res = await api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: pending.id });
    expect(res.status).toBe(400);

    const self = await api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: t.owner.id });
    expect(self.status).toBe(400);
    expect(await roleOf(t.id, t.owner.id)).toBe('owner');
    expect(await roleOf(t.id, pending.id)).toBe('member');
  });

  it('lets only one of two concurrent transfers win', async () => {
    const t = await createOrg(h);
    const [a, b] = await Promise.all([
      api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: t.admin.id }),
      api().post('/api/v1/organization/transfer-ownership').set(bearer(t.owner.token)).send({ user_id: t.manager.id }),
    ]);
    expect([a.status, b.status].sort()).toEqual([200, 409]);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: t.id, role: 'owner' } })).toBe(1);
    expect(await roleOf(t.id, t.owner.id)).toBe('admin');
  });
});
