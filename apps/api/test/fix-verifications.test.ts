// Fix verification through the HTTP API: the engine starts a run on a finding and completes it with a result;
// `fix_verify.completed` is published with the change, and a `fixed` result moves the finding to fixed
// (finding.status_changed). Impossible steps are 409; scopes, access and cross-organization 404.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey, eventsOf, insertAssessmentIn, insertFinding } from './support/domain';

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let engine: string;
let assessment: { id: string; organizationId: string; projectId: string };

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  engine = await createKey(h, org.admin.token, ['assessments:update', 'findings:read']);
  const project = await insertProject(h, org.id);
  assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
});
afterAll(() => h.close());

const api = () => request(h.app);
const start = (token: string, findingId: string) => api().post(`/api/v1/findings/${findingId}/fix-verifications`).set(bearer(token)).send();
const complete = (token: string, id: string, body: Record<string, unknown>) =>
  api().post(`/api/v1/fix-verifications/${id}/complete`).set(bearer(token)).send(body);

describe('POST /findings/{id}/fix-verifications', () => {
  it('starts a running verification (201)', async () => {
    const finding = await insertFinding(h, assessment);
    const res = await start(engine, finding.id);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^fxv_[0-9a-z]{26}$/),
      finding_id: finding.id,
      assessment_id: assessment.id,
      project_id: assessment.projectId,
      status: 'running',
      result: null,
      finding_status: 'open',
      created_at: expect.any(String),
      completed_at: null,
    });
  });

  it('is 409 while a run of the finding is in progress, also for concurrent starts', async () => {
    const finding = await insertFinding(h, assessment);
    const results = await Promise.all([start(engine, finding.id), start(engine, finding.id), start(engine, finding.id)]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409]);
    expect(await h.deps.prisma.fixVerification.count({ where: { findingId: finding.id } })).toBe(1);
  });

  it('verifies findings that can become fixed (open, confirmed, accepted_risk, regressed); others are 409', async () => {
    for (const status of ['confirmed', 'accepted_risk', 'regressed']) {
      const f = await insertFinding(h, assessment, { status });
      expect((await start(engine, f.id)).status).toBe(201);
    }
    for (const status of ['fixed', 'dismissed', 'suppressed']) {
      const f = await insertFinding(h, assessment, { status });
      const res = await start(engine, f.id);
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain(status);
    }
  });

  it('needs assessments:update (member: 403) and write access (read grant: 403, none: 404)', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, p.id, 'completed');
    const finding = await insertFinding(h, a);
    const member = await start(org.member.token, finding.id);
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('assessments:update');
    expect((await start(org.manager.token, finding.id)).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await start(org.manager.token, finding.id)).status).toBe(403);
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.manager.id }, 'write');
    expect((await start(org.manager.token, finding.id)).status).toBe(201);
  });

  it("answers 404 for another organization's finding", async () => {
    const finding = await insertFinding(h, assessment);
    const res = await start(other.owner.token, finding.id);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ detail: 'Finding not found.' });
    expect((await start(engine, 'fnd_nonexistent')).status).toBe(404);
  });
});

describe('POST /fix-verifications/{id}/complete', () => {
  it('fixed: completes the run, moves the finding to fixed, publishes fix_verify.completed and finding.status_changed', async () => {
    const finding = await insertFinding(h, assessment, { status: 'confirmed' });
    const run = (await start(engine, finding.id)).body;
    const res = await complete(engine, run.id, { result: 'fixed' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: run.id, status: 'completed', result: 'fixed', finding_status: 'fixed', completed_at: expect.any(String) });
    const stored = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } });
    expect(stored.status).toBe('fixed');
    expect(stored.fixedAt).not.toBeNull();
    const [event] = await eventsOf(h, org.id, 'fix_verify.completed', { fix_verification_id: run.id });
    expect(event.data).toEqual({
      fix_verification_id: run.id,
      finding_id: finding.id,
      assessment_id: assessment.id,
      project_id: assessment.projectId,
      result: 'fixed',
      finding_status: 'fixed',
    });
    expect(event).toMatchObject({ projectId: assessment.projectId, assessmentId: assessment.id });
    const changes = await eventsOf(h, org.id, 'finding.status_changed', { finding_id: finding.id });
    expect(changes.map((e) => [e.data.previous_status, e.data.status])).toEqual([['confirmed', 'fixed']]);
  });

  it('still_present: completes the run and leaves the finding as it was', async () => {
    const finding = await insertFinding(h, assessment);
    const run = (await start(engine, finding.id)).body;
    const res = await complete(engine, run.id, { result: 'still_present' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'completed', result: 'still_present', finding_status: 'open' });
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } })).status).toBe('open');
    const [event] = await eventsOf(h, org.id, 'fix_verify.completed', { fix_verification_id: run.id });
    expect(event.data).toMatchObject({ result: 'still_present', finding_status: 'open' });
    expect(await eventsOf(h, org.id, 'finding.status_changed', { finding_id: finding.id })).toEqual([]);
  });

  it('completes once: a second completion, even concurrent, is 409 and publishes nothing more', async () => {
    const finding = await insertFinding(h, assessment);
    const run = (await start(engine, finding.id)).body;
    const results = await Promise.all([complete(engine, run.id, { result: 'fixed' }), complete(engine, run.id, { result: 'still_present' })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect((await complete(engine, run.id, { result: 'fixed' })).status).toBe(409);
    expect(await eventsOf(h, org.id, 'fix_verify.completed', { fix_verification_id: run.id })).toHaveLength(1);
    // a new run may start once the finding can still become fixed
    const after = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } });
    expect((await start(engine, finding.id)).status).toBe(after.status === 'fixed' ? 409 : 201);
  });

  it('a fixed result on a finding suppressed meanwhile completes the run and leaves the finding suppressed', async () => {
    const finding = await insertFinding(h, assessment);
    const run = (await start(engine, finding.id)).body;
    await h.deps.prisma.finding.update({ where: { id: finding.id }, data: { status: 'suppressed' } });
    const res = await complete(engine, run.id, { result: 'fixed' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ result: 'fixed', finding_status: 'suppressed' });
    expect(await eventsOf(h, org.id, 'finding.status_changed', { finding_id: finding.id })).toEqual([]);
  });

  it('validates the result: missing 400, outside fixed | still_present 422', async () => {
    const finding = await insertFinding(h, assessment);
    const run = (await start(engine, finding.id)).body;
    expect((await complete(engine, run.id, {})).status).toBe(400);
    expect((await complete(engine, run.id, { result: 'maybe' })).status).toBe(422);
    expect((await api().get(`/api/v1/fix-verifications/${run.id}`).set(bearer(engine))).body.status).toBe('running');
  });

  it('needs assessments:update and write access; another organization gets 404', async () => {
    const finding = await insertFinding(h, assessment);
    const run = (await start(engine, finding.id)).body;
    const member = await complete(org.member.token, run.id, { result: 'fixed' });
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('assessments:update');
    expect((await complete(org.manager.token, run.id, { result: 'fixed' })).status).toBe(404);
    const foreign = await complete(other.owner.token, run.id, { result: 'fixed' });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ detail: 'Fix verification not found.' });
    expect((await api().get(`/api/v1/fix-verifications/${run.id}`).set(bearer(engine))).body.status).toBe('running');
  });
});

describe('GET /fix-verifications/{id} and /findings/{id}/fix-verifications', () => {
  it('reads a run and lists the runs of a finding (findings:read, read access)', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, p.id, 'completed');
    const finding = await insertFinding(h, a);
    const first = (await start(engine, finding.id)).body;
    await complete(engine, first.id, { result: 'still_present' });
    const second = (await start(engine, finding.id)).body;
    const list = await api().get(`/api/v1/findings/${finding.id}/fix-verifications`).set(bearer(org.admin.token));
    expect(list.status).toBe(200);
    expect(list.body.data.map((r: { id: string }) => r.id)).toEqual([second.id, first.id]);
    expect(list.body.next_cursor).toBeNull();
    // member without access: 404; with a read grant: 200
    expect((await api().get(`/api/v1/fix-verifications/${first.id}`).set(bearer(org.member.token))).status).toBe(404);
    expect((await api().get(`/api/v1/findings/${finding.id}/fix-verifications`).set(bearer(org.member.token))).status).toBe(404);
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.member.id }, 'read');
    const one = await api().get(`/api/v1/fix-verifications/${first.id}`).set(bearer(org.member.token));
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: first.id, status: 'completed', result: 'still_present' });
    expect((await api().get(`/api/v1/fix-verifications/${first.id}`).set(bearer(other.owner.token))).status).toBe(404);
    expect((await api().get(`/api/v1/findings/${finding.id}/fix-verifications`).set(bearer(other.owner.token))).status).toBe(404);
    const key = await createKey(h, org.admin.token, ['assessments:update']);
    const noRead = await api().get(`/api/v1/fix-verifications/${first.id}`).set(bearer(key));
    expect(noRead.status).toBe(403);
    expect(noRead.body.detail).toContain('findings:read');
    expect((await api().get(`/api/v1/findings/${finding.id}/fix-verifications`).set(bearer(key))).status).toBe(403);
  });
});
