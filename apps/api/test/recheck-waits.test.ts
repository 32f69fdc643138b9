// A change re-checked inside its transaction (own-role.ts, access.service.ts requireStillMayAccess) waits there for
// what holds the rows it re-checks: an assessment's or project's deletion, whose cascade may run for minutes
// (DELETION_TRANSACTION), or an organization's deletion, which holds every membership meanwhile. Prisma ends an
// interactive transaction after 5 s by default: a change that waited longer answers 503 ("the database is
// unavailable") once the deletion commits, where one that waited less answers 404 for what is gone.
import { Client } from 'pg';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { insertAssessmentIn, insertFinding } from './support/domain';
import { whileRowsHeld } from './support/row-locks';
import { backendPid } from '../../../test-support/pg-locks';

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

// Open finding (attacker review of 8889675..20dd93e): a re-checked change waits for what holds its rows for as long as
// that runs, its statement blocked on a connection of the API's one pool (DATABASE_POOL_SIZE, 10 by default; 4 here).
// Prisma's transaction timeout does not free it (5 s or RECHECKED_TRANSACTION's 10 min: the same here), the blocked
// statement keeps it. A deletion that runs long in one organization (its own project; the organization itself, whose
// deletion holds every membership) and as many edits of it as the pool holds leave no connection for any other
// organization, whose requests then wait for a connection: they get the 503 of DATABASE_CONNECT_TIMEOUT_MS (2 s by
// default; 30 s in this harness, so no answer within the 10 s here) until the deletion commits. Nothing bounds a re-check's lock wait (no lock_timeout) nor how many requests of one organization
// may wait at once. `it.failing` passes while the starvation is there: once fixed, make it a plain `it`.
it.failing("a long deletion in one organization, and edits waiting for it, leave another organization's requests a connection", async () => {
  const victim = await createOrg(h);
  const project = await insertProject(h, org.id);
  const holder = new Client({ connectionString: h.config.databaseUrl });
  const watcher = new Client({ connectionString: h.config.databaseUrl });
  await Promise.all([holder.connect(), watcher.connect()]);
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM projects WHERE id = $1 FOR UPDATE', [project.id]);
    const pid = await backendPid(holder);
    const edits = Array.from({ length: 4 }, (_, i) =>
      request(h.app).patch(`/api/v1/projects/${project.id}`).set(bearer(org.owner.token)).send({ name: `edit ${i}` }).then((r) => r));
    for (let waited = 0; ; waited += 50) {
      const { rows } = await watcher.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))', [pid]);
      if (rows[0]!.n >= 4) break;
      if (waited > 15_000) throw new Error('the edits never waited');
      await new Promise((r) => setTimeout(r, 50));
    }
    const other = await Promise.race([
      request(h.app).get('/api/v1/projects').set(bearer(victim.owner.token)).then((r) => ({ status: r.status, body: r.body })),
      new Promise<{ status: string }>((r) => setTimeout(() => r({ status: 'no answer in 10 s' }), 10_000)),
    ]);
    await holder.query('ROLLBACK');
    await Promise.all(edits);
    expect(other.status).toBe(200);
  } finally {
    await Promise.all([holder.end(), watcher.end()]);
  }
}, 30_000);
