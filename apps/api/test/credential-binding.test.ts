// Issue 34, part 2: a stored credential stays with the destination (scheme, host, port) it was given for. A request
// that moves a destination without giving the credential again answers 422 naming the credential field and changes
// nothing; the move with the credential is audited. One describe per kind of credential-bearing destination. (The
// end-to-end checks that nothing reaches the new host are in apps/worker/test/credential-binding.test.ts.)
import request from 'supertest';
import { unseal } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import { createProject } from './support/resources';

let h: Harness;
let org: TestOrg;

const HOST_A = 'https://203.0.114.10';
const HOST_B = 'https://203.0.114.11';
const DCR = `dcr-${'0123456789abcdef'.repeat(2)}`;
const sentinelUrl = (host: string) => `${host}/dataCollectionRules/${DCR}/streams/Custom-SecurityAssessment?api-version=2023-01-01`;
const AZURE = { azure_tenant_id: 'contoso.onmicrosoft.com', azure_client_id: '11111111-2222-3333-4444-555555555555', azure_client_secret: 'entra-secret-value' };

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);

/** An API key of the admin's holding only the given scopes: someone who configures but never saw the credential. */
async function keyWith(scopes: string[]): Promise<string> {
  const res = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: 'configure only', scopes });
  expect(res.status).toBe(201);
  return res.body.key as string;
}

async function auditOf(targetId: string, action: string) {
  return h.deps.prisma.auditEvent.findMany({ where: { targetId, action }, orderBy: { createdAt: 'asc' } });
}

describe('issue trackers: base_url', () => {
  const TARGETS = '/api/v1/issue-export-targets';

  async function github(baseUrl = `${HOST_A}/api/v3`) {
    const res = await api().post(TARGETS).set(bearer(org.admin.token))
      .send({ kind: 'github', name: 'ghe', base_url: baseUrl, repository: 'acme/web', token: 'ghp_storedTokenOfTheOwner0123' });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  it('refuses a GitHub base_url on another host without the token: 422 naming token, nothing changes', async () => {
    const id = await github();
    const key = await keyWith(['issue_exports:configure', 'issue_exports:read', 'findings:export_issue']);
    const before = await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } });
    const res = await api().patch(`${TARGETS}/${id}`).set(bearer(key)).send({ base_url: `${HOST_B}/api/v3` });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: expect.stringContaining('needs token again') });
    expect(res.body.detail).toMatch(/^Changing base_url to another destination/);
    expect(await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } })).toEqual(before);
    expect(await auditOf(id, 'issue_export_target.updated')).toHaveLength(0);
  });

  it.each([
    ['another port', `${HOST_A}:8443/api/v3`],
    ['another scheme', 'http://203.0.114.10/api/v3'],
    ['github.com itself', 'https://api.github.com'],
  ])('refuses %s too', async (_what, url) => {
    const id = await github();
    const res = await api().patch(`${TARGETS}/${id}`).set(bearer(org.admin.token)).send({ base_url: url, name: 'renamed' });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/needs token again/);
    expect((await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } })).name).toBe('ghe');
  });

  it('refuses a target created for github.com moved to another host', async () => {
    const res = await api().post(TARGETS).set(bearer(org.admin.token)).send({ kind: 'github', name: 'dotcom', repository: 'acme/web', token: 'ghp_dotcomToken0123456789' });
    const moved = await api().patch(`${TARGETS}/${res.body.id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_B}/api/v3` });
    expect(moved.status).toBe(422);
    expect(moved.body.detail).toMatch(/needs token again/);
  });

  it('keeps the token across a path change on the same host', async () => {
    const id = await github();
    const res = await api().patch(`${TARGETS}/${id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_A}/other/api/v3` });
    expect(res.status).toBe(200);
    expect(res.body.base_url).toBe(`${HOST_A}/other/api/v3`);
    const [entry] = await auditOf(id, 'issue_export_target.updated');
    expect(entry.metadata).not.toHaveProperty('destination_changed');
  });

  it('moves with a new token in the same request, and audits the move (destinations only, never the token)', async () => {
    const id = await github();
    const res = await api().patch(`${TARGETS}/${id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_B}/api/v3`, token: 'ghp_newTokenForHostB0123' });
    expect(res.status).toBe(200);
    const row = await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } });
    expect(row.baseUrl).toBe(`${HOST_B}/api/v3`);
    expect(JSON.parse(unseal(row.credentialsEnc, h.config.encryptionKey))).toEqual({ token: 'ghp_newTokenForHostB0123' });
    const [entry] = await auditOf(id, 'issue_export_target.updated');
    expect(entry.metadata).toMatchObject({ credentials_changed: 'replaced', destination_changed: { from: 'https://203.0.114.10:443', to: 'https://203.0.114.11:443' } });
    expect(JSON.stringify(entry)).not.toContain('ghp_newTokenForHostB0123');
  });

  it('compares with the destination the token is bound to: a base_url moved behind the API is not confirmed by repeating it', async () => {
    const id = await github();
    await h.deps.prisma.issueExportTarget.update({ where: { id }, data: { baseUrl: `${HOST_B}/api/v3` } });
    const before = await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } });
    const res = await api().patch(`${TARGETS}/${id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_B}/api/v3` });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/needs token again/);
    expect(await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } })).toEqual(before);
    const withToken = await api().patch(`${TARGETS}/${id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_B}/api/v3`, token: 'ghp_newTokenForHostB0123456789' });
    expect(withToken.status).toBe(200);
    expect((await h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id } })).credentialDestination).toBe('https://203.0.114.11:443');
    // The URL did not change in this request; the binding did, and the audit log says where it went.
    const [entry] = await auditOf(id, 'issue_export_target.updated');
    expect(entry.metadata).not.toHaveProperty('destination_changed');
    expect(entry.metadata).toMatchObject({ credentials_rebound: { from: 'https://203.0.114.10:443', to: 'https://203.0.114.11:443' } });
  });

  it('says where the token is bound when base_url was moved behind the API, not that the request changed it', async () => {
    const id = await github();
    await h.deps.prisma.issueExportTarget.update({ where: { id }, data: { baseUrl: `${HOST_B}/api/v3` } });
    const res = await api().patch(`${TARGETS}/${id}`).set(bearer(org.admin.token)).send({ name: 'renamed', base_url: `${HOST_B}/api/v3` });
    expect(res.status).toBe(422);
    expect(res.body.detail).not.toMatch(/^Changing base_url/);
    expect(res.body.detail).toMatch(/given for https:\/\/203\.0\.114\.10:443, not .*https:\/\/203\.0\.114\.11:443 .* needs token again/);
  });

  it('refuses a Jira site moved without the API token (422 naming email and api_token)', async () => {
    const created = await api().post(TARGETS).set(bearer(org.admin.token)).send({
      kind: 'jira', name: 'jira', base_url: `${HOST_A}/jira`, project_key: 'SEC', email: 'bot@example.com', api_token: 'ATATT-stored-jira-token',
    });
    expect(created.status).toBe(201);
    const res = await api().patch(`${TARGETS}/${created.body.id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_B}/jira` });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/needs email and api_token again/);
    const moved = await api().patch(`${TARGETS}/${created.body.id}`).set(bearer(org.admin.token))
      .send({ base_url: `${HOST_B}/jira`, email: 'bot@example.com', api_token: 'ATATT-new-jira-token' });
    expect(moved.status).toBe(200);
  });
});

describe('webhook subscriptions: url', () => {
  const SUBS = '/api/v1/webhooks/subscriptions';

  async function subscribe(body: Record<string, unknown>) {
    const res = await api().post(SUBS).set(bearer(org.admin.token)).send({ name: 'SIEM', events: ['finding.created'], ...body });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  it('refuses a url on another host while an authorization value is stored: 422 naming authorization, nothing changes', async () => {
    const id = await subscribe({ url: `${HOST_A}/services/collector`, payload_format: 'splunk_hec', authorization: 'Splunk stored-hec-token' });
    const key = await keyWith(['webhooks:update', 'webhooks:read']);
    const before = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } });
    const res = await api().patch(`${SUBS}/${id}`).set(bearer(key)).send({ url: `${HOST_B}/services/collector` });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: expect.stringMatching(/^Changing url to another destination .* needs authorization again/) });
    expect(await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).toEqual(before);
    expect(await auditOf(id, 'webhook.subscription_updated')).toHaveLength(0);
  });

  it('moves with the authorization given again, or removed, and audits the move', async () => {
    const id = await subscribe({ url: `${HOST_A}/services/collector`, payload_format: 'splunk_hec', authorization: 'Splunk stored-hec-token' });
    const moved = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: `${HOST_B}/services/collector`, authorization: 'Splunk new-hec-token' });
    expect(moved.status).toBe(200);
    const row = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } });
    expect(unseal(row.authorizationEnc!, h.config.encryptionKey)).toBe('Splunk new-hec-token');
    const [entry] = await auditOf(id, 'webhook.subscription_updated');
    expect(entry.metadata).toMatchObject({ receiver_header: 'set', destination_changed: { from: 'https://203.0.114.10:443', to: 'https://203.0.114.11:443' } });
    expect(JSON.stringify(entry)).not.toContain('new-hec-token');

    const removed = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: `${HOST_A}/services/collector`, authorization: null });
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ has_authorization: false, url: `${HOST_A}/services/collector` });
  });

  it('keeps the authorization across a path change, and a URL change needs nothing on a subscription without credentials', async () => {
    const withAuth = await subscribe({ url: `${HOST_A}/services/collector`, authorization: 'Splunk stored-hec-token' });
    expect((await api().patch(`${SUBS}/${withAuth}`).set(bearer(org.admin.token)).send({ url: `${HOST_A}/services/collector/event` })).status).toBe(200);
    const plain = await subscribe({ url: `${HOST_A}/hooks` });
    expect((await api().patch(`${SUBS}/${plain}`).set(bearer(org.admin.token)).send({ url: `${HOST_B}/hooks` })).status).toBe(200);
  });

  it('refuses a microsoft_sentinel url on another host without the Entra ID credentials', async () => {
    const id = await subscribe({ url: sentinelUrl(HOST_A), payload_format: 'microsoft_sentinel', ...AZURE });
    const before = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } });
    const res = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B) });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/needs azure_tenant_id, azure_client_id and azure_client_secret again/);
    expect(await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).toEqual(before);
    const moved = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B), ...AZURE, azure_client_secret: 'new-entra-secret' });
    expect(moved.status).toBe(200);
    expect(moved.body).toMatchObject({ has_azure_credentials: true });
  });

  it('names both credentials when both are stored and neither is given', async () => {
    const id = await subscribe({ url: sentinelUrl(HOST_A), payload_format: 'microsoft_sentinel', authorization: 'Bearer static', ...AZURE });
    const res = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B), authorization: 'Bearer other' });
    expect(res.status).toBe(422);
    expect(res.body.detail).not.toMatch(/needs authorization/);
    expect(res.body.detail).toMatch(/needs azure_tenant_id/);
    const neither = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B) });
    expect(neither.body.detail).toMatch(/needs authorization, azure_tenant_id, azure_client_id and azure_client_secret again/);
  });

  it('compares with the destination the credentials are bound to: a URL moved behind the API is not confirmed by repeating it', async () => {
    const id = await subscribe({ url: sentinelUrl(HOST_A), payload_format: 'microsoft_sentinel', authorization: 'Bearer static', ...AZURE });
    // A database edit (a restore, a script) moved the URL; the credentials stay bound to HOST_A and the worker refuses to send them.
    await h.deps.prisma.webhookSubscription.update({ where: { id }, data: { url: sentinelUrl(HOST_B) } });
    const before = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } });
    expect(before.credentialDestination).toBe('https://203.0.114.10:443');

    // Before, the same URL counted as "no move", and the PATCH bound both credentials to HOST_B without either.
    const repeated = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B) });
    expect(repeated.status).toBe(422);
    expect(repeated.body.detail).toMatch(/needs authorization, azure_tenant_id, azure_client_id and azure_client_secret again/);
    // One credential given again rebinds all of them to the URL's destination: the other must come too.
    const one = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ authorization: 'Bearer new' });
    expect(one.status).toBe(422);
    expect(one.body.detail).toMatch(/needs azure_tenant_id, azure_client_id and azure_client_secret again/);
    expect(await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).toEqual(before);

    // A change that rebinds nothing still goes through; a move back to the bound destination needs no credential.
    expect((await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ name: 'renamed' })).status).toBe(200);
    const back = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_A) });
    expect(back.status).toBe(200);
    const both = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B), authorization: 'Bearer b', ...AZURE });
    expect(both.status).toBe(200);
    expect((await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } })).credentialDestination).toBe('https://203.0.114.11:443');
  });

  it('audits the credentials rebound to a URL moved behind the API (the URL itself unchanged by the request)', async () => {
    const id = await subscribe({ url: sentinelUrl(HOST_A), payload_format: 'microsoft_sentinel', authorization: 'Bearer static', ...AZURE });
    await h.deps.prisma.webhookSubscription.update({ where: { id }, data: { url: sentinelUrl(HOST_B) } });
    const res = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl(HOST_B), authorization: 'Bearer b', ...AZURE });
    expect(res.status).toBe(200);
    const [entry] = await auditOf(id, 'webhook.subscription_updated');
    // Before, nothing in the entry showed that the credentials now go to HOST_B.
    expect(entry.metadata).not.toHaveProperty('destination_changed');
    expect(entry.metadata).toMatchObject({ credentials_rebound: { from: 'https://203.0.114.10:443', to: 'https://203.0.114.11:443' } });
    expect(JSON.stringify(entry)).not.toContain('Bearer b');
    // A rename rebinds nothing and says nothing of it.
    expect((await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ name: 'renamed' })).status).toBe(200);
    const entries = await auditOf(id, 'webhook.subscription_updated');
    expect(entries).toHaveLength(2);
    expect(entries[1].metadata).not.toHaveProperty('credentials_rebound');
  });

  it('says where the credentials are bound when the url was moved behind the API, not that the request changed it', async () => {
    const id = await subscribe({ url: sentinelUrl(HOST_A), payload_format: 'microsoft_sentinel', authorization: 'Bearer static', ...AZURE });
    await h.deps.prisma.webhookSubscription.update({ where: { id }, data: { url: sentinelUrl(HOST_B) } });
    // No url in the request at all, and (the dashboard always sends it) the stored url repeated: neither changes it.
    for (const body of [{ authorization: 'Bearer new' }, { name: 'renamed', url: sentinelUrl(HOST_B), authorization: 'Bearer new' }]) {
      const res = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send(body);
      expect(res.status).toBe(422);
      expect(res.body.detail).not.toMatch(/^Changing url/);
      expect(res.body.detail).toMatch(/given for https:\/\/203\.0\.114\.10:443, not .*https:\/\/203\.0\.114\.11:443 .* needs azure_tenant_id, azure_client_id and azure_client_secret again/);
    }
    // A request that does move the url keeps the usual wording.
    const third = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ url: sentinelUrl('https://203.0.114.12') });
    expect(third.body.detail).toMatch(/^Changing url to another destination .* needs authorization, azure_tenant_id/);
  });

  it('on a URL moved behind the API, a removal (null) counts as given; an empty value is no credential (400)', async () => {
    const id = await subscribe({ url: sentinelUrl(HOST_A), payload_format: 'microsoft_sentinel', authorization: 'Bearer static', ...AZURE });
    await h.deps.prisma.webhookSubscription.update({ where: { id }, data: { url: sentinelUrl(HOST_B) } });
    expect((await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ authorization: '' })).status).toBe(400);
    const one = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ authorization: null });
    expect(one.status).toBe(422);
    expect(one.body.detail).toMatch(/needs azure_tenant_id, azure_client_id and azure_client_secret again/);
    const both = await api().patch(`${SUBS}/${id}`).set(bearer(org.admin.token)).send({ authorization: null, azure_tenant_id: null, azure_client_id: null, azure_client_secret: null });
    expect(both.status).toBe(200);
    expect(both.body).toMatchObject({ has_authorization: false, has_azure_credentials: false });
  });

  it("leaves another organization untouched: its own subscription keeps its binding, and it cannot rebind this one's", async () => {
    const other = await createOrg(h);
    const mine = await subscribe({ url: `${HOST_A}/services/collector`, authorization: 'Splunk mine' });
    const theirs = await api().post(SUBS).set(bearer(other.admin.token)).send({ name: 'theirs', events: ['finding.created'], url: `${HOST_A}/services/collector`, authorization: 'Splunk theirs' });
    expect(theirs.status).toBe(201);
    const theirsBefore = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: theirs.body.id } });
    await h.deps.prisma.webhookSubscription.update({ where: { id: mine }, data: { url: `${HOST_B}/services/collector` } });
    const mineBefore = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: mine } });

    // The other organization cannot see, let alone rebind, this one's subscription (404, nothing changed).
    const foreign = await api().patch(`${SUBS}/${mine}`).set(bearer(other.admin.token)).send({ url: `${HOST_B}/services/collector`, authorization: 'Splunk stolen' });
    expect(foreign.status).toBe(404);
    expect(await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: mine } })).toEqual(mineBefore);
    // This organization's refused and accepted rebinds leave the other's row as it was.
    expect((await api().patch(`${SUBS}/${mine}`).set(bearer(org.admin.token)).send({ url: `${HOST_B}/services/collector` })).status).toBe(422);
    expect((await api().patch(`${SUBS}/${mine}`).set(bearer(org.admin.token)).send({ authorization: 'Splunk new' })).status).toBe(200);
    expect(await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: theirs.body.id } })).toEqual(theirsBefore);
  });

  it('holds at the project level too', async () => {
    const project = await createProject(h, org.id);
    const base = `/api/v1/projects/${project.id}/webhooks/subscriptions`;
    const created = await api().post(base).set(bearer(org.admin.token)).send({ name: 'p', events: ['finding.created'], url: `${HOST_A}/p`, authorization: 'Bearer p' });
    const res = await api().patch(`${base}/${created.body.id}`).set(bearer(org.admin.token)).send({ url: `${HOST_B}/p` });
    expect(res.status).toBe(422);
  });
});

describe('notification targets: the chat URL is the credential', () => {
  const TARGETS = '/api/v1/notification-targets';

  it('a move to another host always carries its own credential (the new URL): stored sealed, the old one gone', async () => {
    const created = await api().post(TARGETS).set(bearer(org.admin.token)).send({ kind: 'slack', name: 'chat', url: `${HOST_A}/services/T0/B0/old-secret`, events: ['report.ready'] });
    expect(created.status).toBe(201);
    const moved = await api().patch(`${TARGETS}/${created.body.id}`).set(bearer(org.admin.token)).send({ url: `${HOST_B}/services/T0/B0/new-secret` });
    expect(moved.status).toBe(200);
    expect(moved.body.url_host).toBe('203.0.114.11');
    const row = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: created.body.id } });
    expect(unseal(row.urlEnc!, h.config.encryptionKey)).toBe(`${HOST_B}/services/T0/B0/new-secret`);
    expect(JSON.stringify(row)).not.toContain('old-secret');
    const [entry] = await auditOf(created.body.id, 'notification_target.updated');
    expect(entry.metadata).toMatchObject({ url_host: '203.0.114.11' });
    expect(JSON.stringify(entry)).not.toContain('new-secret');
  });
});

describe('integrations: no route moves a stored credential', () => {
  it('an integration cannot be edited: a new base URL means connecting again with its credential', async () => {
    const created = await api().post('/api/v1/integrations').set(bearer(org.admin.token))
      .send({ kind: 'github', name: 'ghe', token: 'ghp_integrationToken0123', base_url: `${HOST_A}/api/v3` });
    expect(created.status).toBe(201);
    for (const method of ['patch', 'put'] as const) {
      const res = await api()[method](`/api/v1/integrations/${created.body.id}`).set(bearer(org.admin.token)).send({ base_url: `${HOST_B}/api/v3` });
      expect(res.status).toBe(404);
    }
    const row = await h.deps.prisma.integration.findUniqueOrThrow({ where: { id: created.body.id } });
    expect(row.baseUrl).toBe(`${HOST_A}/api/v3`);
  });
});
