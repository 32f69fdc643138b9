// Review "outbound": credentials are write-only, so a credential a request carries must never come back in the answer,
// not even in the 400 of a malformed one (a token pasted with a newline or a space, a Slack user token where a bot
// token belongs). Before, joi's pattern message quoted the value: `'token' with value 'ghp_…' fails to match…`.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const SECRET = 'Sup3rSecretCredential0123';
const PUBLIC = 'https://203.0.114.10';

async function counts() {
  const [subscriptions, issueTargets, integrations] = await Promise.all([
    h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id } }),
    h.deps.prisma.issueExportTarget.count({ where: { organizationId: org.id } }),
    h.deps.prisma.integration.count({ where: { organizationId: org.id } }),
  ]);
  return { subscriptions, issueTargets, integrations };
}

const cases: Array<[string, string, Record<string, unknown>]> = [
  ['a GitHub integration token with a space', '/api/v1/integrations', { kind: 'github', name: 'gh', token: `ghp_${SECRET} x` }],
  ['a Slack user token as bot_token', '/api/v1/integrations', { kind: 'slack', name: 'sl', bot_token: `xoxp-${SECRET}`, workspace_id: 'T0123ABC' }],
  ['a GitHub tracker token with a newline', '/api/v1/issue-export-targets', { kind: 'github', name: 'gh', repository: 'acme/web', token: `ghp_${SECRET}\n` }],
  ['a Jira API token with a space', '/api/v1/issue-export-targets', { kind: 'jira', name: 'j', base_url: PUBLIC, project_key: 'SEC', email: 'bot@example.com', api_token: `${SECRET} x` }],
  ['an Authorization value with a newline', '/api/v1/webhooks/subscriptions', { name: 's', url: `${PUBLIC}/h`, events: ['finding.created'], authorization: `Splunk ${SECRET}\n` }],
  ['an Entra client secret with a newline', '/api/v1/webhooks/subscriptions', {
    name: 's', url: `${PUBLIC}/dataCollectionRules/dcr-${'0123456789abcdef'.repeat(2)}/streams/Custom-X?api-version=2023-01-01`, events: ['finding.created'],
    payload_format: 'microsoft_sentinel', azure_tenant_id: 'contoso.onmicrosoft.com', azure_client_id: '11111111-2222-3333-4444-555555555555', azure_client_secret: `${SECRET}\n`,
  }],
];

it.each(cases)('%s: 400 with the envelope naming the field, never the credential; nothing saved', async (_label, path, body) => {
  const before = await counts();
  const res = await request(h.app).post(path).set(bearer(org.admin.token)).send(body);
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ detail: expect.stringMatching(/^Invalid body: '\w+'/) });
  expect(JSON.stringify(res.body)).not.toContain(SECRET);
  expect(await counts()).toEqual(before);
});

it('a PATCH with a malformed credential answers the same way', async () => {
  const created = await request(h.app).post('/api/v1/issue-export-targets').set(bearer(org.admin.token))
    .send({ kind: 'github', name: 'gh', repository: 'acme/web', token: 'ghp_goodToken0123' });
  expect(created.status).toBe(201);
  const res = await request(h.app).patch(`/api/v1/issue-export-targets/${created.body.id}`).set(bearer(org.admin.token)).send({ token: `ghp_${SECRET} x` });
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ detail: expect.stringContaining("'token'") });
  expect(JSON.stringify(res.body)).not.toContain(SECRET);
});
