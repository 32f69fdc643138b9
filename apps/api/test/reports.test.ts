// Reports through the HTTP API: requesting one (202, pending, a render job per report), listing and reading,
// downloading (409 until ready, then an application/pdf attachment); scopes, access and cross-organization 404.
// The rendering itself, report.ready and the PDF's content are tested with the worker (apps/worker/test/report-job).
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { insertAssessmentIn } from './support/domain';

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let project: { id: string };
let completed: { id: string; organizationId: string; projectId: string; name: string };

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  project = await insertProject(h, org.id);
  completed = await insertAssessmentIn(h, org.id, project.id, 'completed');
});
afterAll(() => h.close());

const api = () => request(h.app);
const requestReport = (token: string, assessmentId: string, body: Record<string, unknown> = {}) =>
  api().post(`/api/v1/assessments/${assessmentId}/reports`).set(bearer(token)).send(body);

async function markReady(id: string, pdf = Buffer.from('%PDF-1.3\n% test document\n%%EOF\n')) {
  await h.deps.prisma.report.update({ where: { id }, data: { status: 'ready', pdf: new Uint8Array(pdf), sizeBytes: pdf.length, readyAt: new Date() } });
}

describe('POST /assessments/{id}/reports', () => {
  it('answers 202 with a pending report and enqueues its render job (job id = report id)', async () => {
    const res = await requestReport(org.admin.token, completed.id);
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^rpt_[0-9a-z]{26}$/),
      assessment_id: completed.id,
      project_id: project.id,
      title: `${completed.name}: security assessment report`,
      status: 'pending',
      size_bytes: null,
      error: null,
      requested_by_user_id: org.admin.id,
      created_at: expect.any(String),
      ready_at: null,
    });
    const job = await h.deps.reportQueue.getJob(res.body.id);
    expect(job?.name).toBe('render');
    expect(job?.data).toEqual({ reportId: res.body.id });
  });

  it('takes a title, and refuses a malformed one with 400', async () => {
    const res = await requestReport(org.admin.token, completed.id, { title: 'Q3 external pentest' });
    expect(res.status).toBe(202);
    expect(res.body.title).toBe('Q3 external pentest');
    expect((await requestReport(org.admin.token, completed.id, { title: 'x'.repeat(201) })).status).toBe(400);
    expect((await requestReport(org.admin.token, completed.id, { title: 42 })).status).toBe(400);
    expect((await requestReport(org.admin.token, completed.id, { unknown: true })).status).toBe(400);
  });

  it('works for running and finished assessments; 409 while the assessment is a draft or queued', async () => {
    for (const status of ['running', 'failed', 'cancelled', 'emergency_stopped']) {
      const a = await insertAssessmentIn(h, org.id, project.id, status);
      expect((await requestReport(org.admin.token, a.id)).status).toBe(202);
    }
    for (const status of ['draft', 'queued']) {
      const a = await insertAssessmentIn(h, org.id, project.id, status);
      const res = await requestReport(org.admin.token, a.id);
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain(status);
      expect(await h.deps.prisma.report.count({ where: { assessmentId: a.id } })).toBe(0);
    }
  });

  it('needs reports:generate (member: 403) and read access (a read grant is enough; none: 404)', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, p.id, 'completed');
    expect((await requestReport(org.manager.token, a.id)).status).toBe(404);
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.manager.id }, 'read');
    expect((await requestReport(org.manager.token, a.id)).status).toBe(202);
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.member.id }, 'read');
    const res = await requestReport(org.member.token, a.id);
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('reports:generate');
  });

  it("answers 404 for another organization's assessment, even to its owner role", async () => {
    const res = await requestReport(other.owner.token, completed.id);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ detail: 'Assessment not found.' });
  });
});

describe('GET /reports and /reports/{id}', () => {
  it('lists the reports of readable assessments, newest first, filtered by assessment and status', async () => {
    const a = await insertAssessmentIn(h, org.id, project.id, 'completed');
    const first = (await requestReport(org.admin.token, a.id)).body;
    const second = (await requestReport(org.admin.token, a.id)).body;
    await markReady(first.id);
    const all = await api().get(`/api/v1/reports?assessment_id=${a.id}`).set(bearer(org.admin.token));
    expect(all.status).toBe(200);
    expect(all.body.data.map((r: { id: string }) => r.id)).toEqual([second.id, first.id]);
    expect(all.body.next_cursor).toBeNull();
    const ready = await api().get(`/api/v1/reports?assessment_id=${a.id}&status=ready`).set(bearer(org.admin.token));
    expect(ready.body.data.map((r: { id: string }) => r.id)).toEqual([first.id]);
    expect(ready.body.data[0]).toMatchObject({ status: 'ready', size_bytes: expect.any(Number), ready_at: expect.any(String) });
    const page = await api().get(`/api/v1/reports?assessment_id=${a.id}&limit=1`).set(bearer(org.admin.token));
    expect(page.body.next_cursor).toBe(second.id);
    expect((await api().get('/api/v1/reports?status=done').set(bearer(org.admin.token))).status).toBe(400);
  });

  it('shows a member only the reports of assessments they can read', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, p.id, 'completed');
    const report = (await requestReport(org.admin.token, a.id)).body;
    const before = await api().get('/api/v1/reports?limit=100').set(bearer(org.member.token));
    expect(before.status).toBe(200);
    expect(before.body.data.map((r: { id: string }) => r.id)).not.toContain(report.id);
    expect((await api().get(`/api/v1/reports/${report.id}`).set(bearer(org.member.token))).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'read');
    const after = await api().get('/api/v1/reports?limit=100').set(bearer(org.member.token));
    expect(after.body.data.map((r: { id: string }) => r.id)).toContain(report.id);
    const one = await api().get(`/api/v1/reports/${report.id}`).set(bearer(org.member.token));
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: report.id, assessment_id: a.id, project_id: p.id, status: 'pending' });
    expect(one.body).not.toHaveProperty('pdf');
  });

  it('needs reports:read, and hides other organizations (404, empty list)', async () => {
    const report = (await requestReport(org.admin.token, completed.id)).body;
    const key = await request(h.app).post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: 'no reports', scopes: ['findings:read'] });
    const noScope = await api().get(`/api/v1/reports/${report.id}`).set(bearer(key.body.key));
    expect(noScope.status).toBe(403);
    expect(noScope.body.detail).toContain('reports:read');
    expect((await api().get('/api/v1/reports').set(bearer(key.body.key))).status).toBe(403);
    expect((await api().get(`/api/v1/reports/${report.id}`).set(bearer(other.owner.token))).status).toBe(404);
    const list = await api().get(`/api/v1/reports?assessment_id=${completed.id}`).set(bearer(other.owner.token));
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);
    expect((await api().get('/api/v1/reports/rpt_doesnotexist').set(bearer(org.admin.token))).status).toBe(404);
  });
});

describe('GET /reports/{id}/download', () => {
  it('is 409 while the report is pending and after its rendering failed', async () => {
    const report = (await requestReport(org.admin.token, completed.id)).body;
    const pending = await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(org.admin.token));
    expect(pending.status).toBe(409);
    expect(pending.body.detail).toMatch(/still being generated/);
    await h.deps.prisma.report.update({ where: { id: report.id }, data: { status: 'failed', error: 'The report could not be rendered.' } });
    const failed = await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(org.admin.token));
    expect(failed.status).toBe(409);
    const read = await api().get(`/api/v1/reports/${report.id}`).set(bearer(org.admin.token));
    expect(read.body).toMatchObject({ status: 'failed', error: 'The report could not be rendered.' });
  });

  it('sends a ready report as an application/pdf attachment', async () => {
    const report = (await requestReport(org.admin.token, completed.id, { title: 'Quarterly: web/API "review"' })).body;
    const pdf = Buffer.from('%PDF-1.3\nnot really a pdf, but bytes\n%%EOF\n');
    await markReady(report.id, pdf);
    const res = await api()
      .get(`/api/v1/reports/${report.id}/download`)
      .set(bearer(org.admin.token))
      .buffer(true)
      .parse((r, done) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => done(null, Buffer.concat(chunks)));
      });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.headers['content-disposition']).toBe('attachment; filename="Quarterly-webAPI-review.pdf"');
    expect(res.headers['content-length']).toBe(String(pdf.length));
    expect(Buffer.compare(res.body as Buffer, pdf)).toBe(0);
  });

  it('needs reports:download (member: 403) and read access; another organization gets 404', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, p.id, 'completed');
    const report = (await requestReport(org.admin.token, a.id)).body;
    await markReady(report.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'read');
    const member = await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(org.member.token));
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('reports:download');
    expect((await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(org.manager.token))).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(org.manager.token))).status).toBe(200);
    expect((await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(other.owner.token))).status).toBe(404);
  });
});

describe('an id holding a NUL character', () => {
  it('is refused with 400 and the envelope on every id route of reports, shares, findings, fix verifications and limits; nothing changes', async () => {
    // PostgreSQL text cannot hold U+0000: before, the id reached the query and every one of these answered 500.
    const report = (await requestReport(org.admin.token, completed.id)).body;
    await markReady(report.id);
    const calls: Array<[method: 'get' | 'post' | 'patch' | 'delete', path: string, body?: object]> = [
      ['get', '/reports/rpt_%00'],
      ['get', '/reports/rpt_%00/download'],
      ['get', '/reports/rpt_%00/shares'],
      ['delete', '/reports/rpt_%00/publication'],
      ['delete', `/reports/${report.id}/shares/rsh_%00`],
      ['get', '/findings/fnd_%00'],
      ['post', '/findings/fnd_%00/confirm', {}],
      ['post', '/findings/fnd_%00/reassign', { assignee_user_id: null }],
      ['get', '/findings/fnd_%00/fix-verifications'],
      ['get', '/fix-verifications/fxv_%00'],
      ['get', '/billing/limits/lim_%00'],
      ['patch', '/billing/limits/lim_%00', { credits: '1' }],
      ['delete', '/billing/limits/lim_%00'],
    ];
    for (const [method, path, body] of calls) {
      const req = api()[method](`/api/v1${path}`).set(bearer(org.owner.token));
      const res = body ? await req.send(body) : await req;
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 400, body: { detail: expect.stringContaining('NUL') } });
    }
    // Still authentication first: without a credential it is 401 as before.
    expect((await api().get('/api/v1/reports/rpt_%00')).status).toBe(401);
    expect((await api().get(`/api/v1/reports/${report.id}`).set(bearer(org.owner.token))).body.status).toBe('ready');
  });
});
