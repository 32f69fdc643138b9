// Another organization's resources answer 404 exactly like missing ones, on every route of the tenancy modules,
// and nothing of the victim organization changes. The attacker is the owner of another organization: it holds
// every scope, so nothing but tenancy stands in the way.
import request from 'supertest';
import { newId } from '@svc/db';
import type { RouteSpec } from '../src/http/route';
import { assessmentRoutes } from '../src/modules/assessments/assessments.routes';
import { grantRoutes } from '../src/modules/grants/grants.routes';
import { invitationRoutes } from '../src/modules/invitations/invitations.routes';
import type { RateLimiters } from '../src/http/rate-limit';
import { memberRoutes } from '../src/modules/members/members.routes';
import { organizationRoutes } from '../src/modules/organizations/organizations.routes';
import { projectRoutes } from '../src/modules/projects/projects.routes';
import { teamRoutes } from '../src/modules/teams/teams.routes';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertGrant, insertProject, type TestOrg } from './support/fixtures';

let h: Harness;
let victim: TestOrg;
let attacker: TestOrg;

interface Ids {
  user: string;
  owner: string;
  team: string;
  project: string;
  assessment: string;
  projectGrant: string;
  assessmentGrant: string;
  invitation: string;
}
let real: Ids; // the victim's
let own: { project: string; assessment: string; team: string }; // the attacker's

const fakeIds = (): Ids => ({
  user: newId('usr'),
  owner: newId('usr'),
  team: newId('team'),
  project: newId('prj'),
  assessment: newId('asm'),
  projectGrant: newId('grant'),
  assessmentGrant: newId('grant'),
  invitation: newId('inv'),
});
const malformedIds = (): Ids => ({
  user: 'usr_x',
  owner: '..',
  team: 'team_%27',
  project: 'x'.repeat(150),
  assessment: 'asm_ZZZ',
  projectGrant: '0',
  assessmentGrant: 'grant_',
  invitation: 'inv_-1',
});

beforeAll(async () => {
  h = await createHarness();
  [victim, attacker] = await Promise.all([createOrg(h), createOrg(h)]);
  const team = await request(h.app).post('/api/v1/teams').set(bearer(victim.admin.token)).send({ name: 'victim team' });
  await request(h.app).put(`/api/v1/teams/${team.body.id}/members/${victim.member.id}`).set(bearer(victim.admin.token));
  const project = await insertProject(h, victim.id, 'victim project');
  const assessment = await insertAssessment(h, victim.id, project.id, 'victim assessment');
  const pg = await insertGrant(h, victim.id, { projectId: project.id }, { userId: victim.member.id }, 'read');
  const ag = await insertGrant(h, victim.id, { assessmentId: assessment.id }, { teamId: team.body.id }, 'write');
  const inv = await request(h.app).post('/api/v1/invitations').set(bearer(victim.admin.token))
    .send({ email: `invitee-${Date.now()}@example.test`, role: 'member' });
  expect(inv.status).toBe(201);
  real = {
    user: victim.member.id,
    owner: victim.owner.id,
    team: team.body.id,
    project: project.id,
    assessment: assessment.id,
    projectGrant: pg.id,
    assessmentGrant: ag.id,
    invitation: inv.body.id,
  };
  const ownProject = await insertProject(h, attacker.id);
  const ownAssessment = await insertAssessment(h, attacker.id, ownProject.id);
  const ownTeam = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: attacker.id, name: 'attacker team' } });
  own = { project: ownProject.id, assessment: ownAssessment.id, team: ownTeam.id };
});
afterAll(() => h.close());

/** Everything the victim organization has, in a stable order: must be identical after every attack. */
async function snapshot(): Promise<string> {
  const db = h.deps.prisma;
  const orgId = victim.id;
  const byId = { orderBy: { id: 'asc' as const } };
  return JSON.stringify({
    org: await db.organization.findUnique({ where: { id: orgId } }),
    memberships: await db.membership.findMany({ where: { organizationId: orgId }, ...byId }),
    users: await db.user.findMany({ where: { memberships: { some: { organizationId: orgId } } }, ...byId }),
    invitations: await db.invitation.findMany({ where: { organizationId: orgId }, ...byId }),
    teams: await db.team.findMany({ where: { organizationId: orgId }, ...byId }),
    teamMembers: await db.teamMember.findMany({ where: { team: { organizationId: orgId } }, orderBy: [{ teamId: 'asc' }, { userId: 'asc' }] }),
    projects: await db.project.findMany({ where: { organizationId: orgId }, ...byId }),
    assessments: await db.assessment.findMany({ where: { organizationId: orgId }, ...byId }),
    grants: await db.accessGrant.findMany({ where: { organizationId: orgId }, ...byId }),
    sessions: await db.session.findMany({ where: { organizationId: orgId }, ...byId }),
  }, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
}

type Call = (ids: Ids) => request.Test;
const api = () => request(h.app);
const as = (req: request.Test) => req.set(bearer(attacker.owner.token));

/** Every route that takes an id of the organization's resources, with the attacker using the victim's ids. */
const cases: Array<{ route: string; name: string; call: Call }> = [
  { route: 'POST /organization/transfer-ownership', name: "to the victim's member", call: (i) => as(api().post('/api/v1/organization/transfer-ownership').send({ user_id: i.user })) },
  { route: 'PATCH /members/:user_id', name: "the victim's member", call: (i) => as(api().patch(`/api/v1/members/${i.user}`).send({ role: 'admin' })) },
  { route: 'PATCH /members/:user_id', name: "the victim's owner", call: (i) => as(api().patch(`/api/v1/members/${i.owner}`).send({ role: 'member' })) },
  { route: 'DELETE /members/:user_id', name: "the victim's member", call: (i) => as(api().delete(`/api/v1/members/${i.user}`)) },
  { route: 'DELETE /members/:user_id', name: "the victim's owner", call: (i) => as(api().delete(`/api/v1/members/${i.owner}`)) },
  { route: 'DELETE /invitations/:id', name: "the victim's invitation", call: (i) => as(api().delete(`/api/v1/invitations/${i.invitation}`)) },
  { route: 'GET /teams/:id', name: "the victim's team", call: (i) => as(api().get(`/api/v1/teams/${i.team}`)) },
  { route: 'PATCH /teams/:id', name: "the victim's team", call: (i) => as(api().patch(`/api/v1/teams/${i.team}`).send({ name: 'pwned' })) },
  { route: 'DELETE /teams/:id', name: "the victim's team", call: (i) => as(api().delete(`/api/v1/teams/${i.team}`)) },
  { route: 'GET /teams/:id/members', name: "the victim's team", call: (i) => as(api().get(`/api/v1/teams/${i.team}/members`)) },
  { route: 'PUT /teams/:id/members/:user_id', name: "the victim's team and member", call: (i) => as(api().put(`/api/v1/teams/${i.team}/members/${i.user}`)) },
  { route: 'PUT /teams/:id/members/:user_id', name: "the victim's team, an own member", call: (i) => as(api().put(`/api/v1/teams/${i.team}/members/${attacker.member.id}`)) },
  { route: 'PUT /teams/:id/members/:user_id', name: "an own team, the victim's member", call: (i) => as(api().put(`/api/v1/teams/${own.team}/members/${i.user}`)) },
  { route: 'DELETE /teams/:id/members/:user_id', name: "the victim's team and member", call: (i) => as(api().delete(`/api/v1/teams/${i.team}/members/${i.user}`)) },
  { route: 'GET /projects/:id', name: "the victim's project", call: (i) => as(api().get(`/api/v1/projects/${i.project}`)) },
  { route: 'PATCH /projects/:id', name: "the victim's project", call: (i) => as(api().patch(`/api/v1/projects/${i.project}`).send({ archived: true })) },
  { route: 'DELETE /projects/:id', name: "the victim's project", call: (i) => as(api().delete(`/api/v1/projects/${i.project}`)) },
  { route: 'POST /projects/:id/assessments', name: "the victim's project", call: (i) => as(api().post(`/api/v1/projects/${i.project}/assessments`).send({ name: 'x' })) },
  { route: 'GET /assessments/:id', name: "the victim's assessment", call: (i) => as(api().get(`/api/v1/assessments/${i.assessment}`)) },
  { route: 'PATCH /assessments/:id', name: "the victim's assessment", call: (i) => as(api().patch(`/api/v1/assessments/${i.assessment}`).send({ notes: 'pwned' })) },
  { route: 'DELETE /assessments/:id', name: "the victim's assessment", call: (i) => as(api().delete(`/api/v1/assessments/${i.assessment}`)) },
  ...['launch', 'start', 'cancel', 'emergency-stop', 'archive', 'unarchive'].map((action) => ({
    route: `POST /assessments/:id/${action}`, name: "the victim's assessment", call: (i: Ids) => as(api().post(`/api/v1/assessments/${i.assessment}/${action}`)),
  })),
  { route: 'POST /assessments/:id/complete', name: "the victim's assessment", call: (i) => as(api().post(`/api/v1/assessments/${i.assessment}/complete`).send({ summary: 'pwned' })) },
  { route: 'POST /assessments/:id/fail', name: "the victim's assessment", call: (i) => as(api().post(`/api/v1/assessments/${i.assessment}/fail`).send({ reason: 'pwned' })) },
  { route: 'GET /projects/:id/access', name: "the victim's project", call: (i) => as(api().get(`/api/v1/projects/${i.project}/access`)) },
  { route: 'POST /projects/:id/access', name: "the victim's project, an own user", call: (i) => as(api().post(`/api/v1/projects/${i.project}/access`).send({ user_id: attacker.owner.id, access: 'write' })) },
  { route: 'POST /projects/:id/access', name: "an own project, the victim's user", call: (i) => as(api().post(`/api/v1/projects/${own.project}/access`).send({ user_id: i.user, access: 'write' })) },
  { route: 'POST /projects/:id/access', name: "an own project, the victim's team", call: (i) => as(api().post(`/api/v1/projects/${own.project}/access`).send({ team_id: i.team, access: 'write' })) },
  { route: 'DELETE /projects/:id/access/:grant_id', name: "the victim's project and grant", call: (i) => as(api().delete(`/api/v1/projects/${i.project}/access/${i.projectGrant}`)) },
  { route: 'DELETE /projects/:id/access/:grant_id', name: "an own project, the victim's grant", call: (i) => as(api().delete(`/api/v1/projects/${own.project}/access/${i.projectGrant}`)) },
  { route: 'GET /assessments/:id/access', name: "the victim's assessment", call: (i) => as(api().get(`/api/v1/assessments/${i.assessment}/access`)) },
  { route: 'POST /assessments/:id/access', name: "the victim's assessment, an own user", call: (i) => as(api().post(`/api/v1/assessments/${i.assessment}/access`).send({ user_id: attacker.owner.id, access: 'write' })) },
  { route: 'POST /assessments/:id/access', name: "an own assessment, the victim's user", call: (i) => as(api().post(`/api/v1/assessments/${own.assessment}/access`).send({ user_id: i.user, access: 'read' })) },
  { route: 'POST /assessments/:id/access', name: "an own assessment, the victim's team", call: (i) => as(api().post(`/api/v1/assessments/${own.assessment}/access`).send({ team_id: i.team, access: 'read' })) },
  { route: 'DELETE /assessments/:id/access/:grant_id', name: "the victim's assessment and grant", call: (i) => as(api().delete(`/api/v1/assessments/${i.assessment}/access/${i.assessmentGrant}`)) },
  { route: 'DELETE /assessments/:id/access/:grant_id', name: "an own assessment, the victim's grant", call: (i) => as(api().delete(`/api/v1/assessments/${own.assessment}/access/${i.assessmentGrant}`)) },
];

/** Routes that take no id: they act on the caller's own organization; tested below for leaks and changes. */
const organizationLevel = [
  'GET /organization', 'PATCH /organization', 'DELETE /organization',
  'GET /members', 'GET /invitations', 'POST /invitations', 'POST /invitations/accept',
  'GET /teams', 'POST /teams', 'GET /projects', 'POST /projects', 'GET /assessments',
];

describe('cross-organization access', () => {
  it('covers every route of the tenancy modules', () => {
    // Only the routes' methods and paths are read: the limiters (invitation accept, sudo mode) are never called here.
    const invitations = (deps: typeof h.deps) => invitationRoutes(deps, {} as RateLimiters);
    const organization = (deps: typeof h.deps) => organizationRoutes(deps, {} as RateLimiters);
    const members = (deps: typeof h.deps) => memberRoutes(deps, {} as RateLimiters);
    const all: RouteSpec[] = [organization, members, invitations, teamRoutes, projectRoutes, assessmentRoutes, grantRoutes]
      .flatMap((routes) => routes(h.deps));
    const names = all.map((r) => `${r.method.toUpperCase()} ${r.path}`).sort();
    const covered = [...new Set([...cases.map((c) => c.route), ...organizationLevel])].sort();
    expect(covered).toEqual(names);
  });

  it.each(cases.map((c) => [`${c.route} (${c.name})`, c] as const))('%s answers 404 like a missing id and changes nothing', async (_label, c) => {
    const before = await snapshot();
    const res = await c.call(real);
    expect(res.status).toBe(404);
    expect(Object.keys(res.body)).toEqual(['detail']);
    expect(res.body.detail).toEqual(expect.any(String));
    expect(await snapshot()).toBe(before);
    // Indistinguishable from an id that does not exist, well-formed or not.
    const missing = await c.call(fakeIds());
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual(res.body);
    const malformed = await c.call(malformedIds());
    expect(malformed.status).toBe(404);
    expect(malformed.body).toEqual(res.body);
    // Nothing was created for the attacker either.
    expect(await h.deps.prisma.accessGrant.count({ where: { organizationId: attacker.id } })).toBe(0);
    expect(await h.deps.prisma.teamMember.count({ where: { teamId: own.team } })).toBe(0);
  });
});

describe('organization-level routes act on the caller\'s organization only', () => {
  let before: string;
  beforeAll(async () => {
    before = await snapshot();
  });

  const ids = (body: { data: Array<{ id?: string; user_id?: string }> }) => body.data.map((x) => x.id ?? x.user_id);
  const victimIds = () => Object.values(real);

  it('GET and PATCH /organization see and change only the caller\'s', async () => {
    const got = await as(api().get('/api/v1/organization'));
    expect(got.body.id).toBe(attacker.id);
    const patched = await as(api().patch('/api/v1/organization').send({ name: 'attacker renamed' }));
    expect(patched.body.id).toBe(attacker.id);
    expect((await h.deps.prisma.organization.findUniqueOrThrow({ where: { id: victim.id } })).name).toBe(victim.name);
  });

  it('DELETE /organization with the victim\'s name is refused (400) and deletes nothing', async () => {
    const res = await as(api().delete('/api/v1/organization').send({ confirm: victim.name }));
    expect(res.status).toBe(400);
    expect(await h.deps.prisma.organization.count({ where: { id: { in: [victim.id, attacker.id] } } })).toBe(2);
  });

  it('lists show nothing of the victim\'s', async () => {
    for (const path of ['/members', '/invitations', '/teams', '/projects', '/assessments', `/assessments?project_id=${real.project}`]) {
      const res = await as(api().get(`/api/v1${path}${path.includes('?') ? '&' : '?'}limit=100`));
      expect(res.status).toBe(200);
      const listed = ids(res.body);
      for (const id of victimIds()) expect(listed).not.toContain(id);
    }
    const assessments = await as(api().get(`/api/v1/assessments?project_id=${real.project}`));
    expect(assessments.body).toEqual({ data: [], next_cursor: null });
  });

  it('creating teams, projects and invitations lands in the caller\'s organization, whatever the victim has', async () => {
    const team = await as(api().post('/api/v1/teams').send({ name: 'victim team' }));
    expect(team.status).toBe(201);
    expect((await h.deps.prisma.team.findUniqueOrThrow({ where: { id: team.body.id } })).organizationId).toBe(attacker.id);
    const project = await as(api().post('/api/v1/projects').send({ name: 'victim project' }));
    expect((await h.deps.prisma.project.findUniqueOrThrow({ where: { id: project.body.id } })).organizationId).toBe(attacker.id);
    const inv = await as(api().post('/api/v1/invitations').send({ email: victim.member.email, role: 'member' }));
    expect(inv.status).toBe(201);
    expect((await h.deps.prisma.invitation.findUniqueOrThrow({ where: { id: inv.body.id } })).organizationId).toBe(attacker.id);
  });

  it('POST /invitations/accept is public: an invitation joins only its own organization', async () => {
    const address = `joiner-${Date.now()}@example.test`;
    await as(api().post('/api/v1/invitations').send({ email: address, role: 'member' }));
    const token = /token=([A-Za-z0-9_-]+)/.exec(h.mail().filter((m) => m.to === address).pop()!.text)![1];
    const res = await api().post('/api/v1/invitations/accept').send({ token, password: 'long enough password' });
    expect(res.status).toBe(200);
    expect(res.body.organization.id).toBe(attacker.id);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: victim.id, userId: res.body.user_id } })).toBe(0);
  });

  it('changed nothing of the victim organization', async () => {
    expect(await snapshot()).toBe(before);
  });
});
