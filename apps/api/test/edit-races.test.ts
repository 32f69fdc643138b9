// An edit of a project or an assessment, or a grant on it (re-checked against the caller's access as committed, which
// holds the grants that access rests on) racing the deletion of what it changes (which holds the row, then cascades
// into those grants): the edit waits for the deletion and then answers 404, never a deadlock's 409, never a 500. And
// an edit waiting for that access does not hold up the engine's writes to the assessment.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertGrant, insertProject, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, insertReadyReport } from './support/domain';
import { queuedBehind, untilBlockedBy, whileRowsHeld } from './support/row-locks';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

type Race = {
  what: string;
  /** The row held while the deletion, then the edit, queue behind it; the deletion's path; the edit. */
  make: (editor: { token: string; id: string }) => Promise<{ held: string; id: string; deletion: string; edit: () => request.Test }>;
};

const HOLD_PROJECT = 'SELECT id FROM projects WHERE id = $1 FOR UPDATE';
const HOLD_ASSESSMENT = 'SELECT id FROM assessments WHERE id = $1 FOR UPDATE';

/** A project on which `editor` holds a write grant of their own. */
async function grantedProject(editor: { id: string }) {
  const project = await insertProject(h, org.id);
  await insertGrant(h, org.id, { projectId: project.id }, { userId: editor.id }, 'write');
  return project;
}

const races: Race[] = [
  {
    what: "an assessment's notes edited while it is deleted (the editor's grant on the assessment)",
    make: async (editor) => {
      const assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
      await insertGrant(h, org.id, { assessmentId: assessment.id }, { userId: editor.id }, 'write');
      return {
        held: HOLD_ASSESSMENT,
        id: assessment.id,
        deletion: `/api/v1/assessments/${assessment.id}`,
        edit: () => request(h.app).patch(`/api/v1/assessments/${assessment.id}`).set(bearer(editor.token)).send({ notes: 'meanwhile' }),
      };
    },
  },
  {
    what: 'a project renamed while it is deleted (the editor\'s grant on the project)',
    make: async (editor) => {
      const project = await grantedProject(editor);
      return {
        held: HOLD_PROJECT,
        id: project.id,
        deletion: `/api/v1/projects/${project.id}`,
        edit: () => request(h.app).patch(`/api/v1/projects/${project.id}`).set(bearer(editor.token)).send({ name: `Renamed ${project.id}` }),
      };
    },
  },
  {
    what: "an assessment's notes edited while its project is deleted (the editor's grant on the project)",
    make: async (editor) => {
      const project = await insertProject(h, org.id);
      const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
      await insertGrant(h, org.id, { projectId: project.id }, { userId: editor.id }, 'write');
      return {
        held: HOLD_ASSESSMENT,
        id: assessment.id,
        deletion: `/api/v1/projects/${project.id}`,
        edit: () => request(h.app).patch(`/api/v1/assessments/${assessment.id}`).set(bearer(editor.token)).send({ notes: 'meanwhile' }),
      };
    },
  },
  {
    what: "a project's source attached while the project is deleted (the editor's grant on the project)",
    make: async (editor) => {
      const project = await grantedProject(editor);
      return {
        held: HOLD_PROJECT,
        id: project.id,
        deletion: `/api/v1/projects/${project.id}`,
        edit: () => request(h.app).put(`/api/v1/projects/${project.id}/source`).set(bearer(editor.token))
          .send({ type: 'repository', url: 'https://203.0.114.10/acme/web.git', default_branch: 'main' }),
      };
    },
  },
  {
    what: 'a grant given while its project is deleted (the giver\'s grant on the project)',
    make: async (editor) => {
      const project = await grantedProject(editor);
      return {
        held: HOLD_PROJECT,
        id: project.id,
        deletion: `/api/v1/projects/${project.id}`,
        edit: () => request(h.app).post(`/api/v1/projects/${project.id}/access`).set(bearer(editor.token)).send({ user_id: org.member.id, access: 'read' }),
      };
    },
  },
];

it.each(races)('$what: the deletion 204, the edit 404', async ({ make }) => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'editing-manager');
  const race = await make(manager);
  const [deletion, edit] = await queuedBehind(h, race.held, [race.id], [
    () => request(h.app).delete(race.deletion).set(bearer(org.owner.token)),
    race.edit,
  ]);
  expect(deletion!.status).toBe(204);
  expect(edit!.status).toBe(404);
});

it("an assessment's notes edited by an admin while it is deleted: 404, not a 500", async () => {
  const admin = await createUserInOrg(h, org.id, 'admin', 'editing-admin');
  const assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
  const [deletion, edit] = await queuedBehind(h, HOLD_ASSESSMENT, [assessment.id], [
    () => request(h.app).delete(`/api/v1/assessments/${assessment.id}`).set(bearer(org.owner.token)),
    () => request(h.app).patch(`/api/v1/assessments/${assessment.id}`).set(bearer(admin.token)).send({ notes: 'meanwhile' }),
  ]);
  expect(deletion!.status).toBe(204);
  expect(edit!.status).toBe(404);
  expect(edit!.body).toEqual({ detail: 'Assessment not found.' });
});

it("who may still edit: a manager writing through a team's grant and their key with assessments:update; another organization's owner gets 404", async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'team-manager');
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'running');
  const team = await request(h.app).post('/api/v1/teams').set(bearer(org.owner.token)).send({ name: `Editors ${manager.id}` });
  expect((await request(h.app).put(`/api/v1/teams/${team.body.id}/members/${manager.id}`).set(bearer(org.owner.token))).status).toBe(200);
  await insertGrant(h, org.id, { projectId: project.id }, { teamId: team.body.id }, 'write');
  const key = await createKey(h, manager.token, ['assessments:update', 'assessments:read']);
  const other = await createOrg(h);
  const edit = (token: string, notes: string) => request(h.app).patch(`/api/v1/assessments/${assessment.id}`).set(bearer(token)).send({ notes });
  expect((await edit(manager.token, 'by session')).body).toMatchObject({ notes: 'by session' });
  expect((await edit(key, 'by key')).body).toMatchObject({ notes: 'by key' });
  const outsider = await edit(other.owner.token, 'from outside');
  expect(outsider.status).toBe(404);
  expect((await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: assessment.id } })).notes).toBe('by key');
});

it("a report published by a manager (read grant on its assessment) while the assessment is deleted: the deletion 204, the publication 404, never a deadlock's 409", async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'publishing-manager');
  const assessment = await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed');
  await insertGrant(h, org.id, { assessmentId: assessment.id }, { userId: manager.id }, 'read');
  const report = await insertReadyReport(h, org.id, assessment.id);
  let deletion!: Promise<request.Response>;
  let deleted = false;
  // The publication waits for the manager's membership (held here); the deletion goes meanwhile. Publishing used to
  // hold the report's row by then, which the deletion's cascade reaches after the manager's grant: a cycle once the
  // publication went on to hold that grant.
  const publication = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${manager.id} FOR NO KEY UPDATE`,
    () => request(h.app).post(`/api/v1/reports/${report.id}/publication`).set(bearer(manager.token)).send({ current_password: TEST_PASSWORD }).then((r) => r),
    1,
    async (_tx, holder) => {
      deletion = request(h.app).delete(`/api/v1/assessments/${assessment.id}`).set(bearer(org.owner.token)).then((r) => { deleted = true; return r; });
      // It answers at once, or (the report's row held by the publication) waits behind it.
      await untilBlockedBy(h, holder, 2, { orDone: () => deleted });
    },
  );
  expect((await deletion).status).toBe(204);
  expect(publication.status).toBe(404);
  expect(publication.body).toEqual({ detail: 'Report not found.' });
});

it("a notes edit waiting for the access it rests on (a team membership held) does not hold up the engine's writes to the assessment", async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'waiting-editor');
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'running');
  const team = await request(h.app).post('/api/v1/teams').set(bearer(org.owner.token)).send({ name: `Waiting ${manager.id}` });
  expect((await request(h.app).put(`/api/v1/teams/${team.body.id}/members/${manager.id}`).set(bearer(org.owner.token))).status).toBe(200);
  await insertGrant(h, org.id, { projectId: project.id }, { teamId: team.body.id }, 'write');
  const edit = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT team_id FROM team_members WHERE user_id = ${manager.id} FOR UPDATE`,
    () => request(h.app).patch(`/api/v1/assessments/${assessment.id}`).set(bearer(manager.token)).send({ notes: 'after the engine' }).then((r) => r),
    1,
    // What the engine's transitions take on the row (an UPDATE), with a bound: it must not wait for the edit.
    () => h.deps.prisma.$transaction(async (engine) => {
      await engine.$executeRaw`SET LOCAL lock_timeout = '2s'`;
      await engine.assessment.update({ where: { id: assessment.id }, data: { summary: { written: 'by the engine' } } });
    }),
  );
  expect(edit.status).toBe(200);
  expect(await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: assessment.id } })).toMatchObject({ notes: 'after the engine', summary: { written: 'by the engine' } });
});
