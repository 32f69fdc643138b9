import request from 'supertest';
import { Client } from 'pg';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { loginRequest } from './support/auth-helpers';
import { backendPid, lockWaiters, waitingFor } from '../../../test-support/pg-locks';
import { waitFor } from '../../../test-support/private-services';
import { bearer, createOrg, createUserInOrg, insertGrant, insertProject, TEST_PASSWORD, type TestOrg } from './support/fixtures';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);
const roleOf = async (orgId: string, userId: string) =>
  (await h.deps.prisma.membership.findUnique({ where: { organizationId_userId: { organizationId: orgId, userId } } }))?.role;
const changeRole = (token: string, userId: string, role: unknown) =>
  api().patch(`/api/v1/members/${userId}`).set(bearer(token)).send({ role });
const remove = (token: string, userId: string) => api().delete(`/api/v1/members/${userId}`).set(bearer(token));

describe('GET /members', () => {
  it('lists every member with role and user details, to every role', async () => {
    for (const user of [org.owner, org.admin, org.manager, org.member]) {
      const res = await api().get('/api/v1/members').set(bearer(user.token));
      expect(res.status).toBe(200);
      expect(res.body.next_cursor).toBeNull();
      expect(res.body.data).toHaveLength(4);
      const byId = Object.fromEntries(res.body.data.map((m: { user_id: string }) => [m.user_id, m]));
      expect(byId[org.manager.id]).toEqual({
        user_id: org.manager.id,
        email: org.manager.email,
        name: 'manager user',
        status: 'active',
        role: 'manager',
        joined_at: expect.any(String),
      });
      expect(byId[org.owner.id].role).toBe('owner');
    }
  });

  it('paginates with limit and next_cursor, and does not show other organizations\' members', async () => {
    const other = await createOrg(h);
    const first = await api().get('/api/v1/members?limit=3').set(bearer(org.member.token));
    expect(first.body.data).toHaveLength(3);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const second = await api().get(`/api/v1/members?limit=3&cursor=${first.body.next_cursor}`).set(bearer(org.member.token));
    expect(second.body.data).toHaveLength(1);
    expect(second.body.next_cursor).toBeNull();
    const ids = [...first.body.data, ...second.body.data].map((m: { user_id: string }) => m.user_id).sort();
    expect(ids).toEqual([org.owner.id, org.admin.id, org.manager.id, org.member.id].sort());
    expect(ids).not.toContain(other.member.id);
  });
});

describe('PATCH /members/{user_id}', () => {
  it('lets an admin promote and demote below and at their own level', async () => {
    const t = await createOrg(h);
    const res = await changeRole(t.admin.token, t.member.id, 'manager');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ user_id: t.member.id, role: 'manager', email: t.member.email });
    expect(await roleOf(t.id, t.member.id)).toBe('manager');
    expect((await changeRole(t.admin.token, t.member.id, 'admin')).status).toBe(200);
    expect(await roleOf(t.id, t.member.id)).toBe('admin');
    expect((await changeRole(t.admin.token, t.member.id, 'member')).status).toBe(200);
    expect(await roleOf(t.id, t.member.id)).toBe('member');
  });

  it('takes effect on the member\'s next request', async () => {
    const t = await createOrg(h);
    const before = await api().post('/api/v1/teams').set(bearer(t.member.token)).send({ name: 'x' });
    expect(before.status).toBe(403);
    expect((await changeRole(t.owner.token, t.member.id, 'admin')).status).toBe(200);
    const after = await api().post('/api/v1/teams').set(bearer(t.member.token)).send({ name: 'x' });
    expect(after.status).toBe(201);
  });

  it('refuses managers and members with 403 naming members:change_role', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await changeRole(user.token, org.member.id, 'member');
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('members:change_role');
    }
  });

  it('refuses the owner role (400: only by transfer-ownership), even to the owner', async () => {
    const t = await createOrg(h);
    for (const user of [t.owner, t.admin]) {
      const res = await changeRole(user.token, t.manager.id, 'owner');
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('transfer');
    }
    expect(await roleOf(t.id, t.manager.id)).toBe('manager');
    expect(await h.deps.prisma.membership.count({ where: { organizationId: t.id, role: 'owner' } })).toBe(1);
  });

  it('refuses to change someone above you (403), so an admin cannot touch the owner', async () => {
    const t = await createOrg(h);
    const res = await changeRole(t.admin.token, t.owner.id, 'member');
    expect(res.status).toBe(403);
    expect(await roleOf(t.id, t.owner.id)).toBe('owner');
  });

  it('acts with the current role of a key\'s creator: a demoted admin\'s key can no longer change roles', async () => {
    const t = await createOrg(h);
    // An admin's API key with members:change_role keeps working after its creator is demoted to manager, but
    // the key acts with the creator's current role, whose bundle lacks the scope.
    const key = await api().post('/api/v1/api-keys').set(bearer(t.admin.token)).send({ name: 'k', scopes: ['members:change_role'] });
    expect(key.status).toBe(201);
    expect((await changeRole(key.body.key, t.member.id, 'manager')).status).toBe(200);
    expect((await changeRole(t.owner.token, t.admin.id, 'manager')).status).toBe(200);
    const res = await changeRole(key.body.key, t.member.id, 'admin');
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('members:change_role');
    expect(await roleOf(t.id, t.member.id)).toBe('manager');
  });

  it('keeps the organization\'s owner: the owner cannot demote themselves (400)', async () => {
    const t = await createOrg(h);
    const res = await changeRole(t.owner.token, t.owner.id, 'admin');
    expect(res.status).toBe(400);
    expect(await roleOf(t.id, t.owner.id)).toBe('owner');
  });

  it('answers 404 for a user who is not a member and 400 for an unknown role', async () => {
    const t = await createOrg(h);
    expect((await changeRole(t.owner.token, 'usr_00000000000000000000000000', 'member')).status).toBe(404);
    expect((await changeRole(t.owner.token, 'not-an-id', 'member')).status).toBe(404);
    expect((await changeRole(t.owner.token, t.member.id, 'superuser')).status).toBe(400);
    expect((await api().patch(`/api/v1/members/${t.member.id}`).set(bearer(t.owner.token)).send({})).status).toBe(400);
  });
});

describe('DELETE /members/{user_id}', () => {
  it('removes a member: the membership, their team places and grants go, sessions and keys stop working', async () => {
    const t = await createOrg(h);
    const victim = await createUserInOrg(h, t.id, 'manager', 'leaving');
    const key = await api().post('/api/v1/api-keys').set(bearer(victim.token)).send({ name: 'k', scopes: ['projects:read'] });
    expect((await api().get('/api/v1/projects').set(bearer(key.body.key))).status).toBe(200);
    const team = await api().post('/api/v1/teams').set(bearer(t.admin.token)).send({ name: 'blue' });
    expect((await api().put(`/api/v1/teams/${team.body.id}/members/${victim.id}`).set(bearer(t.admin.token))).status).toBe(200);
    const project = await insertProject(h, t.id);
    await insertGrant(h, t.id, { projectId: project.id }, { userId: victim.id }, 'write');

    const res = await remove(t.admin.token, victim.id);
    expect(res.status).toBe(204);
    expect(await roleOf(t.id, victim.id)).toBeUndefined();
    expect(await h.deps.prisma.teamMember.count({ where: { userId: victim.id } })).toBe(0);
    expect(await h.deps.prisma.accessGrant.count({ where: { userId: victim.id } })).toBe(0);
    const session = await h.deps.prisma.session.findUnique({ where: { id: victim.sessionId } });
    expect(session!.revokedAt).toBeInstanceOf(Date);
    expect((await api().get('/api/v1/organization').set(bearer(victim.token))).status).toBe(401);
    expect((await api().get('/api/v1/projects').set(bearer(key.body.key))).status).toBe(401);
    expect((await h.deps.prisma.apiKey.findUnique({ where: { id: key.body.id } }))!.revokedAt).toBeInstanceOf(Date);
    // The user account itself remains.
    expect(await h.deps.prisma.user.count({ where: { id: victim.id } })).toBe(1);
    // Gone means gone: a second removal is 404.
    expect((await remove(t.admin.token, victim.id)).status).toBe(404);
  });

  it('refuses managers and members with 403 naming members:remove', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await remove(user.token, org.member.id);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('members:remove');
    }
    expect(await roleOf(org.id, org.member.id)).toBe('member');
  });

  it('refuses to remove the owner or someone above you', async () => {
    const t = await createOrg(h);
    const byAdmin = await remove(t.admin.token, t.owner.id);
    expect(byAdmin.status).toBe(403);
    const self = await remove(t.owner.token, t.owner.id);
    expect(self.status).toBe(400);
    expect(self.body.detail).toContain('transfer');
    expect(await roleOf(t.id, t.owner.id)).toBe('owner');
    // An admin may remove another admin (not above them).
    const otherAdmin = await createUserInOrg(h, t.id, 'admin', 'admin2');
    expect((await remove(t.admin.token, otherAdmin.id)).status).toBe(204);
  });

  it('keeps the user\'s memberships and sessions in other organizations', async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: b.id, userId: a.member.id, role: 'member' } });
    expect((await remove(a.owner.token, a.member.id)).status).toBe(204);
    expect(await roleOf(b.id, a.member.id)).toBe('member');
  });
});

describe('DELETE /members/{user_id} racing the member signing in', () => {
  it('a sign-in under way while the removal runs gets no session that would work again if they rejoined', async () => {
    const t = await createOrg(h);
    const leaving = await createUserInOrg(h, t.id, 'member', 'racing');
    const pg = new Client({ connectionString: h.config.databaseUrl });
    await pg.connect();
    // Another connection holds the member's session: the removal waits inside its transaction, its membership
    // deleted (not committed yet) when it comes to revoke the sessions.
    const holder = new Client({ connectionString: h.config.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM sessions WHERE user_id = $1 FOR UPDATE', [leaving.id]);
      const pid = await backendPid(holder);
      const removal = remove(t.admin.token, leaving.id).then((r) => r);
      removal.catch(() => undefined);
      await waitFor('the removal waiting for the held session', async () => (await waitingFor(pg, pid)) > 0);

      let answered = false;
      const signIn = loginRequest(h, { email: leaving.email, password: TEST_PASSWORD, organization_id: t.id }).then((r) => {
        answered = true;
        return r;
      });
      signIn.catch(() => undefined);
      // The sign-in either waits for the removal (the member's row) or, without that lock, is answered meanwhile.
      await waitFor('the sign-in waiting or answered', async () => answered || (await lockWaiters(pg)) >= 2);
      await holder.query('COMMIT');
      expect((await removal).status).toBe(204);
      const res = await signIn;
      expect([res.status, res.body.detail]).toEqual([403, 'You are not a member of that organization.']);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }

    // Rejoining (an invitation accepted later) brings back no session of before.
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: t.id, userId: leaving.id, role: 'member' } });
    const live = await pg.query('SELECT id FROM sessions WHERE user_id = $1 AND revoked_at IS NULL', [leaving.id]);
    await pg.end();
    expect(live.rows).toEqual([]);
  });
});
