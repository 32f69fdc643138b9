// Review "outbound": an admin configuring a customer URL aimed at the cloud's own platform endpoints. DESIGN's
// URL-safety rule refuses cloud metadata addresses; Azure's platform address 168.63.129.16 (WireServer: VM agent
// goal state and extension settings, the platform DNS resolver, health probes) is reachable from every Azure VM
// although it is not in a private range. Every route that saves a customer-configured address must refuse it
// (422 with the error envelope, nothing created), in every spelling, like 169.254.169.254.
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

const WIRESERVER_URLS = [
  'https://168.63.129.16/machine?comp=goalstate',
  'https://168.63.129.16:32526/vmSettings',
  'https://[::ffff:168.63.129.16]/machine',
  'https://2822734096/machine', // the same address as one decimal number
];

async function counts() {
  const [subscriptions, issueTargets, integrations] = await Promise.all([
    h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id } }),
    h.deps.prisma.issueExportTarget.count({ where: { organizationId: org.id } }),
    h.deps.prisma.integration.count({ where: { organizationId: org.id } }),
  ]);
  return { subscriptions, issueTargets, integrations };
}

describe.each(WIRESERVER_URLS)('the Azure platform address %s', (url) => {
  const routes: Array<[string, string, Record<string, unknown>]> = [
    ['a webhook subscription', '/api/v1/webhooks/subscriptions', { name: 'siem', url, events: ['finding.created'] }],
    ['a Slack notification target', '/api/v1/notification-targets', { kind: 'slack', name: 'chat', url, events: ['report.ready'] }],
    ['a Jira issue tracker', '/api/v1/issue-export-targets', { kind: 'jira', name: 'jira', base_url: url, project_key: 'SEC', email: 'bot@example.com', api_token: 'jira-api-token-0123' }],
    ['a GitHub Enterprise integration', '/api/v1/integrations', { kind: 'github', name: 'ghe', token: 'ghp_integrationToken0123', base_url: url }],
  ];

  it.each(routes)('is refused as %s: 422 with the envelope, nothing saved', async (_label, path, body) => {
    const before = await counts();
    const res = await request(h.app).post(path).set(bearer(org.admin.token)).send(body);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: expect.stringMatching(/not a public address \(cloud metadata\)/) });
    expect(await counts()).toEqual(before);
  });

  it('is refused when a subscription is moved there (PATCH): 422, the URL unchanged', async () => {
    const created = await request(h.app).post('/api/v1/webhooks/subscriptions').set(bearer(org.admin.token))
      .send({ name: 'siem', url: 'https://203.0.114.10/hooks', events: ['finding.created'] });
    expect(created.status).toBe(201);
    const res = await request(h.app).patch(`/api/v1/webhooks/subscriptions/${created.body.id}`).set(bearer(org.admin.token)).send({ url });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: expect.any(String) });
    const row = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: created.body.id } });
    expect(row.url).toBe('https://203.0.114.10/hooks');
    await request(h.app).delete(`/api/v1/webhooks/subscriptions/${created.body.id}`).set(bearer(org.admin.token)).expect(204);
  });
});
