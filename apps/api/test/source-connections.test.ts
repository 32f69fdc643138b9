// Personal GitHub connections (source:connect_personal) through the sign-in's OAuth flow, against the loopback
// GitHub (support/oauth-github.ts): a separate grant asking for `repo read:user`, the token sealed at rest and
// never returned, status on the profile, disconnect.
import request from 'supertest';
import { unseal } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg, type TestUser } from './support/fixtures';
import { setCookies } from './support/auth-helpers';
import { githubEnvFor, startGithubServer, type LoopbackGithub } from './support/oauth-github';
import { APP_BASE_URL, callback, flowRedisKey, redirectUriOf } from './support/oauth-flow';

const APP = { clientId: 'Iv1.personal0123', clientSecret: 'personal-github-secret-0123456789', redirectUri: redirectUriOf('github') };

let gh: LoopbackGithub;
let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  gh = await startGithubServer(APP);
  h = await createHarness({ PUBLIC_BASE_URL: APP_BASE_URL, ...githubEnvFor(gh, APP) });
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  gh.addAccount({ id: 7001, login: 'octo-personal', name: 'Octo Personal', emails: [{ email: 'octo-personal@example.test', primary: true, verified: true }] });
  gh.addAccount({ id: 7002, login: 'octo-other', name: null, emails: [{ email: 'octo-other@example.test', primary: true, verified: true }] });
});
afterAll(async () => {
  await h?.close();
  await gh?.close();
});

const api = () => request(h.app);
const connections = async (user: TestUser) => (await api().get('/api/v1/profile/source-connections').set(bearer(user.token))).body;

async function connect(user: TestUser, login: string, options: { scope?: string } = {}) {
  const start = await api().get('/api/v1/profile/source-connections/github/connect').set(bearer(user.token));
  expect(start.status).toBe(302);
  const location = new URL(start.headers.location);
  const flowId = setCookies(start).get('oauth_github')!.value;
  location.searchParams.set('login', login);
  if (options.scope) location.searchParams.set('scope', options.scope);
  const atGithub = await fetch(location, { redirect: 'manual' });
  expect(atGithub.status).toBe(302);
  const back = new URL(atGithub.headers.get('location')!);
  const res = await callback(h, 'github', back, flowId);
  return { start, location, flowId, back, res };
}

describe('connecting a personal GitHub account', () => {
  it('asks GitHub for repo read:user in the sign-in flow, stores the sealed token, and shows the account on the profile', async () => {
    expect(await connections(org.admin)).toEqual({ data: [] });
    const { location, flowId, res } = await connect(org.admin, 'octo-personal');
    expect(`${location.origin}${location.pathname}`).toBe(`${gh.url}/login/oauth/authorize`);
    expect(location.searchParams.get('scope')).toBe('repo read:user');
    expect(location.searchParams.get('redirect_uri')).toBe(APP.redirectUri);
    expect(location.searchParams.get('code_challenge_method')).toBe('S256');
    expect(res.status).toBe(302);
    expect(res.headers.location).toBe('/profile');
    // A callback signs nobody in when it connects.
    expect(setCookies(res).get('session')).toBeUndefined();
    expect(await h.deps.redis.exists(flowRedisKey(h, flowId))).toBe(0);

    const listed = await connections(org.admin);
    expect(listed).toEqual({ data: [{ provider: 'github', login: 'octo-personal', account_id: '7001', scopes: ['repo', 'read:user'], connected_at: expect.any(String) }] });
    const stored = await h.deps.prisma.personalSourceConnection.findFirstOrThrow({ where: { userId: org.admin.id } });
    const token = unseal(stored.tokenEnc, h.config.encryptionKey);
    expect(token).toMatch(/^gho_/);
    expect(stored.tokenEnc).not.toContain(token);
    expect(JSON.stringify(listed)).not.toContain(token);
    // The sealed token is a working GitHub token of that account.
    const user = await fetch(`${gh.url}/user`, { headers: { Authorization: `Bearer ${token}`, 'User-Agent': 'test' } });
    expect(((await user.json()) as { login: string }).login).toBe('octo-personal');
    // The person's sign-in is untouched: no identity was linked by connecting.
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { userId: org.admin.id } })).toBe(0);
    const audit = await h.deps.prisma.auditEvent.findFirstOrThrow({ where: { organizationId: org.id, action: 'source.personal_connected', actorId: org.admin.id } });
    expect(audit.metadata).toEqual({ provider: 'github', login: 'octo-personal', scopes: ['repo', 'read:user'] });
    expect(JSON.stringify(audit)).not.toContain(token);
  });

  it('reconnecting replaces the account; connections are per person; disconnect deletes the token', async () => {
    await connect(org.owner, 'octo-personal');
    await connect(org.owner, 'octo-other');
    expect((await connections(org.owner)).data.map((c: { login: string }) => c.login)).toEqual(['octo-other']);
    expect(await h.deps.prisma.personalSourceConnection.count({ where: { userId: org.owner.id } })).toBe(1);
    expect((await connections(other.owner)).data).toEqual([]);
    const del = await api().delete('/api/v1/profile/source-connections/github').set(bearer(org.owner.token));
    expect(del.status).toBe(204);
    expect((await connections(org.owner)).data).toEqual([]);
    expect(await h.deps.prisma.personalSourceConnection.count({ where: { userId: org.owner.id } })).toBe(0);
    expect((await api().delete('/api/v1/profile/source-connections/github').set(bearer(org.owner.token))).status).toBe(404);
    expect((await api().delete('/api/v1/profile/source-connections/gitlab').set(bearer(org.owner.token))).status).toBe(400);
  });

  it('refuses a grant without repository access, and a replayed callback', async () => {
    const { res } = await connect(other.admin, 'octo-personal', { scope: 'read:user' });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/repository access/);
    expect((await connections(other.admin)).data).toEqual([]);
    const first = await connect(other.admin, 'octo-personal');
    expect(first.res.status).toBe(302);
    const replay = await callback(h, 'github', first.back, first.flowId);
    expect(replay.status).toBe(400);
  });

  it('needs source:connect_personal to connect (the role bundles give it to owners and admins); anyone reads their own status', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await api().get('/api/v1/profile/source-connections/github/connect').set(bearer(user.token));
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('source:connect_personal');
      expect((await api().get('/api/v1/profile/source-connections').set(bearer(user.token))).status).toBe(200);
    }
    expect((await api().get('/api/v1/profile/source-connections/github/connect')).status).toBe(401);
    expect((await api().get('/api/v1/profile/source-connections/google/connect').set(bearer(org.admin.token))).status).toBe(404);
  });
});
