import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { eraseProjectHistory } from '../src/modules/history-deletion/history-deletion.service';
import { bearer, createOrg, createUserInOrg, insertAssessment, insertGrant, insertProject, type TestOrg } from './support/fixtures';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);
const listIds = async (token: string, query = '') => {
  const res = await api().get(`/api/v1/projects?limit=100${query}`).set(bearer(token));
  expect(res.status).toBe(200);
  return res.body.data.map((p: { id: string }) => p.id) as string[];
};

describe('POST /projects', () => {
  it('creates a project for an admin without any grant (admins reach everything)', async () => {
    const res = await api().post('/api/v1/projects').set(bearer(org.admin.token)).send({ name: 'Web app', description: 'The shop' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^prj_[0-9a-z]{26}$/),
      name: 'Web app',
      description: 'The shop',
      archived: false,
      archived_at: null,
      source: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(await h.deps.prisma.accessGrant.count({ where: { projectId: res.body.id } })).toBe(0);
    expect(await h.deps.prisma.project.count({ where: { id: res.body.id, organizationId: org.id } })).toBe(1);
  });

  it('gives a manager who creates a project a write grant on it', async () => {
    const manager = await createUserInOrg(h, org.id, 'manager', 'creator');
    const res = await api().post('/api/v1/projects').set(bearer(manager.token)).send({ name: 'Mobile' });
    expect(res.status).toBe(201);
    const grants = await h.deps.prisma.accessGrant.findMany({ where: { projectId: res.body.id } });
    expect(grants).toEqual([
      expect.objectContaining({ organizationId: org.id, userId: manager.id, teamId: null, assessmentId: null, access: 'write' }),
    ]);
    expect(await listIds(manager.token)).toEqual([res.body.id]);
    const patch = await api().patch(`/api/v1/projects/${res.body.id}`).set(bearer(manager.token)).send({ name: 'Mobile v2' });
    expect(patch.status).toBe(200);
    expect(patch.body.name).toBe('Mobile v2');
  });

  it('refuses members with 403 naming projects:create', async () => {
    const before = await h.deps.prisma.project.count({ where: { organizationId: org.id } });
    const res = await api().post('/api/v1/projects').set(bearer(org.member.token)).send({ name: 'nope' });
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('projects:create');
    expect(await h.deps.prisma.project.count({ where: { organizationId: org.id } })).toBe(before);
  });

  it('rejects malformed bodies with 400', async () => {
    for (const body of [{}, { name: '' }, { name: 'x', description: 5 }, { name: 'x', owner: 'me' }]) {
      expect((await api().post('/api/v1/projects').set(bearer(org.admin.token)).send(body)).status).toBe(400);
    }
  });
});

describe('reading projects', () => {
  it('lists only readable projects: all for admins, granted ones (direct or through a team) for others', async () => {
    const t = await createOrg(h);
    const [p1, p2, p3] = [await insertProject(h, t.id), await insertProject(h, t.id), await insertProject(h, t.id)];
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: t.id, name: 'ops' } });
    await h.deps.prisma.teamMember.create({ data: { teamId: team.id, userId: t.member.id } });
    await insertGrant(h, t.id, { projectId: p1.id }, { userId: t.member.id }, 'read');
    await insertGrant(h, t.id, { projectId: p2.id }, { teamId: team.id }, 'read');
    // An assessment grant alone does not make the project listable.
    const a3 = await insertAssessment(h, t.id, p3.id);
    await insertGrant(h, t.id, { assessmentId: a3.id }, { userId: t.member.id }, 'read');

    expect((await listIds(t.admin.token)).sort()).toEqual([p1.id, p2.id, p3.id].sort());
    expect((await listIds(t.owner.token)).sort()).toEqual([p1.id, p2.id, p3.id].sort());
    expect((await listIds(t.member.token)).sort()).toEqual([p1.id, p2.id].sort());
    expect(await listIds(t.manager.token)).toEqual([]);

    expect((await api().get(`/api/v1/projects/${p1.id}`).set(bearer(t.member.token))).body.id).toBe(p1.id);
    expect((await api().get(`/api/v1/projects/${p2.id}`).set(bearer(t.member.token))).status).toBe(200);
    expect((await api().get(`/api/v1/projects/${p3.id}`).set(bearer(t.member.token))).status).toBe(404);
    expect((await api().get(`/api/v1/projects/${p1.id}`).set(bearer(t.manager.token))).status).toBe(404);
  });

  it('paginates newest first', async () => {
    const t = await createOrg(h);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await api().post('/api/v1/projects').set(bearer(t.owner.token)).send({ name: `p${i}` })).body.id);
    const first = await api().get('/api/v1/projects?limit=2').set(bearer(t.owner.token));
    expect(first.body.data.map((p: { id: string }) => p.id)).toEqual([ids[2], ids[1]]);
    const second = await api().get(`/api/v1/projects?limit=2&cursor=${first.body.next_cursor}`).set(bearer(t.owner.token));
    expect(second.body).toEqual({ data: [expect.objectContaining({ id: ids[0] })], next_cursor: null });
  });

  it('answers 404 for unknown and malformed ids', async () => {
    for (const id of ['prj_00000000000000000000000000', 'nope', '%20']) {
      const res = await api().get(`/api/v1/projects/${id}`).set(bearer(org.owner.token));
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });
});

describe('PATCH /projects/{id}', () => {
  it('edits metadata and archives and unarchives', async () => {
    const p = await insertProject(h, org.id);
    const edit = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token)).send({ name: 'Renamed', description: 'd' });
    expect(edit.status).toBe(200);
    expect(edit.body).toMatchObject({ id: p.id, name: 'Renamed', description: 'd', archived: false });

    const archived = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token)).send({ archived: true });
    expect(archived.status).toBe(200);
    expect(archived.body.archived).toBe(true);
    expect(archived.body.archived_at).toEqual(expect.any(String));
    expect((await h.deps.prisma.project.findUniqueOrThrow({ where: { id: p.id } })).archivedAt).toBeInstanceOf(Date);
    expect(await listIds(org.admin.token, '&archived=true')).toContain(p.id);
    expect(await listIds(org.admin.token, '&archived=false')).not.toContain(p.id);

    // Archiving again keeps the first archive time.
    const again = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token)).send({ archived: true });
    expect(again.body.archived_at).toBe(archived.body.archived_at);

    const unarchived = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token)).send({ archived: false });
    expect(unarchived.body).toMatchObject({ archived: false, archived_at: null, name: 'Renamed' });
    expect((await h.deps.prisma.project.findUniqueOrThrow({ where: { id: p.id } })).archivedAt).toBeNull();
    expect(await listIds(org.admin.token, '&archived=false')).toContain(p.id);
  });

  it('needs projects:update (members: 403) and write access (read grant: 403, none: 404)', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'write');
    const member = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.member.token)).send({ archived: true });
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('projects:update');

    expect((await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token)).send({ archived: true })).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    const readOnly = await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token)).send({ archived: true });
    expect(readOnly.status).toBe(403);
    expect(readOnly.body.detail).toContain('Write access');
    expect((await h.deps.prisma.project.findUniqueOrThrow({ where: { id: p.id } })).archivedAt).toBeNull();
  });

  it('rejects malformed bodies with 400', async () => {
    const p = await insertProject(h, org.id);
    for (const body of [{}, { archived: 'yes' }, { name: '' }, { status: 'x' }]) {
      expect((await api().patch(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token)).send(body)).status).toBe(400);
    }
  });
});

describe('DELETE /projects/{id}', () => {
  it('deletes the project with its assessments and grants', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'read');
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.member.id }, 'read');
    const res = await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token));
    expect(res.status).toBe(204);
    expect(await h.deps.prisma.project.count({ where: { id: p.id } })).toBe(0);
    expect(await h.deps.prisma.assessment.count({ where: { id: a.id } })).toBe(0);
    expect(await h.deps.prisma.accessGrant.count({ where: { OR: [{ projectId: p.id }, { assessmentId: a.id }] } })).toBe(0);
    expect((await api().get(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.admin.token))).status).toBe(404);
  });

  it('needs projects:delete (members: 403) and write access (managers with a read grant: 403)', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'write');
    const member = await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.member.token));
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('projects:delete');
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token))).status).toBe(403);
    expect(await h.deps.prisma.project.count({ where: { id: p.id } })).toBe(1);
  });

  // SPEC's role table: managers have every project scope but not assessments:delete. Deleting a project deletes its
  // assessments and their findings, so a project that has any needs that scope too.
  it('refuses a manager a project that has assessments: 403 naming assessments:delete, nothing deleted', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    const res = await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: expect.stringContaining('assessments:delete') });
    expect(await h.deps.prisma.project.count({ where: { id: p.id } })).toBe(1);
    expect(await h.deps.prisma.assessment.count({ where: { id: a.id } })).toBe(1);
    // Once its assessments are gone (by someone who may delete them), the manager may delete the project.
    expect((await api().delete(`/api/v1/assessments/${a.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token))).status).toBe(204);
  });

  it('asks the same of an API key: projects:delete alone deletes an empty project only', async () => {
    const mint = async (scopes: string[]) => {
      const res = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: `delete ${scopes.join(' ')}`, scopes });
      expect(res.status).toBe(201);
      return res.body.key as string;
    };
    const projectsOnly = await mint(['projects:read', 'projects:delete']);
    const both = await mint(['projects:read', 'projects:delete', 'assessments:delete']);
    const p = await insertProject(h, org.id);
    await insertAssessment(h, org.id, p.id);
    const refused = await api().delete(`/api/v1/projects/${p.id}`).set(bearer(projectsOnly));
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toContain('assessments:delete');
    expect(await h.deps.prisma.project.count({ where: { id: p.id } })).toBe(1);
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(both))).status).toBe(204);
    const empty = await insertProject(h, org.id);
    expect((await api().delete(`/api/v1/projects/${empty.id}`).set(bearer(projectsOnly))).status).toBe(204);
  });

  // Deleting a project deletes its webhook subscriptions (project and assessment level) and their delivery history;
  // SPEC's role table gives managers no webhook access, so a project with live subscriptions needs webhooks:delete.
  const subscribeTo = async (projectId: string, owner: TestOrg = org) => {
    const sub = await api().post(`/api/v1/projects/${projectId}/webhooks/subscriptions`).set(bearer(owner.admin.token))
      .send({ name: 'SIEM', url: 'https://203.0.114.10/hooks', events: ['finding.created'] });
    expect(sub.status).toBe(201);
    const event = await h.deps.prisma.event.create({ data: { id: newId('event'), organizationId: owner.id, type: 'finding.created', projectId, data: {} } });
    await h.deps.prisma.webhookDelivery.create({
      data: { id: newId('whdel'), organizationId: owner.id, subscriptionId: sub.body.id, eventId: event.id, eventType: event.type, payload: {}, payloadFormat: 'json', status: 'succeeded' },
    });
    return sub.body.id as string;
  };
  const untouched = async (projectId: string, subscriptionId: string) => {
    expect(await h.deps.prisma.project.count({ where: { id: projectId } })).toBe(1);
    expect(await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: subscriptionId } })).toMatchObject({ deletedAt: null });
    expect(await h.deps.prisma.webhookDelivery.count({ where: { subscriptionId } })).toBe(1);
  };

  it('refuses a manager a project with webhook subscriptions: 403 naming webhooks:delete, the subscriptions and their history kept', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    const subscription = await subscribeTo(p.id);
    const res = await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token));
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ detail: 'Missing required scope: webhooks:delete. Deleting this project would delete its 1 webhook subscription.' });
    await untouched(p.id, subscription);
    // Once an admin has deleted the subscription, the manager may delete the project.
    expect((await api().delete(`/api/v1/projects/${p.id}/webhooks/subscriptions/${subscription}`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token))).status).toBe(204);
    expect(await h.deps.prisma.project.count({ where: { id: p.id } })).toBe(0);
  });

  it('asks the same of an API key, for a project and for an assessment with subscriptions', async () => {
    const mint = async (scopes: string[]) => {
      const res = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: `delete ${scopes.join(' ')}`, scopes });
      expect(res.status).toBe(201);
      return res.body.key as string;
    };
    const withoutWebhooks = await mint(['projects:read', 'projects:delete', 'assessments:read', 'assessments:delete']);
    const withWebhooks = await mint(['projects:read', 'projects:delete', 'assessments:read', 'assessments:delete', 'webhooks:delete']);
    const p = await insertProject(h, org.id);
    const subscription = await subscribeTo(p.id);
    const refused = await api().delete(`/api/v1/projects/${p.id}`).set(bearer(withoutWebhooks));
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toContain('webhooks:delete');
    await untouched(p.id, subscription);

    const a = await insertAssessment(h, org.id, p.id);
    const onAssessment = await api().post(`/api/v1/assessments/${a.id}/webhooks/subscriptions`).set(bearer(org.admin.token))
      .send({ name: 'Assessment hook', url: 'https://203.0.114.10/assessment', events: ['finding.created'] });
    expect(onAssessment.status).toBe(201);
    const refusedAssessment = await api().delete(`/api/v1/assessments/${a.id}`).set(bearer(withoutWebhooks));
    expect(refusedAssessment.status).toBe(403);
    expect(refusedAssessment.body).toEqual({ detail: 'Missing required scope: webhooks:delete. Deleting this assessment would delete its 1 webhook subscription.' });
    expect(await h.deps.prisma.assessment.count({ where: { id: a.id } })).toBe(1);
    expect(await h.deps.prisma.webhookSubscription.count({ where: { id: onAssessment.body.id, deletedAt: null } })).toBe(1);

    expect((await api().delete(`/api/v1/assessments/${a.id}`).set(bearer(withWebhooks))).status).toBe(204);
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(withWebhooks))).status).toBe(204);
    expect(await h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: subscription } })).toBe(0);
  });

  it('a manager\'s deletion erases only deleted subscriptions\' history first: one created meanwhile keeps its deliveries when the deletion then refuses', async () => {
    const p = await insertProject(h, org.id);
    const gone = await subscribeTo(p.id);
    expect((await api().delete(`/api/v1/projects/${p.id}/webhooks/subscriptions/${gone}`).set(bearer(org.admin.token))).status).toBe(204);
    // What the deletion's first step does for a caller without webhooks:delete, with a subscription created after its check.
    const created = await subscribeTo(p.id);
    await eraseProjectHistory(h.deps.prisma, org.id, p.id, { liveToo: false });
    expect(await h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: gone } })).toBe(0);
    await untouched(p.id, created);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token))).status).toBe(403);
    await untouched(p.id, created);
  });

  it("leaves another organization's project, subscriptions and history alone, whoever deletes what in the first", async () => {
    const other = await createOrg(h);
    const theirs = await insertProject(h, other.id);
    const theirSubscription = await subscribeTo(theirs.id, other);
    const ours = await insertProject(h, org.id);
    await subscribeTo(ours.id);
    // Not found from the first organization, by a manager or by its admin (who holds webhooks:delete).
    expect((await api().delete(`/api/v1/projects/${theirs.id}`).set(bearer(org.manager.token))).status).toBe(404);
    expect((await api().delete(`/api/v1/projects/${theirs.id}`).set(bearer(org.admin.token))).status).toBe(404);
    // The first organization's admin deleting its own project, subscriptions and history: the other's rows stay.
    expect((await api().delete(`/api/v1/projects/${ours.id}`).set(bearer(org.admin.token))).status).toBe(204);
    await untouched(theirs.id, theirSubscription);
  });

  it('lets a manager with a write grant delete', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    expect((await api().delete(`/api/v1/projects/${p.id}`).set(bearer(org.manager.token))).status).toBe(204);
    expect(await h.deps.prisma.project.count({ where: { id: p.id } })).toBe(0);
  });
});
