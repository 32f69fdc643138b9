// Organization integrations (integrations:read / manage / bind_team): connect GitHub (token, App installation,
// GitHub Enterprise base URL under the public-address rule) and Slack, list, disconnect, bind to teams, and the
// integration a project uses. Credentials are sealed at rest and never returned.
import request from 'supertest';
import { unseal } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey } from './support/domain';

let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());

const api = () => request(h.app);
const GITHUB_TOKEN = 'ghp_0123456789abcdefghijklmnopqrstuvwxyzAB';
const SLACK_TOKEN = 'xoxb-1111-2222-abcdefghijklmnop';
const connect = (token: string, body: Record<string, unknown>) => api().post('/api/v1/integrations').set(bearer(token)).send(body);

async function connected(body: Record<string, unknown>, inOrg = org) {
  const res = await connect(inOrg.admin.token, body);
  expect(res.status).toBe(201);
  return res.body as { id: string; [k: string]: unknown };
}

async function createTeam(token: string, name: string) {
  const res = await api().post('/api/v1/teams').set(bearer(token)).send({ name });
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe('connect and list', () => {
  it('connects GitHub by token: sealed at rest, shown only as a hint, audited without the token', async () => {
    const created = await connected({ kind: 'github', name: 'GitHub main', token: GITHUB_TOKEN });
    expect(created).toMatchObject({ kind: 'github', auth_method: 'token', credential_hint: '…yzAB', status: 'connected', base_url: null, team_ids: [] });
    expect(JSON.stringify(created)).not.toContain(GITHUB_TOKEN);
    const stored = await h.deps.prisma.integration.findUniqueOrThrow({ where: { id: created.id } });
    expect(stored.credentialEnc).not.toContain(GITHUB_TOKEN);
    expect(unseal(stored.credentialEnc!, h.config.encryptionKey)).toBe(GITHUB_TOKEN);
    for (const res of [await api().get(`/api/v1/integrations/${created.id}`).set(bearer(org.member.token)), await api().get('/api/v1/integrations').set(bearer(org.member.token))]) {
      expect(res.status).toBe(200);
      expect(JSON.stringify(res.body)).not.toContain(GITHUB_TOKEN);
      expect(JSON.stringify(res.body)).not.toContain(stored.credentialEnc);
    }
    const audit = await h.deps.prisma.auditEvent.findFirstOrThrow({ where: { organizationId: org.id, targetId: created.id } });
    expect(audit.action).toBe('integration.connected');
    expect(JSON.stringify(audit)).not.toContain(GITHUB_TOKEN);
  });

  it('connects a GitHub App installation (no credential) on a public GitHub Enterprise, and Slack by bot token', async () => {
    const app = await connected({ kind: 'github', name: 'GHE app', app_installation_id: '4242', base_url: 'https://203.0.114.10/api/v3/' });
    expect(app).toMatchObject({ auth_method: 'app_installation', app_installation_id: '4242', credential_hint: null, base_url: 'https://203.0.114.10/api/v3' });
    const slack = await connected({ kind: 'slack', name: 'Slack', bot_token: SLACK_TOKEN, workspace_id: 'T0123ABCD' });
    expect(slack).toMatchObject({ kind: 'slack', auth_method: 'bot_token', workspace_id: 'T0123ABCD', credential_hint: '…mnop' });
    expect(JSON.stringify(slack)).not.toContain(SLACK_TOKEN);
    const list = await api().get('/api/v1/integrations?kind=slack').set(bearer(org.admin.token));
    expect(list.body.data.map((i: { id: string }) => i.id)).toEqual([slack.id]);
  });

  it.each([
    ['loopback', 'https://127.0.0.1/api/v3'],
    ['private', 'https://10.1.2.3/api/v3'],
    ['cloud metadata', 'https://169.254.169.254/latest'],
    ['IPv6 loopback', 'https://[::1]/api/v3'],
    ['IPv4-mapped private', 'https://[::ffff:192.168.0.1]/api/v3'],
    ['a name for loopback', 'https://localhost/api/v3'],
    ['plain http', 'http://203.0.114.10/api/v3'],
  ])('refuses a GitHub Enterprise base URL on %s with 422 and stores nothing', async (_label, url) => {
    const before = await h.deps.prisma.integration.count({ where: { organizationId: org.id } });
    const res = await connect(org.admin.token, { kind: 'github', name: 'ghe', token: GITHUB_TOKEN, base_url: url });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/GitHub Enterprise base URL refused/);
    expect(await h.deps.prisma.integration.count({ where: { organizationId: org.id } })).toBe(before);
  });

  it.each([
    ['no credential', { kind: 'github', name: 'x' }],
    ['token and installation', { kind: 'github', name: 'x', token: GITHUB_TOKEN, app_installation_id: '1' }],
    ['an unknown kind', { kind: 'gitlab', name: 'x', token: GITHUB_TOKEN }],
    ['a Slack token that is not a bot token', { kind: 'slack', name: 'x', bot_token: 'xoxp-123456789', workspace_id: 'T0123' }],
    ['Slack without workspace', { kind: 'slack', name: 'x', bot_token: SLACK_TOKEN }],
    ['a non-numeric installation id', { kind: 'github', name: 'x', app_installation_id: 'abc' }],
  ])('refuses %s with 400', async (_label, body) => {
    const res = await connect(org.admin.token, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.any(String) });
  });
});

describe('scopes and roles', () => {
  it('members and managers read; only owners and admins connect, disconnect and bind', async () => {
    const created = await connected({ kind: 'github', name: 'roles', token: GITHUB_TOKEN });
    const team = await createTeam(org.admin.token, `team-roles-${Date.now()}`);
    for (const user of [org.member, org.manager]) {
      expect((await api().get('/api/v1/integrations').set(bearer(user.token))).status).toBe(200);
      const c = await connect(user.token, { kind: 'github', name: 'nope', token: GITHUB_TOKEN });
      expect(c.status).toBe(403);
      expect(c.body.detail).toContain('integrations:manage');
      const d = await api().delete(`/api/v1/integrations/${created.id}`).set(bearer(user.token));
      expect(d.body.detail).toContain('integrations:manage');
      const b = await api().put(`/api/v1/integrations/${created.id}/teams/${team}`).set(bearer(user.token));
      expect(b.status).toBe(403);
      expect(b.body.detail).toContain('integrations:bind_team');
    }
    const bindOnly = await createKey(h, org.admin.token, ['integrations:read', 'integrations:bind_team']);
    expect((await api().put(`/api/v1/integrations/${created.id}/teams/${team}`).set(bearer(bindOnly))).status).toBe(200);
    expect((await connect(bindOnly, { kind: 'github', name: 'nope', token: GITHUB_TOKEN })).status).toBe(403);
    expect((await api().delete(`/api/v1/integrations/${created.id}`).set(bearer(org.owner.token))).status).toBe(204);
  });
});

describe('teams and projects', () => {
  it('a team binding makes the integration the default of the team\'s projects; disconnecting removes it', async () => {
    const fresh = await createOrg(h);
    const a = await connected({ kind: 'github', name: 'A', token: GITHUB_TOKEN }, fresh);
    const project = await insertProject(h, fresh.id);
    const uses = async () => (await api().get(`/api/v1/projects/${project.id}/integrations`).set(bearer(fresh.admin.token))).body.data;
    // The only GitHub integration of the organization applies; no Slack.
    expect(await uses()).toEqual([
      { kind: 'github', integration: expect.objectContaining({ id: a.id }), source: 'organization', team_id: null },
      { kind: 'slack', integration: null, source: null, team_id: null },
    ]);
    const b = await connected({ kind: 'github', name: 'B', token: GITHUB_TOKEN }, fresh);
    expect((await uses())[0]).toEqual({ kind: 'github', integration: null, source: null, team_id: null });
    const team = await createTeam(fresh.admin.token, 'platform');
    await insertGrant(h, fresh.id, { projectId: project.id }, { teamId: team }, 'read');
    const bound = await api().put(`/api/v1/integrations/${b.id}/teams/${team}`).set(bearer(fresh.admin.token));
    expect(bound.status).toBe(200);
    expect(bound.body.team_ids).toEqual([team]);
    expect((await uses())[0]).toEqual({ kind: 'github', integration: expect.objectContaining({ id: b.id }), source: 'team', team_id: team });
    // Binding A replaces the team's GitHub default.
    await api().put(`/api/v1/integrations/${a.id}/teams/${team}`).set(bearer(fresh.admin.token));
    expect((await uses())[0]).toMatchObject({ integration: { id: a.id }, source: 'team' });
    expect((await api().get(`/api/v1/integrations/${b.id}`).set(bearer(fresh.admin.token))).body.team_ids).toEqual([]);
    expect((await api().delete(`/api/v1/integrations/${a.id}`).set(bearer(fresh.admin.token))).status).toBe(204);
    expect((await uses())[0]).toMatchObject({ integration: { id: b.id }, source: 'organization' });
    expect(await h.deps.prisma.teamIntegration.count({ where: { teamId: team } })).toBe(0);
    const actions = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: fresh.id, action: { startsWith: 'integration.' } }, select: { action: true } });
    expect(actions.map((x) => x.action).sort()).toEqual(['integration.connected', 'integration.connected', 'integration.disconnected', 'integration.team_bound', 'integration.team_bound']);
  });

  it('binds a team twice at once (a retried PUT, or two integrations of one kind) without a 500: one binding of the kind stays', async () => {
    const fresh = await createOrg(h);
    const a = await connected({ kind: 'github', name: 'A', token: GITHUB_TOKEN }, fresh);
    const b = await connected({ kind: 'github', name: 'B', token: GITHUB_TOKEN }, fresh);
    for (let round = 0; round < 10; round += 1) {
      const team = await createTeam(fresh.admin.token, `race ${round}`);
      const bind = (id: string) => api().put(`/api/v1/integrations/${id}/teams/${team}`).set(bearer(fresh.admin.token));
      const answers = await Promise.all([bind(a.id), bind(a.id), bind(b.id)]);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(await h.deps.prisma.teamIntegration.count({ where: { teamId: team } })).toBe(1);
    }
  });

  it('keeps organizations apart: another organization\'s integration, team or project answers 404', async () => {
    const mine = await connected({ kind: 'slack', name: 'mine', bot_token: SLACK_TOKEN, workspace_id: 'T0ABC' });
    const theirTeam = await createTeam(other.admin.token, `theirs-${Date.now()}`);
    const myTeam = await createTeam(org.admin.token, `mine-${Date.now()}`);
    const theirProject = await insertProject(h, other.id);
    expect((await api().get(`/api/v1/integrations/${mine.id}`).set(bearer(other.admin.token))).status).toBe(404);
    expect((await api().delete(`/api/v1/integrations/${mine.id}`).set(bearer(other.admin.token))).status).toBe(404);
    expect((await api().put(`/api/v1/integrations/${mine.id}/teams/${theirTeam}`).set(bearer(other.admin.token))).status).toBe(404);
    expect((await api().put(`/api/v1/integrations/${mine.id}/teams/${theirTeam}`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await api().put(`/api/v1/integrations/${mine.id}/teams/${myTeam}`).set(bearer(other.admin.token))).status).toBe(404);
    expect((await api().get(`/api/v1/projects/${theirProject.id}/integrations`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await api().get('/api/v1/integrations').set(bearer(other.admin.token))).body.data.map((i: { id: string }) => i.id)).not.toContain(mine.id);
  });
});
