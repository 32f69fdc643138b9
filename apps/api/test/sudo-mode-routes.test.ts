// The `sudoMode` flag of a route (http/route.ts: its Idempotency-Keys belong to the session) and the password check
// of its service (reauthentication.ts confirmSensitiveChange) are written in two places. This test holds them
// together: every flagged route asks a session signed in long ago for the password, and the table below names every
// flagged route, so a route that starts asking without the flag (or the other way round) fails here.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { A_WHILE_AGO, signedInAgo } from './support/reauthentication';
import { bearer, createOrg, insertAssessment, insertProject, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import { insertReadyReport, PUBLIC_URL, subscribe, type Level } from './support/domain';
import { apiRoutes } from '../src/routes';
import type { RateLimiters } from '../src/http/rate-limit';

let h: Harness;
let org: TestOrg;
let project: string;
let assessment: string;
const subscriptionAt: Record<string, string> = {};
let notificationTarget: string;
let report: string;
let issueTarget: string;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
  project = (await insertProject(h, org.id)).id;
  assessment = (await insertAssessment(h, org.id, project)).id;
  const levels: Record<string, Level> = { org: { org: true }, project: { projectId: project }, assessment: { assessmentId: assessment } };
  for (const [name, level] of Object.entries(levels)) subscriptionAt[name] = await subscribe(h, org.owner.token, level, ['finding.created']);
  notificationTarget = (
    await request(h.app)
      .post('/api/v1/notification-targets')
      .set(bearer(org.owner.token))
      .send({ kind: 'slack', name: 'chat', url: PUBLIC_URL, events: ['report.ready'] })
  ).body.id;
  report = (await insertReadyReport(h, org.id, assessment)).id;
  issueTarget = (
    await request(h.app)
      .post('/api/v1/issue-export-targets')
      .set(bearer(org.owner.token))
      .send({ kind: 'github', name: 'tracker', repository: 'acme/web', token: 'ghp_sudoModeRoutes0123' })
  ).body.id;
  await signedInAgo(h, org.owner.token, A_WHILE_AGO);
});
afterAll(() => h.close());

type Call = () => request.Test;
const api = () => request(h.app);
const asOwner = (test: request.Test) => test.set(bearer(org.owner.token));
const ELSEWHERE = 'https://203.0.114.10/elsewhere';

/** For each of the three webhook levels: the base of its routes, as declared and as called. */
const webhookLevels = () => [
  { declared: '/webhooks', called: '/api/v1/webhooks', sub: subscriptionAt.org },
  { declared: '/projects/:projectId/webhooks', called: `/api/v1/projects/${project}/webhooks`, sub: subscriptionAt.project },
  { declared: '/assessments/:assessmentId/webhooks', called: `/api/v1/assessments/${assessment}/webhooks`, sub: subscriptionAt.assessment },
];

/** A request each sudo-mode route would carry out for a recently signed-in session, keyed as `METHOD path`. */
function askingRequests(): Record<string, Call> {
  const calls: Record<string, Call> = {
    'POST /api-keys': () => asOwner(api().post('/api/v1/api-keys')).send({ name: 'ci', scopes: ['projects:read'] }),
    'POST /invitations': () => asOwner(api().post('/api/v1/invitations')).send({ email: 'newcomer@example.test', role: 'member' }),
    'PATCH /members/:user_id': () => asOwner(api().patch(`/api/v1/members/${org.member.id}`)).send({ role: 'admin' }),
    'DELETE /organization': () => asOwner(api().delete('/api/v1/organization')).send({ confirm: org.name }),
    'POST /organization/transfer-ownership': () => asOwner(api().post('/api/v1/organization/transfer-ownership')).send({ user_id: org.admin.id }),
    'POST /notification-targets': () =>
      asOwner(api().post('/api/v1/notification-targets')).send({ kind: 'slack', name: 'chat', url: ELSEWHERE, events: ['report.ready'] }),
    'PATCH /notification-targets/:id': () => asOwner(api().patch(`/api/v1/notification-targets/${notificationTarget}`)).send({ url: ELSEWHERE }),
    'POST /reports/:id/publication': () => asOwner(api().post(`/api/v1/reports/${report}/publication`)).send({}),
    'POST /reports/:id/shares': () => asOwner(api().post(`/api/v1/reports/${report}/shares`)).send({ email: 'auditor@example.test' }),
    'POST /issue-export-targets': () =>
      asOwner(api().post('/api/v1/issue-export-targets')).send({ kind: 'github', name: 'gh', repository: 'acme/api', token: 'ghp_sudoModeRoutes4567' }),
    'PATCH /issue-export-targets/:id': () => asOwner(api().patch(`/api/v1/issue-export-targets/${issueTarget}`)).send({ repository: 'thief/loot' }),
    'POST /integrations': () =>
      asOwner(api().post('/api/v1/integrations')).send({ kind: 'slack', name: 'Slack', bot_token: 'xoxb-1111-2222-sudomoderoutes', workspace_id: 'T0123ABCD' }),
  };
  for (const level of webhookLevels()) {
    const subs = `${level.called}/subscriptions`;
    calls[`POST ${level.declared}/subscriptions`] = () =>
      asOwner(api().post(subs)).send({ name: 'siem', url: ELSEWHERE, events: ['finding.created'] });
    calls[`PATCH ${level.declared}/subscriptions/:id`] = () => asOwner(api().patch(`${subs}/${level.sub}`)).send({ url: ELSEWHERE });
    calls[`POST ${level.declared}/subscriptions/:id/rotate-secret`] = () => asOwner(api().post(`${subs}/${level.sub}/rotate-secret`));
  }
  return calls;
}

describe('sudo-mode routes', () => {
  it('the table names exactly the routes flagged sudoMode', () => {
    // Only the routes' flags are read: no limiter is called.
    const flagged = apiRoutes(h.deps, {} as RateLimiters)
      .filter((route) => route.sudoMode)
      .map((route) => `${route.method.toUpperCase()} ${route.path}`);
    expect(flagged.sort()).toEqual(Object.keys(askingRequests()).sort());
  });

  it.each(Object.keys(askingRequests()).map((route) => [route]))(
    '%s asks a session signed in long ago for the password',
    async (route) => {
      const res = await askingRequests()[route]();
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 403, code: 'REAUTHENTICATION_REQUIRED' });
    },
  );
});

describe("another organization's destinations", () => {
  // An old session of the attacker's organization aims each sudo-mode change that takes an id at the victim's
  // target or report: 404 like a missing id, never a password prompt (which would confirm the id exists), and the
  // victim's rows stay as they were.
  let victim: TestOrg;
  const ids: Record<string, string> = {};
  const victimRows = () =>
    Promise.all([
      h.deps.prisma.webhookSubscription.findMany({ where: { organizationId: victim.id }, orderBy: { id: 'asc' } }),
      h.deps.prisma.issueExportTarget.findMany({ where: { organizationId: victim.id }, orderBy: { id: 'asc' } }),
      h.deps.prisma.reportShare.findMany({ where: { organizationId: victim.id }, orderBy: { id: 'asc' } }),
    ]).then((rows) => JSON.stringify(rows));

  beforeAll(async () => {
    victim = await createOrg(h);
    const asVictim = (test: request.Test) => test.set(bearer(victim.owner.token));
    ids.target = (
      await asVictim(api().post('/api/v1/notification-targets')).send({ kind: 'slack', name: 'chat', url: PUBLIC_URL, events: ['report.ready'] })
    ).body.id;
    ids.tracker = (
      await asVictim(api().post('/api/v1/issue-export-targets')).send({ kind: 'github', name: 'gh', repository: 'victim/web', token: 'ghp_victimToken0123456789' })
    ).body.id;
    const victimProject = (await insertProject(h, victim.id)).id;
    ids.report = (await insertReadyReport(h, victim.id, (await insertAssessment(h, victim.id, victimProject)).id)).id;
    ids.subscription = await subscribe(h, victim.owner.token, { org: true }, ['finding.created']);
    expect(Object.values(ids).every(Boolean)).toBe(true);
  });

  it.each([
    ['PATCH /notification-targets/:id', () => asOwner(api().patch(`/api/v1/notification-targets/${ids.target}`)).send({ url: ELSEWHERE })],
    ['PATCH /issue-export-targets/:id', () => asOwner(api().patch(`/api/v1/issue-export-targets/${ids.tracker}`)).send({ repository: 'attacker/loot' })],
    ['POST /reports/:id/publication', () => asOwner(api().post(`/api/v1/reports/${ids.report}/publication`)).send({})],
    ['POST /reports/:id/shares', () => asOwner(api().post(`/api/v1/reports/${ids.report}/shares`)).send({ email: 'loot@example.test' })],
    ['PATCH /webhooks/subscriptions/:id', () => asOwner(api().patch(`/api/v1/webhooks/subscriptions/${ids.subscription}`)).send({ url: ELSEWHERE })],
    ['POST /webhooks/subscriptions/:id/rotate-secret', () => asOwner(api().post(`/api/v1/webhooks/subscriptions/${ids.subscription}/rotate-secret`))],
  ] as Array<[string, Call]>)('%s on the victim’s id answers 404 without asking, and changes nothing of the victim', async (_route, call) => {
    const before = await victimRows();
    const res = await call();
    expect([res.status, res.body.code]).toEqual([404, undefined]);
    // With the attacker's password it is the same 404.
    const withPassword = await call().send({ current_password: TEST_PASSWORD });
    expect(withPassword.status).toBe(404);
    expect(await victimRows()).toBe(before);
  });
});
