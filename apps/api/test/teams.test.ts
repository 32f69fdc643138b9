import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { auditLog, sentWhileHeld } from './support/audit-log';

let h: Harness;
let org: TestOrg;
let otherOrg: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, otherOrg] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());

const api = () => request(h.app);
const teamName = () => `Team ${uniqueSuffix()}`;
async function newTeam(body: Record<string, unknown> = { name: teamName() }) {
  const res = await api().post('/api/v1/teams').set(bearer(org.admin.token)).send(body);
  expect(res.status).toBe(201);
  return res.body as { id: string; name: string };
}

describe('creating, reading, updating and deleting teams', () => {
  it('creates a team and reads it back', async () => {
    const name = teamName();
    const res = await api().post('/api/v1/teams').set(bearer(org.owner.token)).send({ name, description: 'Blue team' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^team_[0-9a-z]{26}$/),
      name,
      description: 'Blue team',
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const got = await api().get(`/api/v1/teams/${res.body.id}`).set(bearer(org.member.token));
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
    const list = await api().get('/api/v1/teams?limit=100').set(bearer(org.member.token));
    expect(list.body.data.map((t: { id: string }) => t.id)).toContain(res.body.id);
  });

  it('keeps names unique within an organization (409), but not across organizations', async () => {
    const { name, id } = await newTeam();
    const dup = await api().post('/api/v1/teams').set(bearer(org.admin.token)).send({ name });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ detail: expect.any(String) });
    expect((await api().post('/api/v1/teams').set(bearer(otherOrg.admin.token)).send({ name })).status).toBe(201);
    const second = await newTeam();
    const rename = await api().patch(`/api/v1/teams/${second.id}`).set(bearer(org.admin.token)).send({ name });
    expect(rename.status).toBe(409);
    expect((await h.deps.prisma.team.findUniqueOrThrow({ where: { id: second.id } })).name).toBe(second.name);
    expect(id).not.toBe(second.id);
  });

  it('updates name and description', async () => {
    const team = await newTeam({ name: teamName(), description: 'old' });
    const name = teamName();
    const res = await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({ name, description: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: team.id, name, description: null });
    expect((await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({})).status).toBe(400);
  });

  it('deletes a team with its memberships and grants', async () => {
    const team = await newTeam();
    await api().put(`/api/v1/teams/${team.id}/members/${org.member.id}`).set(bearer(org.admin.token));
    const project = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: project.id }, { teamId: team.id }, 'read');
    expect((await api().get(`/api/v1/projects/${project.id}`).set(bearer(org.member.token))).status).toBe(200);

    const res = await api().delete(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token));
    expect(res.status).toBe(204);
    expect(await h.deps.prisma.team.count({ where: { id: team.id } })).toBe(0);
    expect(await h.deps.prisma.teamMember.count({ where: { teamId: team.id } })).toBe(0);
    expect(await h.deps.prisma.accessGrant.count({ where: { teamId: team.id } })).toBe(0);
    expect((await api().get(`/api/v1/projects/${project.id}`).set(bearer(org.member.token))).status).toBe(404);
    expect((await api().get(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await api().delete(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token))).status).toBe(404);
  });

  it('answers 404 for unknown and malformed ids', async () => {
    for (const id of ['team_00000000000000000000000000', 'garbage', 'x'.repeat(300)]) {
      expect((await api().get(`/api/v1/teams/${id}`).set(bearer(org.admin.token))).status).toBe(404);
    }
  });
});

describe('scopes per role', () => {
  it('lets managers and members read but not create, update or delete teams (403 naming the scope)', async () => {
    const team = await newTeam();
    for (const user of [org.manager, org.member]) {
      expect((await api().get(`/api/v1/teams/${team.id}`).set(bearer(user.token))).status).toBe(200);
      expect((await api().get(`/api/v1/teams/${team.id}/members`).set(bearer(user.token))).status).toBe(200);
      const create = await api().post('/api/v1/teams').set(bearer(user.token)).send({ name: teamName() });
      expect(create.status).toBe(403);
      expect(create.body.detail).toContain('teams:create');
      const update = await api().patch(`/api/v1/teams/${team.id}`).set(bearer(user.token)).send({ name: teamName() });
      expect(update.status).toBe(403);
      expect(update.body.detail).toContain('teams:update');
      const del = await api().delete(`/api/v1/teams/${team.id}`).set(bearer(user.token));
      expect(del.status).toBe(403);
      expect(del.body.detail).toContain('teams:delete');
      const add = await api().put(`/api/v1/teams/${team.id}/members/${user.id}`).set(bearer(user.token));
      expect(add.status).toBe(403);
      expect(add.body.detail).toContain('teams:manage_members');
      const removeRes = await api().delete(`/api/v1/teams/${team.id}/members/${user.id}`).set(bearer(user.token));
      expect(removeRes.status).toBe(403);
      expect(removeRes.body.detail).toContain('teams:manage_members');
    }
    expect((await h.deps.prisma.team.findUniqueOrThrow({ where: { id: team.id } })).name).toBe(team.name);
  });
});

describe('team members', () => {
  it('adds organization members (idempotently), lists and removes them', async () => {
    const team = await newTeam();
    const add = await api().put(`/api/v1/teams/${team.id}/members/${org.manager.id}`).set(bearer(org.admin.token));
    expect(add.status).toBe(200);
    expect(add.body).toEqual({ user_id: org.manager.id, email: org.manager.email, name: 'manager user', added_at: expect.any(String) });
    const again = await api().put(`/api/v1/teams/${team.id}/members/${org.manager.id}`).set(bearer(org.admin.token));
    expect(again.status).toBe(200);
    expect(again.body.added_at).toBe(add.body.added_at);
    await api().put(`/api/v1/teams/${team.id}/members/${org.member.id}`).set(bearer(org.admin.token));
    expect(await h.deps.prisma.teamMember.count({ where: { teamId: team.id } })).toBe(2);

    const first = await api().get(`/api/v1/teams/${team.id}/members?limit=1`).set(bearer(org.member.token));
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(1);
    const second = await api().get(`/api/v1/teams/${team.id}/members?limit=1&cursor=${first.body.next_cursor}`).set(bearer(org.member.token));
    expect(second.body.data).toHaveLength(1);
    expect(second.body.next_cursor).toBeNull();
    expect([first.body.data[0].user_id, second.body.data[0].user_id].sort()).toEqual([org.manager.id, org.member.id].sort());

    expect((await api().delete(`/api/v1/teams/${team.id}/members/${org.manager.id}`).set(bearer(org.admin.token))).status).toBe(204);
    const list = await api().get(`/api/v1/teams/${team.id}/members`).set(bearer(org.admin.token));
    expect(list.body.data.map((m: { user_id: string }) => m.user_id)).toEqual([org.member.id]);
    expect((await api().delete(`/api/v1/teams/${team.id}/members/${org.manager.id}`).set(bearer(org.admin.token))).status).toBe(404);
  });

  it('refuses users who are not members of the organization (404)', async () => {
    const team = await newTeam();
    for (const userId of [otherOrg.member.id, 'usr_00000000000000000000000000', 'nonsense']) {
      const res = await api().put(`/api/v1/teams/${team.id}/members/${userId}`).set(bearer(org.admin.token));
      expect(res.status).toBe(404);
    }
    expect(await h.deps.prisma.teamMember.count({ where: { teamId: team.id } })).toBe(0);
  });

  it('answers 404 for the members of an unknown team', async () => {
    expect((await api().get('/api/v1/teams/team_00000000000000000000000000/members').set(bearer(org.admin.token))).status).toBe(404);
    expect((await api().put(`/api/v1/teams/nope/members/${org.member.id}`).set(bearer(org.admin.token))).status).toBe(404);
  });
});

describe('the audit log', () => {
  const entriesOn = (teamId: string, token = org.admin.token) => auditLog(h, token, { target_id: teamId });
  const byAdmin = () => ({ actor_type: 'user', actor_id: org.admin.id, actor_label: org.admin.email });
  const addMember = (teamId: string, userId: string, token = org.admin.token) =>
    api().put(`/api/v1/teams/${teamId}/members/${userId}`).set(bearer(token));
  const removeMember = (teamId: string, userId: string, token = org.admin.token) =>
    api().delete(`/api/v1/teams/${teamId}/members/${userId}`).set(bearer(token));

  it('records a team created and edited (before and after), and nothing for an edit that changes nothing', async () => {
    const name = teamName();
    const team = await newTeam({ name, description: 'Blue team' });
    expect(await entriesOn(team.id)).toEqual([
      expect.objectContaining({ action: 'team.created', ...byAdmin(), target_type: 'team', target_id: team.id, metadata: { name, description: 'Blue team' } }),
    ]);
    const renamed = teamName();
    expect((await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({ name: renamed, description: '' })).status).toBe(200);
    expect((await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({ name: renamed, description: null })).status).toBe(200);
    expect((await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({ name: renamed })).status).toBe(200);
    const entries = await entriesOn(team.id);
    expect(entries.map((e) => e.action)).toEqual(['team.updated', 'team.created']);
    expect(entries[0]).toMatchObject({ ...byAdmin(), target_type: 'team', target_id: team.id });
    expect(entries[0].metadata).toEqual({ before: { name, description: 'Blue team' }, after: { name: renamed, description: null } });
  });

  it('records nothing for a name already taken (409)', async () => {
    const taken = await newTeam();
    const team = await newTeam();
    expect((await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({ name: taken.name })).status).toBe(409);
    expect((await api().post('/api/v1/teams').set(bearer(org.admin.token)).send({ name: taken.name })).status).toBe(409);
    expect((await entriesOn(team.id)).map((e) => e.action)).toEqual(['team.created']);
    expect((await auditLog(h, org.admin.token, { action: 'team.created' })).filter((e) => e.metadata?.name === taken.name)).toHaveLength(1);
  });

  it('records a member added once (not when already in the team) and removed once', async () => {
    const team = await newTeam();
    expect((await addMember(team.id, org.manager.id)).status).toBe(200);
    expect((await addMember(team.id, org.manager.id)).status).toBe(200);
    const concurrent = await Promise.all([1, 2, 3].map(() => addMember(team.id, org.member.id).then((r) => r.status)));
    expect(concurrent).toEqual([200, 200, 200]);
    expect((await removeMember(team.id, org.manager.id)).status).toBe(204);
    expect((await removeMember(team.id, org.manager.id)).status).toBe(404);
    const entries = await entriesOn(team.id);
    expect(entries.map((e) => e.action)).toEqual(['team.member_removed', 'team.member_added', 'team.member_added', 'team.created']);
    const common = { ...byAdmin(), target_type: 'team', target_id: team.id };
    expect(entries[0]).toMatchObject({ ...common, metadata: { user_id: org.manager.id, email: org.manager.email } });
    expect(entries[1]).toMatchObject({ ...common, metadata: { user_id: org.member.id, email: org.member.email } });
    expect(entries[2]).toMatchObject({ ...common, metadata: { user_id: org.manager.id, email: org.manager.email } });
    expect(entries[0].metadata).toEqual({ user_id: org.manager.id, email: org.manager.email });
  });

  it('records a deletion once, with the name and what went with the team', async () => {
    const team = await newTeam();
    await addMember(team.id, org.member.id);
    await addMember(team.id, org.manager.id);
    const project = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: project.id }, { teamId: team.id }, 'read');
    const statuses = await Promise.all([1, 2].map(() => api().delete(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).then((r) => r.status)));
    expect(statuses.sort()).toEqual([204, 404]);
    const deleted = (await entriesOn(team.id)).filter((e) => e.action === 'team.deleted');
    expect(deleted).toEqual([
      expect.objectContaining({
        ...byAdmin(),
        target_type: 'team',
        target_id: team.id,
        metadata: { name: team.name, members_removed: 2, grants_removed: 1, integrations_unbound: 0 },
      }),
    ]);
  });

  it('records nothing for a manager, a member or another organization (403/404)', async () => {
    const team = await newTeam();
    await addMember(team.id, org.member.id);
    for (const [user, expected] of [[org.manager, 403], [org.member, 403], [otherOrg.admin, 404]] as const) {
      if (expected === 403) expect((await api().post('/api/v1/teams').set(bearer(user.token)).send({ name: teamName() })).status).toBe(403);
      expect((await api().patch(`/api/v1/teams/${team.id}`).set(bearer(user.token)).send({ name: teamName() })).status).toBe(expected);
      expect((await addMember(team.id, org.manager.id, user.token)).status).toBe(expected);
      expect((await removeMember(team.id, org.member.id, user.token)).status).toBe(expected);
      expect((await api().delete(`/api/v1/teams/${team.id}`).set(bearer(user.token))).status).toBe(expected);
    }
    expect((await entriesOn(team.id)).map((e) => e.action)).toEqual(['team.member_added', 'team.created']);
    expect(await entriesOn(team.id, otherOrg.admin.token)).toEqual([]);
  });

  it("keeps one organization's team entries out of another's log", async () => {
    const team = await newTeam();
    await addMember(team.id, org.member.id);
    await api().patch(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)).send({ description: 'x' });
    await removeMember(team.id, org.member.id);
    await api().delete(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token));
    expect(await entriesOn(team.id)).toHaveLength(5);
    expect(await entriesOn(team.id, otherOrg.admin.token)).toEqual([]);
    for (const action of ['team.created', 'team.updated', 'team.deleted', 'team.member_added', 'team.member_removed']) {
      const theirs = await auditLog(h, otherOrg.admin.token, { action });
      expect(theirs.filter((e) => e.target_id === team.id || e.actor_id === org.admin.id)).toEqual([]);
    }
  });

  it('counts in team.deleted a member whose addition the deletion waited for', async () => {
    const team = await newTeam();
    await addMember(team.id, org.member.id);
    const res = await sentWhileHeld(h, [['INSERT INTO team_members (team_id, user_id) VALUES ($1, $2)', [team.id, org.manager.id]]], () =>
      api().delete(`/api/v1/teams/${team.id}`).set(bearer(org.admin.token)),
    );
    expect(res.status).toBe(204);
    const [deleted] = await auditLog(h, org.admin.token, { target_id: team.id, action: 'team.deleted' });
    expect(deleted.metadata).toMatchObject({ members_removed: 2 });
    expect(await h.deps.prisma.teamMember.count({ where: { teamId: team.id } })).toBe(0);
  });

  it('answers 404 (not 409 from the foreign key) and records nothing when the team is being deleted meanwhile', async () => {
    const team = await newTeam();
    const res = await sentWhileHeld(h, [['DELETE FROM teams WHERE id = $1', [team.id]]], () => addMember(team.id, org.member.id));
    expect(res.status).toBe(404);
    expect((await entriesOn(team.id)).map((e) => e.action)).toEqual(['team.created']);
  });

  it('adds nothing, and records nothing, for somebody being removed from the organization meanwhile (404)', async () => {
    const team = await newTeam();
    const leaving = await createUserInOrg(h, org.id, 'member', 'leaving');
    const res = await sentWhileHeld(h, [['DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2', [org.id, leaving.id]]], () =>
      addMember(team.id, leaving.id),
    );
    expect(res.status).toBe(404);
    expect(await h.deps.prisma.teamMember.count({ where: { userId: leaving.id } })).toBe(0);
    expect((await entriesOn(team.id)).map((e) => e.action)).toEqual(['team.created']);
  });
});
