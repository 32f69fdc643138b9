// Sudo mode (reauthentication.ts confirmSensitiveChange) on the routes that send the organization's findings to an
// issue tracker or its data to a connected GitHub or Slack: creating an issue-export target, changing where one points
// (its base_url, GitHub repository or Jira project), and connecting an integration. A session signed in within the
// window makes them as it is; an older one (a cookie left behind, or stolen) confirms with the current password, else
// 403 REAUTHENTICATION_REQUIRED and nothing changes. API keys are not asked; other fields, revoking, disconnecting,
// team bindings and exporting a finding never ask; a request that fails anyway answers its 4xx without asking.
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { A_WHILE_AGO, expectAskedForPassword, expectWrongPassword, failedPasswordChecks, signedInAgo } from './support/reauthentication';
import { bearer, createOrg, insertAssessment, insertProject, TEST_PASSWORD, type TestOrg, type TestUser } from './support/fixtures';
import { createKey, insertFinding } from './support/domain';
import { RECENT_SIGN_IN_WINDOW_MS } from '../src/modules/auth/reauthentication';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const TARGETS = '/api/v1/issue-export-targets';
const INTEGRATIONS = '/api/v1/integrations';
const HOST = 'https://203.0.114.10'; // a public address (outside the documentation ranges)
const WRONG = 'Wr0ng-but-distinctive-pa55';
const GITHUB = { kind: 'github', name: 'gh', repository: 'acme/web', token: 'ghp_trackerToken0123456789' };
const JIRA = { kind: 'jira', name: 'jira', base_url: `${HOST}/jira`, project_key: 'SEC', email: 'bot@example.com', api_token: 'jira-api-token-0123' };
const GITHUB_INTEGRATION = { kind: 'github', name: 'GitHub', token: 'ghp_integrationToken0123456789' };
const SLACK_INTEGRATION = { kind: 'slack', name: 'Slack', bot_token: 'xoxb-1111-2222-abcdefghijklmnop', workspace_id: 'T0123ABCD' };

const failedChecks = (user: TestUser, operation?: string) => failedPasswordChecks(h, user.id, operation);

const createTarget = (token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request(h.app).post(TARGETS).set({ ...bearer(token), ...headers }).send(body);
const patchTarget = (token: string, id: string, body: Record<string, unknown>) =>
  request(h.app).patch(`${TARGETS}/${id}`).set(bearer(token)).send(body);
const targetsOf = (org: TestOrg) => h.deps.prisma.issueExportTarget.count({ where: { organizationId: org.id } });
const storedTarget = (id: string) => h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } });

/** A target made by a session that just signed in (not asked); returns its id. */
async function madeTarget(org: TestOrg, body: Record<string, unknown>): Promise<string> {
  const res = await createTarget(org.admin.token, body);
  expect(res.status).toBe(201);
  return res.body.id as string;
}

const connect = (token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request(h.app).post(INTEGRATIONS).set({ ...bearer(token), ...headers }).send(body);
const integrationsOf = (org: TestOrg) => h.deps.prisma.integration.count({ where: { organizationId: org.id } });

/** Everything the organization's changes stored: the rows, their audit entries and the Idempotency-Key rows. */
async function storedRowsOf(org: TestOrg): Promise<string> {
  return JSON.stringify([
    await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id } }),
    await h.deps.prisma.issueExportTarget.findMany({ where: { organizationId: org.id } }),
    await h.deps.prisma.integration.findMany({ where: { organizationId: org.id } }),
    await h.deps.prisma.idempotencyKey.findMany({ where: { organizationId: org.id } }),
  ]);
}

describe('creating an issue-export target', () => {
  it('an older session is asked (403, nothing created); a wrong password is 400 and audited; the right one creates it', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expectAskedForPassword(await createTarget(org.admin.token, GITHUB));
    expectAskedForPassword(await createTarget(org.admin.token, JIRA));
    expect(await targetsOf(org)).toBe(0);

    expectWrongPassword(await createTarget(org.admin.token, { ...GITHUB, current_password: WRONG }));
    expect(await targetsOf(org)).toBe(0);
    const failures = await failedChecks(org.admin, 'issue_target_create');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ organizationId: org.id, metadata: { reason: 'invalid_current_password', operation: 'issue_target_create' } });
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'issue_export_target.created' } })).toBe(0);

    const github = await createTarget(org.admin.token, { ...GITHUB, current_password: TEST_PASSWORD }, { 'Idempotency-Key': `sudo-trackers-${uniqueSuffix()}` });
    expect(github.status).toBe(201);
    expect(github.body).toMatchObject({ kind: 'github', repository: 'acme/web' });
    expect((await createTarget(org.admin.token, { ...JIRA, current_password: TEST_PASSWORD })).status).toBe(201);
    expect(await targetsOf(org)).toBe(2);

    const stored = await storedRowsOf(org);
    expect(stored).not.toContain(TEST_PASSWORD);
    expect(stored).not.toContain(WRONG);
    expect(stored).not.toContain('"current_password"');
  });

  it('a session signed in within the window is not asked', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, RECENT_SIGN_IN_WINDOW_MS - 60_000);
    expect((await createTarget(org.admin.token, GITHUB)).status).toBe(201);
    expect((await createTarget(org.admin.token, JIRA)).status).toBe(201);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });

  it('an API key that may configure trackers is not asked', async () => {
    const org = await createOrg(h);
    const key = await createKey(h, org.admin.token, ['issue_exports:configure', 'issue_exports:read']);
    h.clock.advance(A_WHILE_AGO);
    try {
      expect((await createTarget(key, GITHUB)).status).toBe(201);
    } finally {
      h.clock.reset();
    }
  });

  it('a request that fails anyway answers its own 4xx, without asking for the password', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const privateUrl = await createTarget(org.admin.token, { ...JIRA, base_url: 'https://127.0.0.1/jira' });
    expect(privateUrl.status).toBe(422);
    expect(privateUrl.body.detail).toMatch(/^Issue tracker URL refused/);
    expect((await createTarget(org.admin.token, { ...GITHUB, repository: 'not a repository' })).status).toBe(400);
    expect((await createTarget(org.admin.token, { ...GITHUB, current_password: '' })).status).toBe(400);
    expect(await targetsOf(org)).toBe(0);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });
});

describe('changing an issue-export target', () => {
  it('a new base_url asks an older session; the stored one in another spelling does not', async () => {
    const org = await createOrg(h);
    const id = await madeTarget(org, { ...GITHUB, base_url: `${HOST}/api/v3` });
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    // Stored as the service normalised it: scheme and host lower-cased, the default port and a trailing slash dropped.
    expect((await patchTarget(org.admin.token, id, { base_url: 'HTTPS://203.0.114.10:443/api/v3/' })).status).toBe(200);
    const before = await storedTarget(id);
    expectAskedForPassword(await patchTarget(org.admin.token, id, { base_url: `${HOST}/other/api/v3` }));
    expect(await storedTarget(id)).toEqual(before);
    expect(await failedChecks(org.admin)).toHaveLength(0);
    const moved = await patchTarget(org.admin.token, id, { base_url: `${HOST}/other/api/v3`, current_password: TEST_PASSWORD });
    expect(moved.status).toBe(200);
    expect(moved.body.base_url).toBe(`${HOST}/other/api/v3`);
  });

  it('a new GitHub repository asks; the same one does not', async () => {
    const org = await createOrg(h);
    const id = await madeTarget(org, GITHUB);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expect((await patchTarget(org.admin.token, id, { repository: 'acme/web' })).status).toBe(200);
    expectAskedForPassword(await patchTarget(org.admin.token, id, { repository: 'thief/loot' }));
    expect((await storedTarget(id)).repository).toBe('acme/web');
    expectWrongPassword(await patchTarget(org.admin.token, id, { repository: 'thief/loot', current_password: WRONG }));
    expect((await storedTarget(id)).repository).toBe('acme/web');
    const failures = await failedChecks(org.admin, 'issue_target_destination_change');
    expect(failures).toHaveLength(1);
    expect(JSON.stringify(failures)).not.toContain(WRONG);
    expect((await patchTarget(org.admin.token, id, { repository: 'acme/api', current_password: TEST_PASSWORD })).status).toBe(200);
    expect((await storedTarget(id)).repository).toBe('acme/api');
    const stored = await storedRowsOf(org);
    expect(stored).not.toContain(TEST_PASSWORD);
    expect(stored).not.toContain(WRONG);
    expect(stored).not.toContain('"current_password"');
  });

  it('a new Jira project asks; the same one does not', async () => {
    const org = await createOrg(h);
    const id = await madeTarget(org, JIRA);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expect((await patchTarget(org.admin.token, id, { project_key: 'SEC' })).status).toBe(200);
    expectAskedForPassword(await patchTarget(org.admin.token, id, { project_key: 'LOOT' }));
    expect((await storedTarget(id)).projectKey).toBe('SEC');
    expect((await patchTarget(org.admin.token, id, { project_key: 'OPS', current_password: TEST_PASSWORD })).status).toBe(200);
    expect((await storedTarget(id)).projectKey).toBe('OPS');
  });

  it('the name, the issue type or new credentials alone never ask', async () => {
    const org = await createOrg(h);
    const github = await madeTarget(org, GITHUB);
    const jira = await madeTarget(org, JIRA);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expect((await patchTarget(org.admin.token, github, { name: 'renamed', token: 'ghp_replacedToken0123456789' })).status).toBe(200);
    expect((await patchTarget(org.admin.token, jira, { issue_type: 'Task', email: 'other@example.com', api_token: 'jira-api-token-4567' })).status).toBe(200);
    expect((await storedTarget(jira)).issueType).toBe('Task');
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });

  it('an API key is not asked for a new destination', async () => {
    const org = await createOrg(h);
    const id = await madeTarget(org, GITHUB);
    const key = await createKey(h, org.admin.token, ['issue_exports:configure', 'issue_exports:read']);
    h.clock.advance(A_WHILE_AGO);
    try {
      expect((await patchTarget(key, id, { repository: 'acme/api' })).status).toBe(200);
    } finally {
      h.clock.reset();
    }
  });

  it('a change that fails anyway answers its own 4xx, without asking for the password', async () => {
    const org = await createOrg(h);
    const id = await madeTarget(org, GITHUB);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const before = await storedTarget(id);
    // Unknown target; the other tracker's field; another host without the token again; a private address.
    expect((await patchTarget(org.admin.token, 'iexp_nope', { repository: 'thief/loot' })).status).toBe(404);
    expect((await patchTarget(org.admin.token, id, { repository: 'thief/loot', project_key: 'LOOT' })).status).toBe(422);
    const moved = await patchTarget(org.admin.token, id, { base_url: 'https://203.0.114.11/api/v3' });
    expect([moved.status, moved.body.detail]).toEqual([422, expect.stringContaining('needs token again')]);
    expect((await patchTarget(org.admin.token, id, { base_url: 'https://127.0.0.1/api/v3', token: 'ghp_replacedToken0123456789' })).status).toBe(422);
    // The password alone changes nothing.
    expect((await patchTarget(org.admin.token, id, { current_password: TEST_PASSWORD })).status).toBe(400);
    expect(await storedTarget(id)).toEqual(before);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });

  it('revoking a target and exporting a finding to one never ask', async () => {
    const org = await createOrg(h);
    const id = await madeTarget(org, GITHUB);
    const other = await madeTarget(org, { ...GITHUB, name: 'other' });
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessment(h, org.id, project.id);
    const finding = await insertFinding(h, assessment);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const exported = await request(h.app).post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(org.admin.token)).send({ target_id: id });
    expect(exported.status).toBe(202);
    expect((await request(h.app).delete(`${TARGETS}/${other}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });
});

describe('connecting an integration', () => {
  it('an older session is asked (403, nothing connected); a wrong password is 400 and audited; the right one connects', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expectAskedForPassword(await connect(org.admin.token, GITHUB_INTEGRATION));
    expectAskedForPassword(await connect(org.admin.token, SLACK_INTEGRATION));
    expect(await integrationsOf(org)).toBe(0);

    expectWrongPassword(await connect(org.admin.token, { ...SLACK_INTEGRATION, current_password: WRONG }));
    expect(await integrationsOf(org)).toBe(0);
    const failures = await failedChecks(org.admin, 'integration_create');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ organizationId: org.id, metadata: { reason: 'invalid_current_password', operation: 'integration_create' } });

    const github = await connect(org.admin.token, { ...GITHUB_INTEGRATION, current_password: TEST_PASSWORD }, { 'Idempotency-Key': `sudo-int-${uniqueSuffix()}` });
    expect(github.status).toBe(201);
    expect((await connect(org.admin.token, { ...SLACK_INTEGRATION, current_password: TEST_PASSWORD })).status).toBe(201);
    expect(await integrationsOf(org)).toBe(2);

    const stored = await storedRowsOf(org);
    expect(stored).not.toContain(TEST_PASSWORD);
    expect(stored).not.toContain(WRONG);
    expect(stored).not.toContain('"current_password"');
  });

  it('a recent session and an API key are not asked', async () => {
    const org = await createOrg(h);
    expect((await connect(org.admin.token, GITHUB_INTEGRATION)).status).toBe(201);
    const key = await createKey(h, org.admin.token, ['integrations:manage', 'integrations:read']);
    h.clock.advance(A_WHILE_AGO);
    try {
      expect((await connect(key, SLACK_INTEGRATION)).status).toBe(201);
    } finally {
      h.clock.reset();
    }
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });

  it('a request that fails anyway answers its own 4xx, without asking for the password', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const privateUrl = await connect(org.admin.token, { ...GITHUB_INTEGRATION, base_url: 'https://127.0.0.1/api/v3' });
    expect(privateUrl.status).toBe(422);
    expect(privateUrl.body.detail).toMatch(/^GitHub Enterprise base URL refused/);
    expect((await connect(org.admin.token, { ...SLACK_INTEGRATION, bot_token: 'not-a-bot-token' })).status).toBe(400);
    expect(await integrationsOf(org)).toBe(0);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });

  it('disconnecting and team bindings never ask', async () => {
    const org = await createOrg(h);
    const made = await connect(org.admin.token, GITHUB_INTEGRATION);
    const team = await request(h.app).post('/api/v1/teams').set(bearer(org.admin.token)).send({ name: `team ${uniqueSuffix()}` });
    expect([made.status, team.status]).toEqual([201, 201]);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const binding = `${INTEGRATIONS}/${made.body.id}/teams/${team.body.id}`;
    expect((await request(h.app).put(binding).set(bearer(org.admin.token))).status).toBe(200);
    expect((await request(h.app).delete(binding).set(bearer(org.admin.token))).status).toBe(200);
    expect((await request(h.app).delete(`${INTEGRATIONS}/${made.body.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });
});
