// Monitoring checks through the HTTP API: a `regressed` check of a fixed finding moves it to regressed and
// publishes monitoring.regression and finding.status_changed (previous_status fixed) in one transaction; a
// `still_fixed` check changes nothing. Checks of findings that are not fixed are 409; scopes, access, cross-org 404.
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
  engine = await createKey(h, org.admin.token, ['assessments:update']);
  const project = await insertProject(h, org.id);
  assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
});
afterAll(() => h.close());

const api = () => request(h.app);
const check = (token: string, findingId: string, body: Record<string, unknown>) =>
  api().post(`/api/v1/findings/${findingId}/monitoring-checks`).set(bearer(token)).send(body);
const FIXED_AT = new Date('2026-01-15T10:00:00.000Z');
const fixedFinding = async () => {
  const f = await insertFinding(h, assessment, { status: 'fixed', severity: 'critical', location: 'src/login.ts:12', openedAt: new Date(Date.now() - 86_400_000) });
  return h.deps.prisma.finding.update({ where: { id: f.id }, data: { fixedAt: FIXED_AT } });
};

describe('POST /findings/{id}/monitoring-checks', () => {
  it('regressed: moves a fixed finding to regressed and publishes monitoring.regression and finding.status_changed', async () => {
    const finding = await fixedFinding();
    const res = await check(engine, finding.id, { result: 'regressed' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ finding_id: finding.id, result: 'regressed', status: 'regressed', previous_status: 'fixed', checked_at: expect.any(String) });
    const stored = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } });
    expect(stored.status).toBe('regressed');
    expect(stored.openedAt.getTime()).toBeGreaterThan(finding.openedAt.getTime()); // the SLA window restarts
    const [regression] = await eventsOf(h, org.id, 'monitoring.regression', { finding_id: finding.id });
    expect(regression.data).toEqual({
      finding_id: finding.id,
      assessment_id: assessment.id,
      project_id: assessment.projectId,
      title: finding.title,
      severity: 'critical',
      location: 'src/login.ts:12',
      previous_fixed_at: FIXED_AT.toISOString(),
    });
    expect(regression).toMatchObject({ projectId: assessment.projectId, assessmentId: assessment.id });
    const [changed] = await eventsOf(h, org.id, 'finding.status_changed', { finding_id: finding.id });
    expect(changed.data).toMatchObject({ status: 'regressed', previous_status: 'fixed' });
  });

  it('still_fixed: changes nothing and publishes nothing', async () => {
    const finding = await fixedFinding();
    const res = await check(engine, finding.id, { result: 'still_fixed' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ finding_id: finding.id, result: 'still_fixed', status: 'fixed' });
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } })).status).toBe('fixed');
    expect(await eventsOf(h, org.id, 'monitoring.regression', { finding_id: finding.id })).toEqual([]);
    expect(await eventsOf(h, org.id, 'finding.status_changed', { finding_id: finding.id })).toEqual([]);
  });

  it('is 409 for a finding that is not fixed, whatever the result; a regression is reported once', async () => {
    for (const status of ['open', 'confirmed', 'dismissed', 'accepted_risk', 'suppressed', 'regressed']) {
      const f = await insertFinding(h, assessment, { status });
      for (const result of ['regressed', 'still_fixed']) {
        const res = await check(engine, f.id, { result });
        expect(res.status).toBe(409);
        expect(res.body.detail).toContain(status);
      }
    }
    const finding = await fixedFinding();
    const results = await Promise.all([check(engine, finding.id, { result: 'regressed' }), check(engine, finding.id, { result: 'regressed' })]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(await eventsOf(h, org.id, 'monitoring.regression', { finding_id: finding.id })).toHaveLength(1);
  });

  it('validates the result: missing 400, outside still_fixed | regressed 422', async () => {
    const finding = await fixedFinding();
    expect((await check(engine, finding.id, {})).status).toBe(400);
    expect((await check(engine, finding.id, { result: 'gone' })).status).toBe(422);
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } })).status).toBe('fixed');
  });

  it('needs assessments:update (member: 403) and write access (read grant: 403, none: 404); another org gets 404', async () => {
    const p = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, p.id, 'completed');
    const finding = await insertFinding(h, a, { status: 'fixed' });
    const member = await check(org.member.token, finding.id, { result: 'regressed' });
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('assessments:update');
    expect((await check(org.manager.token, finding.id, { result: 'regressed' })).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await check(org.manager.token, finding.id, { result: 'regressed' })).status).toBe(403);
    const foreign = await check(other.owner.token, finding.id, { result: 'regressed' });
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ detail: 'Finding not found.' });
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } })).status).toBe('fixed');
  });
});
