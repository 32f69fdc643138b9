// A change re-checked inside its transaction (own-role.ts, access.service.ts requireStillMayAccess) waits there for
// what holds the rows it re-checks: an assessment's or project's deletion, whose cascade may run for minutes
// (DELETION_TRANSACTION), or an organization's deletion, which holds every membership meanwhile. Prisma ends an
// interactive transaction after 5 s by default: a change that waited longer answers 503 ("the database is
// unavailable") once the deletion commits, where one that waited less answers 404 for what is gone.
import { Client } from 'pg';
import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertProject, type TestOrg, type TestUser } from './support/fixtures';
import { createKey, insertAssessmentIn, insertFinding, insertReadyReport, PUBLIC_URL, subscribe } from './support/domain';
import { untilBlockedBy, whileRowsHeld } from './support/row-locks';
import { backendPid } from '../../../test-support/pg-locks';
import type { OrganizationTurns } from '../src/http/organization-turns';

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

// A re-checked change waits for what holds its rows for as long as that runs, its statement blocked on a connection
// of the API's one pool. One organization's writes take turns (http/organization-turns.ts): at most
// ORGANIZATION_WRITES_IN_FLIGHT at once per instance (half of DATABASE_POOL_SIZE by default), the others waiting in
// the process without a connection. Without turns (found by the attacker review of 8889675..20dd93e), a long deletion
// in one organization and as many edits waiting for it as the pool holds left every other organization's requests
// the 503 of DATABASE_CONNECT_TIMEOUT_MS until the deletion committed.
//
// Found by the review of a9466b5: with WRITES_IN_FLIGHT (the turns of all organizations together) no higher than
// ORGANIZATION_WRITES_IN_FLIGHT, one organization's edits waiting behind its own deletion held every turn of all, and
// every other organization's writes waited in the process for as long as that deletion ran. Its defaults did so
// with a pool of 2 (1 and 1; before a9466b5 the other organizations kept the second connection), as did an
// ORGANIZATION_WRITES_IN_FLIGHT set to three quarters of the pool or more. By default the turns of all are now at
// least one more than one organization's, within the pool.
describe.each([
  { pool: 4, edits: 4, inTheDatabase: 2 },
  { pool: 2, edits: 2, inTheDatabase: 1 },
])("one organization's changes waiting behind its long deletion, with a pool of $pool", ({ pool, edits: sent, inTheDatabase }) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({ DATABASE_POOL_SIZE: String(pool) });
  });
  afterAll(() => h.close());

  it(`take ${inTheDatabase} of its connections at most: another organization's reads and writes are answered meanwhile, and every waiting edit lands after`, async () => {
    const [busy, victim] = [await createOrg(h), await createOrg(h)];
    const project = await insertProject(h, busy.id);
    const victimsProject = await insertProject(h, victim.id);
    const holder = new Client({ connectionString: h.config.databaseUrl });
    const watcher = new Client({ connectionString: h.config.databaseUrl });
    await Promise.all([holder.connect(), watcher.connect()]);
    try {
      await holder.query('BEGIN');
      // As a project's deletion holds it, for a cascade that takes a while.
      await holder.query('SELECT id FROM projects WHERE id = $1 FOR UPDATE', [project.id]);
      const pid = await backendPid(holder);
      const edits = Array.from({ length: sent }, (_, i) =>
        request(h.app).patch(`/api/v1/projects/${project.id}`).set(bearer(busy.owner.token)).send({ name: `edit ${i}` }).then((r) => r));
      const turns = h.app.locals.organizationTurns as OrganizationTurns;
      for (let waited = 0; ; waited += 50) {
        const { rows } = await watcher.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))', [pid]);
        if (rows[0]!.n === inTheDatabase && turns.load(busy.id).waiting === sent - inTheDatabase) break;
        if (waited > 15_000) throw new Error(`never ${inTheDatabase} edits waiting in the database and the others for a turn: ${rows[0]!.n} blocked, ${JSON.stringify(turns.load(busy.id))}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const within5s = <T>(answer: Promise<T>) => Promise.race([answer, new Promise<'no answer in 5 s'>((r) => setTimeout(() => r('no answer in 5 s'), 5_000))]);
      const read = await within5s(request(h.app).get('/api/v1/projects').set(bearer(victim.owner.token)).then((r) => r.status));
      const write = request(h.app).patch(`/api/v1/projects/${victimsProject.id}`).set(bearer(victim.owner.token)).send({ name: 'renamed meanwhile' }).then((r) => r.status);
      const answered = [read, await within5s(write)];
      await holder.query('ROLLBACK');
      expect({ answered, edits: (await Promise.all(edits)).map((r) => r.status), write: await write })
        .toEqual({ answered: [200, 200], edits: Array(sent).fill(200), write: 200 });
      expect(turns.loadAll()).toEqual({ running: 0, waiting: 0 });
    } finally {
      await Promise.all([holder.end(), watcher.end()]);
    }
  }, 40_000);
});

// Every other change that re-checks the caller's role as committed locks their membership first (lockOwnRole and its
// callers), some the organization's row before it (lockOrganization). An organization's deletion holds both (FOR NO
// KEY UPDATE, FOR UPDATE: organizations.service.ts requireStillDeletable) for as long as its cascade runs; a role change
// holds two memberships while it waits for what it changes (below). A change that meets a committed deletion mostly
// stops at the row it no longer finds (403, 404), which a 5-s transaction answers too; one that goes on after the
// wait (the deletion rolled back, retried after a deadlock; a role change committed) answered 503 in Prisma's default
// 5-s transaction.
describe('changes that lock the caller\'s membership first, behind a long transaction holding it for 6 s', () => {
  let wide: Harness;
  beforeAll(async () => {
    // As many changes waiting at once as a family sends, each in its own transaction: a pool to match.
    wide = await createHarness({ DATABASE_POOL_SIZE: '16' });
  });
  afterAll(() => wide.close());

  const api = () => request(wide.app);
  const as = (user: TestUser) => (req: request.Test) => req.set(bearer(user.token));
  async function made(req: request.Test): Promise<string> {
    const res = await req;
    if (res.status !== 200 && res.status !== 201) throw new Error(`arranging failed: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.id as string;
  }

  type Change = { what: string; send: () => request.Test; answers: number };
  type Family = { family: string; arrange: (org: TestOrg) => Promise<{ changes: Change[]; alsoHeld?: string[] }> };

  const families: Family[] = [
    {
      family: 'teams: created, renamed, deleted, a member added and one removed',
      arrange: async (org) => {
        const owner = as(org.owner);
        const team = () => made(owner(api().post('/api/v1/teams').send({ name: `Team ${uniqueSuffix()}` })));
        const [renamed, deleted, joined, left] = await Promise.all([team(), team(), team(), team()]);
        expect((await owner(api().put(`/api/v1/teams/${left}/members/${org.member.id}`))).status).toBe(200);
        return {
          changes: [
            { what: 'POST /teams', send: () => owner(api().post('/api/v1/teams').send({ name: `Made meanwhile ${uniqueSuffix()}` })), answers: 201 },
            { what: 'PATCH /teams/:id', send: () => owner(api().patch(`/api/v1/teams/${renamed}`).send({ name: `Renamed ${renamed}` })), answers: 200 },
            { what: 'DELETE /teams/:id', send: () => owner(api().delete(`/api/v1/teams/${deleted}`)), answers: 204 },
            { what: 'PUT /teams/:id/members/:user_id', send: () => owner(api().put(`/api/v1/teams/${joined}/members/${org.manager.id}`)), answers: 200 },
            { what: 'DELETE /teams/:id/members/:user_id', send: () => owner(api().delete(`/api/v1/teams/${left}/members/${org.member.id}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: 'projects: created, and deleted (its first re-check, before the history goes)',
      arrange: async (org) => {
        const owner = as(org.owner);
        const doomed = await insertProject(wide, org.id);
        return {
          changes: [
            { what: 'POST /projects', send: () => owner(api().post('/api/v1/projects').send({ name: `Made meanwhile ${uniqueSuffix()}` })), answers: 201 },
            { what: 'DELETE /projects/:id', send: () => owner(api().delete(`/api/v1/projects/${doomed.id}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: "the organization's settings: renamed, its API-key and SLA policies, ownership transferred, and another one deleted",
      arrange: async (org) => {
        const [admin, owner] = [as(org.admin), as(org.owner)];
        const doomed = await createOrg(wide);
        return {
          alsoHeld: [doomed.id],
          changes: [
            { what: 'PATCH /organization', send: () => admin(api().patch('/api/v1/organization').send({ name: `Renamed ${org.id}` })), answers: 200 },
            { what: 'PUT /organization/api-key-policy', send: () => admin(api().put('/api/v1/organization/api-key-policy').send({ enabled: true, inactivity_days: 1 })), answers: 200 },
            { what: 'PUT /governance/sla', send: () => admin(api().put('/api/v1/governance/sla').send({ critical: 1, high: 2, medium: 3, low: 4, info: null })), answers: 200 },
            { what: 'POST /organization/transfer-ownership', send: () => owner(api().post('/api/v1/organization/transfer-ownership').send({ user_id: org.member.id })), answers: 200 },
            { what: 'DELETE /organization', send: () => as(doomed.owner)(api().delete('/api/v1/organization').send({ confirm: doomed.name })), answers: 204 },
          ],
        };
      },
    },
    {
      family: 'erasure requests: one filed for a person who has one already (409), one cancelled',
      arrange: async (org) => {
        const admin = as(org.admin);
        const awaiting = async () => {
          const person = await createUserInOrg(wide, org.id, 'member', 'erasure-subject');
          const id = newId('era');
          // Never 'previewing': the run's database is shared, and another file's erasure run would take it up.
          await wide.deps.prisma.erasureRequest.create({
            data: { id, organizationId: org.id, subjectUserId: person.id, status: 'awaiting_confirmation', pseudonymName: `Erased ${id}`, pseudonymEmail: `${id}@erased.invalid`, requestedById: org.owner.id },
          });
          return { id, person };
        };
        const [filedTwice, cancelled] = [await awaiting(), await awaiting()];
        return {
          changes: [
            { what: 'POST /governance/erasure-requests', send: () => admin(api().post('/api/v1/governance/erasure-requests').send({ user_id: filedTwice.person.id })), answers: 409 },
            { what: 'POST /governance/erasure-requests/:id/cancel', send: () => admin(api().post(`/api/v1/governance/erasure-requests/${cancelled.id}/cancel`)), answers: 200 },
          ],
        };
      },
    },
    {
      family: 'spend: usage recorded, a limit created, changed and deleted',
      arrange: async (org) => {
        const admin = as(org.admin);
        const limit = () => made(admin(api().post('/api/v1/billing/limits').send({ kind: 'threshold', credits: '500' })));
        const [changed, deleted] = [await limit(), await limit()];
        return {
          changes: [
            { what: 'POST /usage', send: () => admin(api().post('/api/v1/usage').send({ credits: '1.50' })), answers: 201 },
            { what: 'POST /billing/limits', send: () => admin(api().post('/api/v1/billing/limits').send({ kind: 'threshold', credits: '700' })), answers: 201 },
            { what: 'PATCH /billing/limits/:id', send: () => admin(api().patch(`/api/v1/billing/limits/${changed}`).send({ credits: '900' })), answers: 200 },
            { what: 'DELETE /billing/limits/:id', send: () => admin(api().delete(`/api/v1/billing/limits/${deleted}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: "API keys: one minted, the caller's own revoked, a manager's revoked by an admin",
      arrange: async (org) => {
        const [owner, admin] = [as(org.owner), as(org.admin)];
        const own = await made(owner(api().post('/api/v1/api-keys').send({ name: `own ${uniqueSuffix()}`, scopes: ['webhooks:read'] })));
        const managers = await made(as(org.manager)(api().post('/api/v1/api-keys').send({ name: `manager's ${uniqueSuffix()}`, scopes: ['projects:read'] })));
        return {
          changes: [
            { what: 'POST /api-keys', send: () => owner(api().post('/api/v1/api-keys').send({ name: `minted meanwhile ${uniqueSuffix()}`, scopes: ['webhooks:read'] })), answers: 201 },
            { what: "DELETE /api-keys/:id (the caller's own)", send: () => owner(api().delete(`/api/v1/api-keys/${own}`)), answers: 204 },
            { what: "DELETE /api-keys/:id (a manager's)", send: () => admin(api().delete(`/api/v1/api-keys/${managers}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: 'integrations: connected, disconnected, bound to a team and unbound from one',
      arrange: async (org) => {
        const owner = as(org.owner);
        const integration = () => made(owner(api().post('/api/v1/integrations').send({ kind: 'github', name: `GitHub ${uniqueSuffix()}`, token: 'ghp_recheckWaits0123456789' })));
        const team = () => made(owner(api().post('/api/v1/teams').send({ name: `Team ${uniqueSuffix()}` })));
        const [disconnected, bound, unbound] = [await integration(), await integration(), await integration()];
        const [bindTo, unbindFrom] = [await team(), await team()];
        expect((await owner(api().put(`/api/v1/integrations/${unbound}/teams/${unbindFrom}`))).status).toBe(200);
        return {
          changes: [
            { what: 'POST /integrations', send: () => owner(api().post('/api/v1/integrations').send({ kind: 'github', name: `Made meanwhile ${uniqueSuffix()}`, token: 'ghp_recheckWaits0123456789' })), answers: 201 },
            { what: 'DELETE /integrations/:id', send: () => owner(api().delete(`/api/v1/integrations/${disconnected}`)), answers: 204 },
            { what: 'PUT /integrations/:id/teams/:team_id', send: () => owner(api().put(`/api/v1/integrations/${bound}/teams/${bindTo}`)), answers: 200 },
            { what: 'DELETE /integrations/:id/teams/:team_id', send: () => owner(api().delete(`/api/v1/integrations/${unbound}/teams/${unbindFrom}`)), answers: 200 },
          ],
        };
      },
    },
    {
      family: 'notification targets: created, renamed, revoked',
      arrange: async (org) => {
        const owner = as(org.owner);
        const target = () => made(owner(api().post('/api/v1/notification-targets').send({ kind: 'slack', name: `chat ${uniqueSuffix()}`, url: PUBLIC_URL, events: ['report.ready'] })));
        const [renamed, revoked] = [await target(), await target()];
        return {
          changes: [
            { what: 'POST /notification-targets', send: () => owner(api().post('/api/v1/notification-targets').send({ kind: 'slack', name: `made meanwhile ${uniqueSuffix()}`, url: PUBLIC_URL, events: ['report.ready'] })), answers: 201 },
            { what: 'PATCH /notification-targets/:id', send: () => owner(api().patch(`/api/v1/notification-targets/${renamed}`).send({ name: `renamed ${renamed}` })), answers: 200 },
            { what: 'DELETE /notification-targets/:id', send: () => owner(api().delete(`/api/v1/notification-targets/${revoked}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: 'issue trackers: configured, renamed, revoked',
      arrange: async (org) => {
        const owner = as(org.owner);
        const tracker = () => made(owner(api().post('/api/v1/issue-export-targets').send({ kind: 'github', name: `gh ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_recheckWaits0123456789' })));
        const [renamed, revoked] = [await tracker(), await tracker()];
        return {
          changes: [
            { what: 'POST /issue-export-targets', send: () => owner(api().post('/api/v1/issue-export-targets').send({ kind: 'github', name: `made meanwhile ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_recheckWaits0123456789' })), answers: 201 },
            { what: 'PATCH /issue-export-targets/:id', send: () => owner(api().patch(`/api/v1/issue-export-targets/${renamed}`).send({ name: `renamed ${renamed}` })), answers: 200 },
            { what: 'DELETE /issue-export-targets/:id', send: () => owner(api().delete(`/api/v1/issue-export-targets/${revoked}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: "members: one's role lowered, one removed",
      arrange: async (org) => {
        const owner = as(org.owner);
        return {
          changes: [
            { what: 'PATCH /members/:user_id', send: () => owner(api().patch(`/api/v1/members/${org.manager.id}`).send({ role: 'member' })), answers: 200 },
            { what: 'DELETE /members/:user_id', send: () => owner(api().delete(`/api/v1/members/${org.member.id}`)), answers: 204 },
          ],
        };
      },
    },
    {
      family: 'webhook subscriptions: created, renamed, deleted, their secret rotated',
      arrange: async (org) => {
        const owner = as(org.owner);
        const subscription = () => subscribe(wide, org.owner.token, { org: true }, ['finding.created']);
        const [renamed, deleted, rotated] = [await subscription(), await subscription(), await subscription()];
        return {
          changes: [
            { what: 'POST /webhooks/subscriptions', send: () => owner(api().post('/api/v1/webhooks/subscriptions').send({ name: `made meanwhile ${uniqueSuffix()}`, url: PUBLIC_URL, events: ['finding.created'] })), answers: 201 },
            { what: 'PATCH /webhooks/subscriptions/:id', send: () => owner(api().patch(`/api/v1/webhooks/subscriptions/${renamed}`).send({ name: `renamed ${renamed}` })), answers: 200 },
            { what: 'DELETE /webhooks/subscriptions/:id', send: () => owner(api().delete(`/api/v1/webhooks/subscriptions/${deleted}`)), answers: 204 },
            { what: 'POST /webhooks/subscriptions/:id/rotate-secret', send: () => owner(api().post(`/api/v1/webhooks/subscriptions/${rotated}/rotate-secret`)), answers: 200 },
          ],
        };
      },
    },
    {
      family: 'invitations: sent, revoked',
      arrange: async (org) => {
        const owner = as(org.owner);
        const revoked = await made(owner(api().post('/api/v1/invitations').send({ email: `invitee-${uniqueSuffix()}@example.test`, role: 'member' })));
        return {
          changes: [
            { what: 'POST /invitations', send: () => owner(api().post('/api/v1/invitations').send({ email: `invited-meanwhile-${uniqueSuffix()}@example.test`, role: 'member' })), answers: 201 },
            { what: 'DELETE /invitations/:id', send: () => owner(api().delete(`/api/v1/invitations/${revoked}`)), answers: 204 },
          ],
        };
      },
    },
  ];

  // Each family's changes are sent while a transaction holds those rows as the deletion does, wait there for 6 s, and
  // are then let go (the deletion rolled back): each answers what it answers without the wait.
  it.each(families)("while an organization's deletion holds its row and memberships: $family", async ({ arrange }) => {
    const org = await createOrg(wide);
    const { changes, alsoHeld = [] } = await arrange(org);
    const held = [org.id, ...alsoHeld];
    const answers = await whileRowsHeld(wide,
      async (tx) => {
        await tx.$queryRaw`SELECT id FROM organizations WHERE id = ANY(${held}::text[]) ORDER BY id FOR NO KEY UPDATE`;
        await tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ANY(${held}::text[]) ORDER BY organization_id, user_id FOR UPDATE`;
      },
      () => Promise.all(changes.map((c) => c.send().then((r) => r))),
      changes.length,
      () => new Promise((r) => setTimeout(r, 6_000)),
    );
    const seen = (r: request.Response, expected: number) => (r.status === expected ? r.status : `${r.status} ${JSON.stringify(r.body)}`);
    expect(Object.fromEntries(changes.map((c, i) => [c.what, seen(answers[i]!, c.answers)])))
      .toEqual(Object.fromEntries(changes.map((c) => [c.what, c.answers])));
  }, 60_000);

  // A role change holds both memberships (NO KEY UPDATE) while it disables the routes its member configured; a
  // project's deletion holds that project's live subscriptions (deleteWithSubscriptions) for as long as its cascade
  // runs. So the removal waits for the deletion, and the remover's every other change waits for the removal, however
  // the deletion ends: each must outlast 5 s.
  it("a member's removal waiting 6 s for a project's deletion (which holds their subscription), and the remover's next change waiting for it: both land once the deletion commits (204, 201), not 503", async () => {
    const org = await createOrg(wide);
    const project = await insertProject(wide, org.id);
    const leaving = await createUserInOrg(wide, org.id, 'admin', 'leaving-admin');
    const subscription = await subscribe(wide, leaving.token, { projectId: project.id }, ['finding.created']);
    let created!: Promise<request.Response>;
    const removed = await whileRowsHeld(wide,
      // As deleteWithSubscriptions holds them, for a cascade that takes a while.
      async (tx) => {
        await tx.$queryRaw`SELECT id FROM projects WHERE id = ${project.id} FOR UPDATE`;
        await tx.$queryRaw`SELECT id FROM webhook_subscriptions WHERE id = ${subscription} FOR NO KEY UPDATE`;
      },
      () => api().delete(`/api/v1/members/${leaving.id}`).set(bearer(org.owner.token)).then((r) => r),
      1,
      async (tx, holder) => {
        created = api().post('/api/v1/teams').set(bearer(org.owner.token)).send({ name: `Made meanwhile ${uniqueSuffix()}` }).then((r) => r);
        await untilBlockedBy(wide, holder, 2);
        await new Promise((r) => setTimeout(r, 6_000));
        await tx.project.delete({ where: { id: project.id } });
      },
    );
    expect([removed.status, (await created).status]).toEqual([204, 201]);
    expect(await wide.deps.prisma.membership.count({ where: { organizationId: org.id, userId: leaving.id } })).toBe(0);
  }, 30_000);
});

// The engine's report of a fingerprint already recorded updates that finding in a transaction that share-locks its
// assessment first (findings.service.ts updateRecordedFinding), after the statement that found it recorded and after a
// turn of its organization's: an assessment's deletion begun in between holds that row for as long as its cascade runs.
it("a finding recorded again while its assessment's row is held for 6 s by a deletion begun meanwhile, which then rolls back: updated (200), not 503", async () => {
  // One turn per organization, so that the report waits for it between its statement and its update.
  const narrow = await createHarness({ ORGANIZATION_WRITES_IN_FLIGHT: '1' });
  const [edited, deletion] = [new Client({ connectionString: narrow.config.databaseUrl }), new Client({ connectionString: narrow.config.databaseUrl })];
  await Promise.all([edited.connect(), deletion.connect()]);
  try {
    const t = await createOrg(narrow);
    const engine = await createKey(narrow, t.admin.token, ['assessments:update']);
    const [project, busy] = [await insertProject(narrow, t.id), await insertProject(narrow, t.id)];
    const assessment = await insertAssessmentIn(narrow, t.id, project.id, 'running');
    const finding = await insertFinding(narrow, assessment);
    const turns = narrow.app.locals.organizationTurns as OrganizationTurns;
    const until = async (what: string, done: () => boolean) => {
      for (let waited = 0; !done(); waited += 20) {
        if (waited > 15_000) throw new Error(`never ${what}: ${JSON.stringify(turns.load(t.id))}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    // The organization's one turn, taken by an edit of another project that waits for that project's row.
    await edited.query('BEGIN');
    await edited.query('SELECT id FROM projects WHERE id = $1 FOR UPDATE', [busy.id]);
    const edit = request(narrow.app).patch(`/api/v1/projects/${busy.id}`).set(bearer(t.owner.token)).send({ name: 'edited' }).then((r) => r);
    await untilBlockedBy(narrow, await backendPid(edited), 1);
    const recorded = request(narrow.app).post(`/api/v1/assessments/${assessment.id}/findings`).set(bearer(engine))
      .send({ title: 'seen again', severity: 'low', fingerprint: finding.fingerprint }).then((r) => r);
    await until('the report waiting for a turn', () => turns.load(t.id).waiting === 1);
    // The assessment's deletion begins (its row held as deleteWithSubscriptions holds it); then the turn is free.
    await deletion.query('BEGIN');
    await deletion.query('SELECT id FROM assessments WHERE id = $1 FOR UPDATE', [assessment.id]);
    await edited.query('ROLLBACK');
    expect((await edit).status).toBe(200);
    await untilBlockedBy(narrow, await backendPid(deletion), 1);
    await new Promise((r) => setTimeout(r, 6_000));
    // Refused, or failed, after its wait (a deletion that commits makes this a 409 even after a 5-s transaction: the
    // report then stops at the row it no longer finds; one that does not, the report goes on to its update).
    await deletion.query('ROLLBACK');
    const res = await recorded;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: finding.id, title: 'seen again' });
  } finally {
    await Promise.all([edited.end(), deletion.end()]);
    await narrow.close();
  }
}, 30_000);

// A shared report's view counts itself on the share's row (shared-report.service.ts recordAccess), which its project's,
// assessment's or report's deletion holds from its cascade until it commits.
it.each([
  { end: 'commits', answers: 404, body: { detail: 'Report not found.' } },
  { end: 'rolls back', answers: 200, body: expect.objectContaining({ download_path: expect.any(String) }) },
])("a shared report viewed while its project's deletion runs for 6 s and then $end: $answers, not 500 or 503", async ({ end, answers, body }) => {
  const project = await insertProject(h, org.id);
  const report = await insertReadyReport(h, org.id, (await insertAssessmentIn(h, org.id, project.id, 'completed')).id);
  const published = await request(h.app).post(`/api/v1/reports/${report.id}/publication`).set(bearer(org.owner.token)).send({});
  expect(published.status).toBe(201);
  const token = String(published.body.url).split('/').pop()!;
  const res = await whileRowsHeld(h,
    // As the cascade of the project's deletion holds it, for a while.
    (tx) => tx.$queryRaw`SELECT id FROM report_shares WHERE report_id = ${report.id} FOR UPDATE`,
    () => request(h.app).get(`/api/v1/shared/reports/${token}`).then((r) => r),
    1,
    async (tx) => {
      await new Promise((r) => setTimeout(r, 6_000));
      if (end === 'commits') await tx.project.delete({ where: { id: project.id } });
    },
  );
  expect(res.status).toBe(answers);
  expect(res.body).toEqual(body);
}, 30_000);

// An invitation's acceptance claims its row (invitations.service.ts joinInvitedOrganization), which the cascade of its
// organization's deletion holds until that commits.
it.each([
  { end: 'commits', answers: 400 },
  { end: 'rolls back', answers: 200 },
])("an invitation accepted while its organization's deletion runs for 6 s and then $end: $answers, not 503", async ({ end, answers }) => {
  const inviting = await createOrg(h);
  const email = `invitee-${uniqueSuffix()}@example.test`;
  const invited = await request(h.app).post('/api/v1/invitations').set(bearer(inviting.owner.token)).send({ email, role: 'member' });
  expect(invited.status).toBe(201);
  const link = h.mail().filter((m) => m.to === email).map((m) => /accept-invite\?token=([A-Za-z0-9_-]+)/.exec(m.text)?.[1]).find(Boolean);
  const res = await whileRowsHeld(h,
    // As the cascade of the organization's deletion holds it, for a while.
    (tx) => tx.$queryRaw`SELECT id FROM invitations WHERE id = ${invited.body.id} FOR UPDATE`,
    () => request(h.app).post('/api/v1/invitations/accept').send({ token: link, name: 'Invited Person', password: 'a brand new passphrase' }).then((r) => r),
    1,
    async (tx) => {
      await new Promise((r) => setTimeout(r, 6_000));
      if (end === 'commits') await tx.organization.delete({ where: { id: inviting.id } });
    },
  );
  expect(res.status).toBe(answers);
  expect(await h.deps.prisma.user.count({ where: { email } })).toBe(end === 'commits' ? 0 : 1);
}, 30_000);
