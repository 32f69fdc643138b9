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
