import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertGrant, insertProject, type TestOrg } from './support/fixtures';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);
const create = (token: string, projectId: string, body: Record<string, unknown> = { name: 'Pentest Q1' }) =>
  api().post(`/api/v1/projects/${projectId}/assessments`).set(bearer(token)).send(body);
const listIds = async (token: string, query = '') => {
  const res = await api().get(`/api/v1/assessments?limit=100${query}`).set(bearer(token));
  expect(res.status).toBe(200);
  return (res.body.data.map((a: { id: string }) => a.id) as string[]).sort();
};

describe('POST /projects/{id}/assessments', () => {
  it('creates a draft assessment in the project', async () => {
    const p = await insertProject(h, org.id);
    const res = await create(org.admin.token, p.id);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^asm_[0-9a-z]{26}$/),
      project_id: p.id,
      name: 'Pentest Q1',
      description: null,
      status: 'draft',
      archived: false,
      archived_at: null,
      notes: null,
      settings: null,
      summary: null,
      failure_reason: null,
      created_by_id: org.admin.id,
      queued_at: null,
      started_at: null,
      finished_at: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const row = await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.organizationId).toBe(org.id);
  });

  it('lets a manager with write access to the project create, without an extra grant', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'write');
    const res = await create(org.manager.token, p.id);
    expect(res.status).toBe(201);
    expect(await h.deps.prisma.accessGrant.count({ where: { assessmentId: res.body.id } })).toBe(0);
    expect((await api().get(`/api/v1/assessments/${res.body.id}`).set(bearer(org.manager.token))).status).toBe(200);
  });

  it('needs write access to the project: read grant 403, no grant 404', async () => {
    const p = await insertProject(h, org.id);
    expect((await create(org.manager.token, p.id)).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await create(org.manager.token, p.id)).status).toBe(403);
    expect(await h.deps.prisma.assessment.count({ where: { projectId: p.id } })).toBe(0);
  });

  it('refuses members with 403 naming assessments:create', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'write');
    const res = await create(org.member.token, p.id);
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('assessments:create');
  });

  it('refuses to add an assessment to an archived project (409)', async () => {
    const p = await insertProject(h, org.id);
    await h.deps.prisma.project.update({ where: { id: p.id }, data: { archivedAt: new Date() } });
    expect((await create(org.admin.token, p.id)).status).toBe(409);
    expect(await h.deps.prisma.assessment.count({ where: { projectId: p.id } })).toBe(0);
  });

  it('answers 404 for an unknown project and 400 for a malformed body', async () => {
    expect((await create(org.admin.token, 'prj_00000000000000000000000000')).status).toBe(404);
    const p = await insertProject(h, org.id);
    expect((await create(org.admin.token, p.id, {})).status).toBe(400);
    expect((await create(org.admin.token, p.id, { name: 'x', status: 'running' })).status).toBe(400);
  });
});

describe('GET /assessments and /assessments/{id}', () => {
  it('lists what the principal can read: project grants cover their assessments, assessment grants only themselves', async () => {
    const t = await createOrg(h);
    const p1 = await insertProject(h, t.id);
    const p2 = await insertProject(h, t.id);
    const a1 = await insertAssessment(h, t.id, p1.id);
    const a2 = await insertAssessment(h, t.id, p1.id);
    const b1 = await insertAssessment(h, t.id, p2.id);
    const b2 = await insertAssessment(h, t.id, p2.id);
    await insertGrant(h, t.id, { projectId: p1.id }, { userId: t.member.id }, 'read');
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: t.id, name: 'red' } });
    await h.deps.prisma.teamMember.create({ data: { teamId: team.id, userId: t.member.id } });
    await insertGrant(h, t.id, { assessmentId: b1.id }, { teamId: team.id }, 'read');

    expect(await listIds(t.admin.token)).toEqual([a1.id, a2.id, b1.id, b2.id].sort());
    expect(await listIds(t.member.token)).toEqual([a1.id, a2.id, b1.id].sort());
    expect(await listIds(t.manager.token)).toEqual([]);
    expect(await listIds(t.member.token, `&project_id=${p2.id}`)).toEqual([b1.id]);
    expect(await listIds(t.admin.token, `&project_id=${p1.id}`)).toEqual([a1.id, a2.id].sort());
    expect(await listIds(t.admin.token, '&project_id=nonsense')).toEqual([]);

    const got = await api().get(`/api/v1/assessments/${b1.id}`).set(bearer(t.member.token));
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: b1.id, project_id: p2.id, status: 'draft' });
    expect((await api().get(`/api/v1/assessments/${b2.id}`).set(bearer(t.member.token))).status).toBe(404);
    expect((await api().get(`/api/v1/assessments/${a1.id}`).set(bearer(t.manager.token))).status).toBe(404);
  });

  it('paginates', async () => {
    const t = await createOrg(h);
    const p = await insertProject(h, t.id);
    for (let i = 0; i < 3; i++) expect((await create(t.owner.token, p.id, { name: `a${i}` })).status).toBe(201);
    const first = await api().get('/api/v1/assessments?limit=2').set(bearer(t.owner.token));
    expect(first.body.data).toHaveLength(2);
    expect(first.body.data[0].name).toBe('a2');
    const second = await api().get(`/api/v1/assessments?limit=2&cursor=${first.body.next_cursor}`).set(bearer(t.owner.token));
    expect(second.body.data.map((a: { name: string }) => a.name)).toEqual(['a0']);
    expect(second.body.next_cursor).toBeNull();
    expect((await api().get('/api/v1/assessments?limit=101').set(bearer(t.owner.token))).status).toBe(400);
  });

  it('needs assessments:read (an API key without it gets 403 naming it)', async () => {
    const key = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: 'k', scopes: ['projects:read'] });
    const res = await api().get('/api/v1/assessments').set(bearer(key.body.key));
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('assessments:read');
  });

  it('answers 404 for unknown and malformed ids', async () => {
    for (const id of ['asm_00000000000000000000000000', 'nope']) {
      expect((await api().get(`/api/v1/assessments/${id}`).set(bearer(org.owner.token))).status).toBe(404);
    }
  });
});

// Text that PostgreSQL jsonb cannot hold reached the database and answered 500: U+0000 in a key (a value's NUL is
// refused the same way), and a lone UTF-16 surrogate, which JSON allows ("\ud800" alone) and JavaScript keeps but
// jsonb refuses as an escape (22P02).
describe.each([
  {
    what: 'a NUL character in a key',
    detail: 'NUL',
    settings: ['{"name":"nul key","settings":{"nested":{"a\\u0000b":1}}}'],
    summary: '{"summary":{"k\\u0000":1}}',
  },
  {
    what: 'a lone UTF-16 surrogate in a value or a key',
    detail: 'surrogate',
    settings: ['{"name":"lone","settings":{"a":"x\\ud800"}}', '{"name":"lone","settings":{"a\\udc00":1}}'],
    summary: '{"summary":{"k":"\\ud83d"}}',
  },
])('$what of settings or summary', ({ detail, settings, summary }) => {
  it('creating with such settings answers 400 with the envelope and creates nothing', async () => {
    const p = await insertProject(h, org.id);
    for (const body of settings) {
      const res = await api()
        .post(`/api/v1/projects/${p.id}/assessments`)
        .set(bearer(org.admin.token))
        .set('Content-Type', 'application/json')
        .send(body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.stringContaining(detail) });
    }
    expect(await h.deps.prisma.assessment.count({ where: { projectId: p.id } })).toBe(0);
  });

  it('completing with such a summary answers 400 and leaves the assessment running', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessment(h, org.id, p.id);
    await h.deps.prisma.assessment.update({ where: { id: a.id }, data: { status: 'running' } });
    const res = await api()
      .post(`/api/v1/assessments/${a.id}/complete`)
      .set(bearer(org.admin.token))
      .set('Content-Type', 'application/json')
      .send(summary);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringContaining(detail) });
    const row = await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: a.id } });
    expect(row.status).toBe('running');
    expect(row.summary).toBeNull();
  });
});

describe('a lone UTF-16 surrogate in a plain text field', () => {
  it('a lone surrogate in a plain text field (project name) answers 400, nothing created', async () => {
    const before = await h.deps.prisma.project.count({ where: { organizationId: org.id } });
    const res = await api()
      .post('/api/v1/projects')
      .set(bearer(org.admin.token))
      .set('Content-Type', 'application/json')
      .send('{"name":"lone \\ud800 name"}');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.stringContaining('surrogate') });
    expect(await h.deps.prisma.project.count({ where: { organizationId: org.id } })).toBe(before);
  });
});
