// A change re-checked inside its transaction (own-role.ts, access.service.ts requireStillMayAccess) waits there for
// what holds the rows it re-checks: an assessment's or project's deletion, whose cascade may run for minutes
// (DELETION_TRANSACTION), or an organization's deletion, which holds every membership meanwhile. Prisma ends an
// interactive transaction after 5 s by default: a change that waited longer answers 503 ("the database is
// unavailable") once the deletion commits, where one that waited less answers 404 for what is gone.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { insertAssessmentIn, insertFinding } from './support/domain';
import { whileRowsHeld } from './support/row-locks';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

it("a finding's severity overridden while its assessment's deletion runs for 6 s: 404 once it commits, not 503", async () => {
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  const finding = await insertFinding(h, assessment);
  const res = await whileRowsHeld(h,
    // As deleteWithSubscriptions holds it, for a cascade that takes a while.
    (tx) => tx.$queryRaw`SELECT id FROM assessments WHERE id = ${assessment.id} FOR UPDATE`,
    () => request(h.app).post(`/api/v1/findings/${finding.id}/severity`).set(bearer(org.owner.token)).send({ severity: 'low' }).then((r) => r),
    1,
    async (tx) => {
      await new Promise((r) => setTimeout(r, 6_000));
      await tx.assessment.delete({ where: { id: assessment.id } });
    },
  );
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ detail: 'Finding not found.' });
}, 30_000);

// docs/api.md: "edits of a project ... and of an assessment ...; one racing the deletion of what it edits ... waits
// for it and answers 404". Both re-check with the target's rows held (holdTargetRows), so they wait as long as the
// deletion runs; in a transaction of Prisma's default 5 s, one that waited longer answered 503.
it("a project edited while its deletion runs for 6 s: 404 once it commits, not 503", async () => {
  const project = await insertProject(h, org.id);
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM projects WHERE id = ${project.id} FOR UPDATE`,
    () => request(h.app).patch(`/api/v1/projects/${project.id}`).set(bearer(org.owner.token)).send({ name: 'renamed while deleted' }).then((r) => r),
    1,
    async (tx) => {
      await new Promise((r) => setTimeout(r, 6_000));
      await tx.project.delete({ where: { id: project.id } });
    },
  );
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ detail: 'Project not found.' });
}, 30_000);

it("an assessment edited while its deletion runs for 6 s: 404 once it commits, not 503", async () => {
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'draft');
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM assessments WHERE id = ${assessment.id} FOR UPDATE`,
    () => request(h.app).patch(`/api/v1/assessments/${assessment.id}`).set(bearer(org.owner.token)).send({ notes: 'written while deleted' }).then((r) => r),
    1,
    async (tx) => {
      await new Promise((r) => setTimeout(r, 6_000));
      await tx.assessment.delete({ where: { id: assessment.id } });
    },
  );
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ detail: 'Assessment not found.' });
}, 30_000);
