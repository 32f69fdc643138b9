import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertAssessment, insertGrant, insertProject, type TestOrg } from './support/fixtures';
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
const grant = (token: string, path: string, body: Record<string, unknown>) =>
  api().post(`/api/v1/${path}/access`).set(bearer(token)).send(body);
const status = async (token: string, method: 'get' | 'patch', path: string, body?: object) =>
  (await api()[method](`/api/v1/${path}`).set(bearer(token)).send(body)).status;

describe('project grants', () => {
  it('gives a member read access: GET works, PATCH is still 403 (scope); without a grant it is 404', async () => {
    const p = await insertProject(h, org.id);
    expect(await status(org.member.token, 'get', `projects/${p.id}`)).toBe(404);
    const res = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'read' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^grant_[0-9a-z]{26}$/),
      project_id: p.id,
      assessment_id: null,
      subject_type: 'user',
      user_id: org.member.id,
      team_id: null,
      access: 'read',
      created_at: expect.any(String),
    });
    expect(await status(org.member.token, 'get', `projects/${p.id}`)).toBe(200);
    expect(await status(org.member.token, 'patch', `projects/${p.id}`, { name: 'x' })).toBe(403);
  });

  it('moves a manager from read to write by granting again (one grant per subject, upserted)', async () => {
    const p = await insertProject(h, org.id);
    const read = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.manager.id, access: 'read' });
    expect(read.status).toBe(201);
    expect(await status(org.manager.token, 'get', `projects/${p.id}`)).toBe(200);
    const denied = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token)).send({ name: 'x' });
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain('Write access');

    const write = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.manager.id, access: 'write' });
    expect(write.status).toBe(200);
    expect(write.body).toMatchObject({ id: read.body.id, access: 'write' });
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: p.id, userId: org.manager.id } })).toBe(1);
    expect(await status(org.manager.token, 'patch', `projects/${p.id}`, { name: 'by manager' })).toBe(200);

    // Granting the same level again changes nothing.
    const same = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.manager.id, access: 'write' });
    expect(same.status).toBe(200);
    expect(same.body.id).toBe(read.body.id);
  });

  it('keeps one grant per subject under concurrent requests', async () => {
    const p = await insertProject(h, org.id);
    const results = await Promise.all(
      ['read', 'write', 'read', 'write', 'read'].map((access) => grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access })),
    );
    expect(results.map((r) => r.status).filter((s) => s === 201)).toHaveLength(1);
    expect(results.every((r) => r.status === 201 || r.status === 200)).toBe(true);
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: p.id, userId: org.member.id } })).toBe(1);
  });

  it('grants to a team reach its members, and stop when they leave the team', async () => {
    const p = await insertProject(h, org.id);
    const team = await api().post('/api/v1/teams').set(bearer(org.admin.token)).send({ name: `team-${p.id}` });
    await api().put(`/api/v1/teams/${team.body.id}/members/${org.member.id}`).set(bearer(org.admin.token));
    const res = await grant(org.admin.token, `projects/${p.id}`, { team_id: team.body.id, access: 'read' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ subject_type: 'team', team_id: team.body.id, user_id: null });
    expect(await status(org.member.token, 'get', `projects/${p.id}`)).toBe(200);
    expect(await status(org.manager.token, 'get', `projects/${p.id}`)).toBe(404);
    await api().delete(`/api/v1/teams/${team.body.id}/members/${org.member.id}`).set(bearer(org.admin.token));
    expect(await status(org.member.token, 'get', `projects/${p.id}`)).toBe(404);
  });

  it('lists and deletes grants; a deleted grant takes access away', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    const g = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'read' });
    await grant(org.admin.token, `assessments/${a.id}`, { user_id: org.manager.id, access: 'read' });
    const list = await api().get(`/api/v1/projects/${p.id}/access`).set(bearer(org.admin.token));
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [expect.objectContaining({ id: g.body.id, user_id: org.member.id })], next_cursor: null });

    // A project grant is not reachable through an assessment's path, nor through another project's.
    const other = await insertProject(h, org.id);
    expect((await api().delete(`/api/v1/assessments/${a.id}/access/${g.body.id}`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await api().delete(`/api/v1/projects/${other.id}/access/${g.body.id}`).set(bearer(org.admin.token))).status).toBe(404);
    expect(await h.deps.prisma.accessGrant.count({ where: { id: g.body.id } })).toBe(1);

    expect((await api().delete(`/api/v1/projects/${p.id}/access/${g.body.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await h.deps.prisma.accessGrant.count({ where: { id: g.body.id } })).toBe(0);
    expect(await status(org.member.token, 'get', `projects/${p.id}`)).toBe(404);
    expect((await api().delete(`/api/v1/projects/${p.id}/access/${g.body.id}`).set(bearer(org.admin.token))).status).toBe(404);
  });
});

describe('assessment grants', () => {
  it('cover only that assessment and are stored with projectId NULL', async () => {
    const p = await insertProject(h, org.id);
    const a1 = await insertAssessment(h, org.id, p.id);
    const a2 = await insertAssessment(h, org.id, p.id);
    const res = await grant(org.admin.token, `assessments/${a1.id}`, { user_id: org.member.id, access: 'read' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ assessment_id: a1.id, project_id: null, access: 'read' });
    const row = await h.deps.prisma.accessGrant.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row).toMatchObject({ projectId: null, assessmentId: a1.id, organizationId: org.id });
    expect(await status(org.member.token, 'get', `assessments/${a1.id}`)).toBe(200);
    expect(await status(org.member.token, 'get', `assessments/${a2.id}`)).toBe(404);
    expect(await status(org.member.token, 'get', `projects/${p.id}`)).toBe(404);

    const list = await api().get(`/api/v1/assessments/${a1.id}/access`).set(bearer(org.admin.token));
    expect(list.body.data.map((g: { id: string }) => g.id)).toEqual([res.body.id]);
    expect((await api().get(`/api/v1/projects/${p.id}/access`).set(bearer(org.admin.token))).body.data).toEqual([]);

    expect((await api().delete(`/api/v1/assessments/${a1.id}/access/${res.body.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await status(org.member.token, 'get', `assessments/${a1.id}`)).toBe(404);
  });

  it('can be managed by a manager with write access to the project (project write covers its assessments)', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `t-${a.id}` } });
    const res = await grant(org.manager.token, `assessments/${a.id}`, { team_id: team.id, access: 'write' });
    expect(res.status).toBe(201);
  });
});

describe('who may manage access', () => {
  it('refuses members with 403 naming assessments:manage_access', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'write');
    for (const req of [
      api().get(`/api/v1/projects/${p.id}/access`),
      api().post(`/api/v1/projects/${p.id}/access`).send({ user_id: org.member.id, access: 'write' }),
      api().delete(`/api/v1/projects/${p.id}/access/grant_00000000000000000000000000`),
    ]) {
      const res = await req.set(bearer(org.member.token));
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('assessments:manage_access');
    }
  });

  it('needs write access to the target: read grant 403, no grant 404', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    expect((await grant(org.manager.token, `projects/${p.id}`, { user_id: org.manager.id, access: 'write' })).status).toBe(404);
    expect((await grant(org.manager.token, `assessments/${a.id}`, { user_id: org.manager.id, access: 'write' })).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await grant(org.manager.token, `projects/${p.id}`, { user_id: org.manager.id, access: 'write' })).status).toBe(403);
    expect((await grant(org.manager.token, `assessments/${a.id}`, { user_id: org.manager.id, access: 'write' })).status).toBe(403);
    expect((await api().get(`/api/v1/projects/${p.id}/access`).set(bearer(org.manager.token))).status).toBe(403);
    const grants = await h.deps.prisma.accessGrant.findMany({ where: { OR: [{ projectId: p.id }, { assessmentId: a.id }] } });
    expect(grants.map((g) => g.access)).toEqual(['read']);
  });
});

describe('grant bodies and subjects', () => {
  it('nobody grants themselves access: a manager with write through a team keeps none once they leave it (403, nothing stored)', async () => {
    const p = await insertProject(h, org.id);
    const team = await api().post('/api/v1/teams').set(bearer(org.admin.token)).send({ name: `self-${p.id}` });
    await api().put(`/api/v1/teams/${team.body.id}/members/${org.manager.id}`).set(bearer(org.admin.token));
    expect((await grant(org.admin.token, `projects/${p.id}`, { team_id: team.body.id, access: 'write' })).status).toBe(201);

    const own = await grant(org.manager.token, `projects/${p.id}`, { user_id: org.manager.id, access: 'write' });
    expect(own.status).toBe(403);
    expect(own.body).toEqual({ detail: 'You cannot grant access to yourself: ask someone else who may manage access.' });
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: p.id, userId: org.manager.id } })).toBe(0);
    // An admin, about to be demoted, cannot keep write on a project that way either.
    expect((await grant(org.admin.token, `projects/${p.id}`, { user_id: org.admin.id, access: 'write' })).status).toBe(403);

    await api().delete(`/api/v1/teams/${team.body.id}/members/${org.manager.id}`).set(bearer(org.admin.token));
    expect(await status(org.manager.token, 'get', `projects/${p.id}`)).toBe(404);
  });

  it('nor through a team: not to a team one is in, and nobody adds themselves to a team (403 each); a demoted admin keeps no write', async () => {
    const p = await insertProject(h, org.id);
    const admin = await createUserInOrg(h, org.id, 'admin', 'team-self-admin');
    const team = await api().post('/api/v1/teams').set(bearer(admin.token)).send({ name: `own-${p.id}` });
    expect(team.status).toBe(201);
    const join = await api().put(`/api/v1/teams/${team.body.id}/members/${admin.id}`).set(bearer(admin.token));
    expect(join.status).toBe(403);
    expect(join.body).toEqual({ detail: 'You cannot add yourself to a team: ask someone else who may manage team members.' });

    // Put in the team by someone else, the admin may not grant it access.
    expect((await api().put(`/api/v1/teams/${team.body.id}/members/${admin.id}`).set(bearer(org.admin.token))).status).toBe(200);
    const viaTeam = await grant(admin.token, `projects/${p.id}`, { team_id: team.body.id, access: 'write' });
    expect(viaTeam.status).toBe(403);
    expect(viaTeam.body).toEqual({ detail: 'You cannot grant access to a team you are in: ask someone else who may manage access.' });
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: p.id } })).toBe(0);

    // Demoted to member, the admin reads and writes nothing of the project.
    expect((await api().patch(`/api/v1/members/${admin.id}`).set(bearer(org.owner.token)).send({ role: 'member' })).status).toBe(200);
    expect(await status(admin.token, 'get', `projects/${p.id}`)).toBe(404);
  });

  it('takes exactly one of user_id and team_id, and access read or write (400 otherwise)', async () => {
    const p = await insertProject(h, org.id);
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `t-${p.id}` } });
    for (const body of [
      { access: 'read' },
      { user_id: org.member.id, team_id: team.id, access: 'read' },
      { user_id: org.member.id, access: 'admin' },
      { user_id: org.member.id },
    ]) {
      const res = await grant(org.admin.token, `projects/${p.id}`, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: p.id } })).toBe(0);
  });

  it('answers 404 for a user or team of another organization, or unknown ones', async () => {
    const p = await insertProject(h, org.id);
    const theirTeam = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: otherOrg.id, name: 'theirs' } });
    for (const body of [
      { user_id: otherOrg.member.id, access: 'read' },
      { team_id: theirTeam.id, access: 'read' },
      { user_id: 'usr_00000000000000000000000000', access: 'read' },
      { team_id: 'bogus', access: 'read' },
    ]) {
      expect((await grant(org.admin.token, `projects/${p.id}`, body)).status).toBe(404);
    }
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: p.id } })).toBe(0);
  });

  it('answers 404 for unknown targets', async () => {
    expect((await grant(org.admin.token, 'projects/prj_00000000000000000000000000', { user_id: org.member.id, access: 'read' })).status).toBe(404);
    expect((await grant(org.admin.token, 'assessments/nope', { user_id: org.member.id, access: 'read' })).status).toBe(404);
  });
});

describe('the audit log', () => {
  const removeGrant = (token: string, path: string, id: string) => api().delete(`/api/v1/${path}/access/${id}`).set(bearer(token));
  const entriesOn = (targetId: string, token = org.admin.token) => auditLog(h, token, { target_id: targetId });

  it('records a grant given, its level changed and its removal (actor, target, metadata); repeats record nothing', async () => {
    const p = await insertProject(h, org.id);
    const first = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'read' });
    expect(first.status).toBe(201);
    const subject = { grant_id: first.body.id, subject_type: 'user', user_id: org.member.id };
    const actor = { actor_type: 'user', actor_id: org.admin.id, actor_label: org.admin.email };
    expect(await entriesOn(p.id)).toEqual([
      expect.objectContaining({ action: 'access_grant.created', ...actor, target_type: 'project', target_id: p.id, metadata: { ...subject, access: 'read' } }),
    ]);

    expect((await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'read' })).status).toBe(200);
    expect(await entriesOn(p.id)).toHaveLength(1);

    expect((await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'write' })).status).toBe(200);
    expect((await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'write' })).status).toBe(200);
    const [updated] = await entriesOn(p.id);
    expect(updated).toMatchObject({ action: 'access_grant.updated', ...actor, target_type: 'project', target_id: p.id });
    expect(updated.metadata).toEqual({ ...subject, previous_access: 'read', access: 'write' });

    expect((await removeGrant(org.admin.token, `projects/${p.id}`, first.body.id)).status).toBe(204);
    expect((await removeGrant(org.admin.token, `projects/${p.id}`, first.body.id)).status).toBe(404);
    const entries = await entriesOn(p.id);
    expect(entries.map((e) => e.action)).toEqual(['access_grant.deleted', 'access_grant.updated', 'access_grant.created']);
    expect(entries[0]).toMatchObject({ ...actor, target_type: 'project', target_id: p.id, metadata: { ...subject, access: 'write' } });
  });

  it("names an assessment and a team, and the manager who acted", async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `t-${a.id}` } });
    const res = await grant(org.manager.token, `assessments/${a.id}`, { team_id: team.id, access: 'read' });
    expect(res.status).toBe(201);
    expect((await removeGrant(org.manager.token, `assessments/${a.id}`, res.body.id)).status).toBe(204);
    const metadata = { grant_id: res.body.id, subject_type: 'team', team_id: team.id, access: 'read' };
    const common = { actor_type: 'user', actor_id: org.manager.id, actor_label: org.manager.email, target_type: 'assessment', target_id: a.id, metadata };
    expect(await entriesOn(a.id)).toEqual([
      expect.objectContaining({ action: 'access_grant.deleted', ...common }),
      expect.objectContaining({ action: 'access_grant.created', ...common }),
    ]);
  });

  it('records one deletion of a grant deleted twice at once (the other 404)', async () => {
    const p = await insertProject(h, org.id);
    const g = await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'read');
    const statuses = await Promise.all([1, 2, 3].map(() => removeGrant(org.admin.token, `projects/${p.id}`, g.id).then((r) => r.status)));
    expect(statuses.sort()).toEqual([204, 404, 404]);
    expect(await entriesOn(p.id)).toEqual([expect.objectContaining({ action: 'access_grant.deleted', metadata: expect.objectContaining({ grant_id: g.id }) })]);
  });

  it('records one creation, and only real changes of level, under concurrent grants', async () => {
    const p = await insertProject(h, org.id);
    const levels = ['read', 'write', 'write', 'read', 'read', 'write'];
    await Promise.all(levels.map((access) => grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access })));
    const entries = await entriesOn(p.id);
    const created = entries.filter((e) => e.action === 'access_grant.created');
    const updates = entries.filter((e) => e.action !== 'access_grant.created');
    expect(created).toHaveLength(1);
    expect(updates.every((e) => e.action === 'access_grant.updated' && e.metadata!.previous_access !== e.metadata!.access)).toBe(true);
    // The changes recorded lead from the level first given to the one stored.
    const ups = (to: string) => updates.filter((e) => e.metadata!.access === to).length;
    const row = await h.deps.prisma.accessGrant.findFirstOrThrow({ where: { projectId: p.id } });
    const level = (access: unknown) => (access === 'write' ? 1 : 0);
    expect(ups('write') - ups('read')).toBe(level(row.access) - level(created[0].metadata!.access));
  });

  it('records nothing for refused or failed requests', async () => {
    const p = await insertProject(h, org.id);
    const g = await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'read');
    const theirTeam = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: otherOrg.id, name: `theirs-${p.id}` } });
    // A member (no assessments:manage_access), a manager without a grant (404) and with a read grant (403).
    expect((await grant(org.member.token, `projects/${p.id}`, { user_id: org.member.id, access: 'write' })).status).toBe(403);
    expect((await removeGrant(org.member.token, `projects/${p.id}`, g.id)).status).toBe(403);
    expect((await grant(org.manager.token, `projects/${p.id}`, { user_id: org.member.id, access: 'write' })).status).toBe(404);
    expect((await removeGrant(org.manager.token, `projects/${p.id}`, g.id)).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await grant(org.manager.token, `projects/${p.id}`, { user_id: org.member.id, access: 'write' })).status).toBe(403);
    expect((await removeGrant(org.manager.token, `projects/${p.id}`, g.id)).status).toBe(403);
    // Another organization's admin, and subjects of another organization.
    expect((await grant(otherOrg.admin.token, `projects/${p.id}`, { user_id: otherOrg.member.id, access: 'write' })).status).toBe(404);
    expect((await removeGrant(otherOrg.admin.token, `projects/${p.id}`, g.id)).status).toBe(404);
    const theirProject = await insertProject(h, otherOrg.id);
    expect((await removeGrant(otherOrg.admin.token, `projects/${theirProject.id}`, g.id)).status).toBe(404);
    expect((await grant(org.admin.token, `projects/${p.id}`, { user_id: otherOrg.member.id, access: 'write' })).status).toBe(404);
    expect((await grant(org.admin.token, `projects/${p.id}`, { team_id: theirTeam.id, access: 'write' })).status).toBe(404);
    expect(await entriesOn(p.id)).toEqual([]);
    expect(await entriesOn(p.id, otherOrg.admin.token)).toEqual([]);
    expect((await h.deps.prisma.accessGrant.findUniqueOrThrow({ where: { id: g.id } })).access).toBe('read');
  });

  it("keeps one organization's grant entries out of another's log", async () => {
    const p = await insertProject(h, org.id);
    const res = await grant(org.admin.token, `projects/${p.id}`, { user_id: org.member.id, access: 'read' });
    expect(res.status).toBe(201);
    expect(await entriesOn(p.id)).toHaveLength(1);
    for (const action of ['access_grant.created', 'access_grant.updated', 'access_grant.deleted']) {
      const theirs = await auditLog(h, otherOrg.admin.token, { action });
      expect(theirs.filter((e) => e.target_id === p.id || e.metadata?.grant_id === res.body.id)).toEqual([]);
    }
    expect(await entriesOn(p.id, otherOrg.admin.token)).toEqual([]);
  });

  it('answers 404 (not 409 from the foreign key) and records nothing for a team being deleted meanwhile', async () => {
    const p = await insertProject(h, org.id);
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: org.id, name: `t-${p.id}` } });
    const res = await sentWhileHeld(h, [['DELETE FROM teams WHERE id = $1', [team.id]]], () =>
      grant(org.admin.token, `projects/${p.id}`, { team_id: team.id, access: 'read' }),
    );
    expect(res.status).toBe(404);
    expect(await entriesOn(p.id)).toEqual([]);
  });

  it('gives nothing, and records nothing, to somebody being removed from the organization meanwhile (404)', async () => {
    const p = await insertProject(h, org.id);
    const leaving = await createUserInOrg(h, org.id, 'member', 'leaving');
    const res = await sentWhileHeld(h, [['DELETE FROM memberships WHERE organization_id = $1 AND user_id = $2', [org.id, leaving.id]]], () =>
      grant(org.admin.token, `projects/${p.id}`, { user_id: leaving.id, access: 'read' }),
    );
    expect(res.status).toBe(404);
    expect(await h.deps.prisma.accessGrant.count({ where: { userId: leaving.id } })).toBe(0);
    expect(await entriesOn(p.id)).toEqual([]);
  });
});
