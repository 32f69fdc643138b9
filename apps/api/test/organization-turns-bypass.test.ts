// The writes that do not take their organization's turns (http/route.ts takesTurns): a source upload (its body
// streams without a connection) and the engine's finding records (coalesced). Both still end in a statement that
// waits for the rows a long deletion holds, one connection each: behind one organization's deletion, as many of them
// as the pool holds left every other organization's requests the 503 of DATABASE_CONNECT_TIMEOUT_MS.
import { Client } from 'pg';
import request from 'supertest';
import yazl from 'yazl';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertProject, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, insertReadyReport } from './support/domain';
import { backendPid } from '../../../test-support/pg-locks';
import type { OrganizationTurns } from '../src/http/organization-turns';

let h: Harness;
let busy: TestOrg;
let victim: TestOrg;
let victimsProject: { id: string };

beforeAll(async () => {
  // A pool of 4 and ORGANIZATION_WRITES_IN_FLIGHT of 2 (half of it), as in production.
  h = await createHarness({ DATABASE_POOL_SIZE: '4' });
  [busy, victim] = [await createOrg(h), await createOrg(h)];
  victimsProject = await insertProject(h, victim.id);
});
afterAll(() => h.close());

async function smallZip(name: string): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  zip.addBuffer(Buffer.from(`# ${name}\n`), 'README.md');
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const within5s = <T>(answer: Promise<T>) =>
  Promise.race([answer, new Promise<'no answer in 5 s'>((r) => setTimeout(() => r('no answer in 5 s'), 5_000))]);

/**
 * Holds `sql` (as a deletion holds its rows) on a connection outside the pool, sends `count` requests of the busy
 * organization, waits until they wait (in the database, behind the holder, or for a turn), then asks whether the
 * victim's read and write are answered meanwhile; lets go and answers the busy organization's statuses.
 */
async function victimAnsweredWhile(sql: string, params: unknown[], count: number, send: (i: number) => Promise<request.Response>) {
  const holder = new Client({ connectionString: h.config.databaseUrl });
  const watcher = new Client({ connectionString: h.config.databaseUrl });
  await Promise.all([holder.connect(), watcher.connect()]);
  try {
    await holder.query('BEGIN');
    await holder.query(sql, params);
    const pid = await backendPid(holder);
    const sent = Array.from({ length: count }, (_, i) => send(i));
    for (const s of sent) s.catch(() => undefined);
    const turns = h.app.locals.organizationTurns as OrganizationTurns;
    for (let waited = 0; ; waited += 50) {
      const { rows } = await watcher.query<{ n: number }>(`
        WITH RECURSIVE blocked(pid) AS (
          SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))
          UNION
          SELECT a.pid FROM pg_stat_activity a JOIN blocked b ON b.pid = ANY(pg_blocking_pids(a.pid)))
        SELECT count(*)::int AS n FROM blocked`, [pid]);
      if (rows[0]!.n + turns.load(busy.id).waiting >= count) break;
      if (waited > 15_000) throw new Error(`never ${count} requests waiting: ${rows[0]!.n} blocked, ${JSON.stringify(turns.load(busy.id))}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const read = await within5s(request(h.app).get('/api/v1/projects').set(bearer(victim.owner.token)).then((r) => r.status));
    const write = await within5s(request(h.app).patch(`/api/v1/projects/${victimsProject.id}`).set(bearer(victim.owner.token)).send({ name: `renamed ${Date.now()}` }).then((r) => r.status));
    await holder.query('ROLLBACK');
    const answers = (await Promise.all(sent)).map((r) => r.status);
    return { victim: [read, write], answers, load: turns.load(busy.id) };
  } finally {
    await Promise.all([holder.end(), watcher.end()]);
  }
}

it("source uploads waiting behind their assessment's deletion take half the pool at most: another organization is answered meanwhile", async () => {
  const project = await insertProject(h, busy.id);
  const assessments = await Promise.all(Array.from({ length: 4 }, () => insertAssessment(h, busy.id, project.id)));
  const zips = await Promise.all(assessments.map((_, i) => smallZip(`upload ${i}`)));
  const result = await victimAnsweredWhile(
    // As a project's deletion holds its assessments, for a cascade that takes a while.
    'SELECT id FROM assessments WHERE project_id = $1 FOR UPDATE', [project.id], 4,
    (i) => request(h.app).post(`/api/v1/assessments/${assessments[i]!.id}/source`).set(bearer(busy.owner.token))
      .set('Content-Type', 'application/zip').send(zips[i]!).then((r) => r),
  );
  expect(result).toEqual({ victim: [200, 200], answers: [200, 200, 200, 200], load: { running: 0, waiting: 0 } });
}, 40_000);

it("the engine's findings waiting behind their assessment's lock take half the pool at most: another organization is answered meanwhile", async () => {
  const engine = await createKey(h, busy.owner.token, ['assessments:update']);
  const project = await insertProject(h, busy.id);
  const running = await insertAssessmentIn(h, busy.id, project.id, 'running');
  const result = await victimAnsweredWhile(
    // As the assessment's deletion (or an emergency stop, a cancel) holds it.
    'SELECT id FROM assessments WHERE id = $1 FOR UPDATE', [running.id], 4,
    (i) => request(h.app).post(`/api/v1/assessments/${running.id}/findings`).set(bearer(engine))
      .send({ title: `finding ${i}`, severity: 'high', fingerprint: `fp-${i}-${Date.now()}` }).then((r) => r),
  );
  expect(result).toEqual({ victim: [200, 200], answers: [201, 201, 201, 201], load: { running: 0, waiting: 0 } });
  expect(await h.deps.prisma.finding.count({ where: { assessmentId: running.id } })).toBe(4);
}, 40_000);

// Found by the review of f6ba415 and ae60181: two public requests wait in RECHECKED_TRANSACTION for the rows a deletion
// holds, one connection each, and took no turn (route.ts gives them to authenticated writes): a shared report's view or
// download, counted on its share's row (a project's, assessment's or report's deletion holds it), and an invitation's
// acceptance, claiming its row (its organization's deletion holds it). One organization publishing a report, or
// inviting an address of its own, and deleting what holds them let anyone holding the token take the whole pool: the
// other organizations' requests answered the 503 of DATABASE_CONNECT_TIMEOUT_MS. Now they take a turn of the
// organization their token names.
it("a shared report's views waiting behind its project's deletion take half the pool at most: another organization is answered meanwhile", async () => {
  const project = await insertProject(h, busy.id);
  const report = await insertReadyReport(h, busy.id, (await insertAssessmentIn(h, busy.id, project.id, 'completed')).id);
  const published = await request(h.app).post(`/api/v1/reports/${report.id}/publication`).set(bearer(busy.owner.token)).send({});
  expect(published.status).toBe(201);
  const token = String(published.body.url).split('/').pop()!;
  const result = await victimAnsweredWhile(
    // As the cascade of the project's deletion holds it, for a while.
    'SELECT id FROM report_shares WHERE report_id = $1 FOR UPDATE', [report.id], 4,
    () => request(h.app).get(`/api/v1/shared/reports/${token}`).then((r) => r),
  );
  expect(result).toEqual({ victim: [200, 200], answers: [200, 200, 200, 200], load: { running: 0, waiting: 0 } });
}, 40_000);

it("an invitation's acceptances waiting behind its organization's deletion take half the pool at most: another organization is answered meanwhile", async () => {
  const email = `invitee-${Date.now()}@example.test`;
  const invited = await request(h.app).post('/api/v1/invitations').set(bearer(busy.owner.token)).send({ email, role: 'member' });
  expect(invited.status).toBe(201);
  const link = h.mail().filter((m) => m.to === email).map((m) => /accept-invite\?token=([A-Za-z0-9_-]+)/.exec(m.text)?.[1]).find(Boolean);
  const result = await victimAnsweredWhile(
    // As the cascade of the organization's deletion holds it, for a while.
    'SELECT id FROM invitations WHERE id = $1 FOR UPDATE', [invited.body.id], 4,
    () => request(h.app).post('/api/v1/invitations/accept').send({ token: link, name: 'Invited Person', password: 'a brand new passphrase' }).then((r) => r),
  );
  // One of the four accepts it, the others find it used.
  expect({ ...result, answers: [...result.answers].sort() }).toEqual({ victim: [200, 200], answers: [200, 400, 400, 400], load: { running: 0, waiting: 0 } });
  expect(await h.deps.prisma.membership.count({ where: { organizationId: busy.id, user: { email } } })).toBe(1);
}, 40_000);

// Turns cap each organization, and all of them together (WRITES_IN_FLIGHT, three quarters of the pool): signing up
// makes an organization (POST /auth/signup), so one caller with two of them, each with a long deletion and
// ORGANIZATION_WRITES_IN_FLIGHT edits waiting behind it, took the whole pool (2 + 2 of 4) and a third organization got
// no answer. Now the two take 3 and the fourth edit waits for a turn: the third organization's read is answered, its
// write waits its turn (it waits for no row, only for a turn of all) and is answered when theirs end.
it("two organizations' changes waiting behind their deletions leave a third organization's reads answered", async () => {
  const [first, second] = [await createOrg(h), await createOrg(h)];
  const projects = [await insertProject(h, first.id), await insertProject(h, second.id)];
  const turns = h.app.locals.organizationTurns as OrganizationTurns;
  const holder = new Client({ connectionString: h.config.databaseUrl });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM projects WHERE id = ANY($1) FOR UPDATE', [projects.map((p) => p.id)]);
    const edits = [first, second].flatMap((o, n) => [0, 1].map((i) =>
      request(h.app).patch(`/api/v1/projects/${projects[n]!.id}`).set(bearer(o.owner.token)).send({ name: `edit ${i}` }).then((r) => r)));
    const pid = await backendPid(holder);
    const watcher = new Client({ connectionString: h.config.databaseUrl });
    await watcher.connect();
    let blocked = 0;
    try {
      for (let waited = 0; ; waited += 50) {
        const { rows } = await watcher.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))', [pid]);
        blocked = rows[0]!.n;
        if (blocked + turns.loadAll().waiting === 4) break;
        if (waited > 15_000) throw new Error(`never four edits waiting: ${blocked} blocked, ${JSON.stringify(turns.loadAll())}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await watcher.end();
    }
    const read = await within5s(request(h.app).get('/api/v1/projects').set(bearer(victim.owner.token)).then((r) => r.status));
    const write = request(h.app).patch(`/api/v1/projects/${victimsProject.id}`).set(bearer(victim.owner.token)).send({ name: `renamed ${Date.now()}` }).then((r) => r.status);
    const writeMeanwhile = await Promise.race([write, new Promise((r) => setTimeout(() => r('waiting'), 500))]);
    const whileHeld = { blocked, turns: turns.loadAll(), read, writeMeanwhile };
    await holder.query('ROLLBACK');
    expect({ whileHeld, edits: (await Promise.all(edits)).map((r) => r.status), write: await write })
      .toEqual({ whileHeld: { blocked: 3, turns: { running: 3, waiting: 2 }, read: 200, writeMeanwhile: 'waiting' }, edits: [200, 200, 200, 200], write: 200 });
  } finally {
    await holder.end();
  }
}, 40_000);
