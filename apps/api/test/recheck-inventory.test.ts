// Every write route a role or a grant allows, and where its change is checked against the caller's role (and access)
// as committed, inside its transaction (access/own-role.ts, access.service.ts requireStillMayAccess). A new write
// route fails this test until it is listed: with the test that proves its re-check, or with why it has none.
import { createHarness, type Harness } from './support/harness';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const RACES = 'role-change-races.test.ts';
const WEBHOOK_BASES = ['/webhooks', '/projects/:projectId/webhooks', '/assessments/:assessmentId/webhooks'];

/** Route ("METHOD /path") -> the test file (and case) that proves its re-check, or "exempt: why". */
const RECHECKED: Record<string, string> = {
  'POST /api-keys': `${RACES}: an API key minted while its admin is demoted`,
  'DELETE /api-keys/:id': `${RACES}: a manager's API key revoked`,
  'PATCH /organization': `${RACES}: settings (a rename)`,
  'DELETE /organization': `${RACES}: an organization deleted by an owner who transferred ownership meanwhile`,
  'POST /organization/transfer-ownership': 'organizations.test.ts: lets only one of two concurrent transfers win (both memberships locked, lockOwnRoleAndMember)',
  'PUT /organization/api-key-policy': `${RACES}: settings (the API-key policy)`,
  'PATCH /members/:user_id': `${RACES}: a member raised to admin by an admin demoted meanwhile`,
  'DELETE /members/:user_id': `${RACES}: a member removed by an admin demoted meanwhile`,
  'POST /invitations': `${RACES}: an invitation sent while its admin is demoted`,
  'DELETE /invitations/:id': `${RACES}: an invitation revoked`,
  'POST /teams': `${RACES}: a team created`,
  'PATCH /teams/:id': `${RACES}: a team renamed`,
  'DELETE /teams/:id': `${RACES}: a team deleted`,
  'PUT /teams/:id/members/:user_id': `${RACES}: a team member added`,
  'DELETE /teams/:id/members/:user_id': `${RACES}: a team member removed`,
  'POST /projects': `${RACES}: a project created`,
  'PATCH /projects/:id': `${RACES}: a project renamed`,
  'DELETE /projects/:id': `${RACES}: a project deleted by a manager whose write grant is revoked`,
  'POST /projects/:id/assessments': `${RACES}: an assessment created`,
  'PATCH /assessments/:id': `${RACES}: an assessment's notes edited`,
  'DELETE /assessments/:id': `${RACES}: a deletion by an admin demoted to member (an assessment)`,
  'POST /assessments/:id/launch': `${RACES}: an assessment's launch`,
  'POST /assessments/:id/cancel': `${RACES}: an assessment's cancel`,
  'POST /assessments/:id/emergency-stop': `${RACES}: an assessment's emergency-stop`,
  'POST /assessments/:id/archive': `${RACES}: an assessment's archive`,
  'POST /assessments/:id/unarchive': 'resend-races.test.ts: the unarchive case',
  'POST /assessments/:id/start': `${RACES}: an assessment's start`,
  'POST /assessments/:id/complete': `${RACES}: an assessment's complete; an engine's API key completing an assessment`,
  'POST /assessments/:id/fail': `${RACES}: an assessment's fail`,
  'POST /projects/:id/access': `${RACES}: a write grant given by an admin demoted to manager meanwhile`,
  'DELETE /projects/:id/access/:grant_id': `${RACES}: an access grant revoked`,
  'POST /assessments/:id/access': 'the same function as POST /projects/:id/access (grants.service.ts upsertGrant)',
  'DELETE /assessments/:id/access/:grant_id': 'the same function as DELETE /projects/:id/access/:grant_id (grants.service.ts deleteGrant)',
  ...Object.fromEntries(WEBHOOK_BASES.flatMap((base) => [
    [`POST ${base}/subscriptions`, `${RACES}: a webhook subscription created by an admin demoted to manager; one function for the three levels`],
    [`PATCH ${base}/subscriptions/:id`, `${RACES}: a webhook subscription pointed elsewhere by an admin demoted to manager`],
    [`DELETE ${base}/subscriptions/:id`, `${RACES}: a webhook subscription deleted`],
    [`POST ${base}/subscriptions/:id/rotate-secret`, `${RACES}: a signing secret rotated by an admin demoted to member meanwhile`],
    [`POST ${base}/subscriptions/:id/test`, `${RACES}: a test delivery sent`],
    [`POST ${base}/deliveries/:id/resend`, `${RACES}: a failed delivery's resend`],
    [`POST ${base}/subscriptions/:id/recover`, `${RACES}: a failed delivery's recover`],
  ])),
  'POST /notification-targets': `${RACES}: a notification target created by an admin demoted to manager`,
  'PATCH /notification-targets/:id': 'apps/worker/test/event-routing.test.ts: cannot leave a live route behind',
  'DELETE /notification-targets/:id': `${RACES}: a notification target revoked`,
  'POST /notification-targets/:id/test': `${RACES}: a test message sent to a notification target`,
  'POST /issue-export-targets': `${RACES}: hand-outs (an issue tracker)`,
  'PATCH /issue-export-targets/:id': `${RACES}: an issue tracker pointed at another repository`,
  'DELETE /issue-export-targets/:id': `${RACES}: an issue tracker revoked`,
  'POST /findings/:id/issue-exports': `${RACES}: a finding exported to an issue tracker`,
  'POST /assessments/:id/findings': 'exempt: the engine\'s hot path; its access is read as the request is answered (docs/api.md)',
  'POST /findings/:id/confirm': `${RACES}: a finding a member confirms while their write grant is revoked`,
  'POST /findings/:id/dismiss': 'the same function as confirm (findings.service.ts setFindingStatus)',
  'POST /findings/:id/mark-fixed': 'the same function as confirm (findings.service.ts setFindingStatus)',
  'POST /findings/:id/accept-risk': `${RACES}: a risk accepted`,
  'POST /findings/:id/suppress': `${RACES}: a finding suppressed`,
  'POST /findings/:id/reassign': `${RACES}: a finding a member reassigns while their write grant is revoked`,
  'POST /findings/:id/severity': `${RACES}: a finding's severity overridden; recheck-waits.test.ts`,
  'PUT /governance/sla': `${RACES}: settings (the SLA policy)`,
  'POST /governance/erasure-requests': `${RACES}: settings (an erasure request filed)`,
  'POST /governance/erasure-requests/:id/confirm': `${RACES}: settings (an erasure request confirmed)`,
  'POST /governance/erasure-requests/:id/cancel': `${RACES}: settings (an erasure request cancelled)`,
  'POST /governance/erasure-requests/:id/retry': 'the same function as confirm and cancel (erasure.service.ts transition)',
  'POST /integrations': `${RACES}: hand-outs (an integration)`,
  'DELETE /integrations/:id': `${RACES}: an integration disconnected`,
  'PUT /integrations/:id/teams/:team_id': `${RACES}: an integration bound to a team`,
  'DELETE /integrations/:id/teams/:team_id': `${RACES}: an integration unbound from a team`,
  'POST /assessments/:id/reports': `${RACES}: a report generated`,
  'POST /reports/:id/publication': `${RACES}: hand-outs (a published report URL)`,
  'DELETE /reports/:id/publication': `${RACES}: a report's published URL revoked`,
  'POST /reports/:id/shares': `${RACES}: hand-outs (a report shared by e-mail)`,
  'DELETE /reports/:id/shares/:share_id': `${RACES}: a report's e-mail share revoked`,
  'POST /findings/:id/fix-verifications': `${RACES}: a fix verification started`,
  'POST /fix-verifications/:id/complete': `${RACES}: a fix verification completed`,
  'POST /projects/:id/pr-reviews': `${RACES}: a PR review recorded`,
  'POST /findings/:id/monitoring-checks': `${RACES}: a regression recorded by monitoring`,
  'POST /usage': `${RACES}: settings (usage recorded)`,
  'POST /billing/limits': `${RACES}: settings (a spend threshold)`,
  'PATCH /billing/limits/:id': 'the same check as POST and DELETE (spend.service.ts lockSpendForChange)',
  'DELETE /billing/limits/:id': `${RACES}: settings (a spend limit deleted)`,
  'PUT /projects/:id/source': `${RACES}: a project's source changed`,
  'DELETE /projects/:id/source': `${RACES}: a project's source removed`,
  'POST /assessments/:id/source': `${RACES}: an assessment's source uploaded by an admin demoted to manager`,
};

it('lists every write route a role or a grant allows (the caller\'s own account aside), each with its re-check or why it has none', () => {
  const writes = (h.app.locals.routes as Array<{ method: string; path: string; scope: string }>)
    .filter((r) => r.method !== 'get' && r.scope !== 'public' && r.scope !== 'profile:update')
    .map((r) => `${r.method.toUpperCase()} ${r.path}`);
  expect(writes.filter((route) => !(route in RECHECKED))).toEqual([]);
  expect(Object.keys(RECHECKED).filter((route) => !writes.includes(route))).toEqual([]);
});
