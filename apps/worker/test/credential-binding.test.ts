// Issue 34, part 2, end to end: a stored credential is only ever sent to the destination it was given for. The
// measured attack: an API key that may configure a tracker (but never saw its token) moves the tracker's base_url to
// another host and exports a finding; that host must receive nothing. Two real loopback HTTPS receivers on different
// ports are two destinations; the real in-process worker sends.
import { bindStoredCredentials, type Finding } from '@svc/db';
import { credentialDestination } from '@svc/webhooks';
import { bearer, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { insertFinding } from '../../api/test/support/domain';
import { startReceiver, type Receiver } from './support/receiver';
import { createWorld, type World } from './support/world';

let w: World;
let elsewhere: Receiver;
let findings: Finding[];

const OLD_TOKEN = 'ghp_tokenTheKeyHolderNeverSaw0123';
const NEW_TOKEN = 'ghp_tokenGivenWithTheMove4567';

beforeAll(async () => {
  w = await createWorld({ env: { PUBLIC_BASE_URL: 'https://security.example.com' } });
  elsewhere = await startReceiver(w.tls);
  const project = await insertProject(w.h, w.org.id);
  const assessment = await insertAssessment(w.h, w.org.id, project.id);
  findings = [];
  for (const title of ['First', 'Second']) findings.push(await insertFinding(w.h, assessment, { title, severity: 'high', location: 'src/a.ts:1' }));
  const created = (n: number) => ({ status: 201, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ number: n, html_url: `https://ghe.example.com/acme/web/issues/${n}` }) });
  w.receiver.script('/api/v3/repos/acme/web/issues', (_req, n) => created(n));
  elsewhere.script('/api/v3/repos/acme/web/issues', (_req, n) => created(100 + n));
});
afterAll(async () => {
  await elsewhere?.close();
  await w?.close();
});

/** An API key of the admin's with only the scopes of the measured attack: configure trackers, export findings. */
async function configureOnlyKey(scopes: string[]): Promise<string> {
  const res = await w.api().post('/api/v1/api-keys').set(bearer(w.org.admin.token)).send({ name: 'configure only', scopes });
  expect(res.status).toBe(201);
  return res.body.key as string;
}

async function waitForExport(id: string) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const row = await w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id } });
    if (row.status !== 'pending') return row;
    if (Date.now() > deadline) throw new Error(`export ${id} still pending`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

const everyHeader = (receiver: Receiver) => receiver.requests().map((r) => JSON.stringify(r.headers)).join('\n');

describe('issue tracker', () => {
  it("a key that never saw the token cannot move it: 422, the export goes to the token's own host, the new host receives nothing", async () => {
    const target = await w.api().post('/api/v1/issue-export-targets').set(bearer(w.org.admin.token))
      .send({ kind: 'github', name: 'ghe', base_url: w.receiver.url('/api/v3'), repository: 'acme/web', token: OLD_TOKEN });
    expect(target.status).toBe(201);
    const key = await configureOnlyKey(['issue_exports:configure', 'issue_exports:read', 'findings:export_issue', 'findings:read']);

    const moved = await w.api().patch(`/api/v1/issue-export-targets/${target.body.id}`).set(bearer(key)).send({ base_url: elsewhere.url('/api/v3') });
    expect(moved.status).toBe(422);
    expect(moved.body.detail).toMatch(/base_url .* needs token again/);

    const exported = await w.api().post(`/api/v1/findings/${findings[0].id}/issue-exports`).set(bearer(key)).send({ target_id: target.body.id });
    expect(exported.status).toBe(202);
    expect(await waitForExport(exported.body.id)).toMatchObject({ status: 'succeeded' });
    const [sent] = w.receiver.requests('/api/v3/repos/acme/web/issues');
    expect(sent.headers.authorization).toBe(`Bearer ${OLD_TOKEN}`);
    expect(elsewhere.requests()).toHaveLength(0);

    // With the token given again in the same request the move is allowed: the new host gets the new token only.
    const withToken = await w.api().patch(`/api/v1/issue-export-targets/${target.body.id}`).set(bearer(key))
      .send({ base_url: elsewhere.url('/api/v3'), token: NEW_TOKEN });
    expect(withToken.status).toBe(200);
    const second = await w.api().post(`/api/v1/findings/${findings[1].id}/issue-exports`).set(bearer(key)).send({ target_id: target.body.id });
    expect(await waitForExport(second.body.id)).toMatchObject({ status: 'succeeded' });
    const [received] = elsewhere.requests('/api/v3/repos/acme/web/issues');
    expect(received.headers.authorization).toBe(`Bearer ${NEW_TOKEN}`);
    expect(everyHeader(elsewhere)).not.toContain(OLD_TOKEN);
    expect(w.receiver.requests('/api/v3/repos/acme/web/issues')).toHaveLength(1);
  });
});

describe('subscription with an authorization value', () => {
  it("a url moved without the authorization is refused; deliveries keep going to the old host; the new host receives nothing", async () => {
    const sub = await w.subscribe({ name: 'HEC', url: w.receiver.url('/services/collector'), events: ['report.ready'], payload_format: 'splunk_hec', authorization: 'Splunk old-hec-token' });
    const key = await configureOnlyKey(['webhooks:update', 'webhooks:read']);

    const moved = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(key)).send({ url: elsewhere.url('/services/collector') });
    expect(moved.status).toBe(422);
    expect(moved.body.detail).toMatch(/url .* needs authorization again/);

    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rpt_binding_1' } });
    expect(delivery.status).toBe('succeeded');
    expect(w.receiver.requests('/services/collector').at(-1)!.headers.authorization).toBe('Splunk old-hec-token');
    expect(elsewhere.requests('/services/collector')).toHaveLength(0);

    const withValue = await w.api().patch(`/api/v1/webhooks/subscriptions/${sub.id}`).set(bearer(key))
      .send({ url: elsewhere.url('/services/collector'), authorization: 'Splunk new-hec-token' });
    expect(withValue.status).toBe(200);
    expect((await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rpt_binding_2' } })).status).toBe('succeeded');
    const received = elsewhere.requests('/services/collector');
    expect(received).toHaveLength(1);
    expect(received[0].headers.authorization).toBe('Splunk new-hec-token');
    expect(everyHeader(elsewhere)).not.toContain('old-hec-token');
  });
});

describe('the worker keeps the binding too (a URL changed behind the API, e.g. in the database)', () => {
  it('sends no authorization to a subscription URL moved to another destination: no request, subscription disabled, says why', async () => {
    const sub = await w.subscribe({ name: 'moved', url: w.receiver.url('/moved/collector'), events: ['report.ready'], authorization: 'Splunk bound-token' });
    expect((await w.subscription(sub.id)).credentialDestination).toBe(credentialDestination(w.receiver.url('/')));
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { url: elsewhere.url('/moved/collector') } });
    const delivery = await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rpt_moved' } });
    expect(delivery).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(delivery.attempts[0]).toMatchObject({ outcome: 'unsafe_url', responseStatus: null });
    expect(delivery.attempts[0].error).toMatch(/stored credentials were given for https:\/\/127\.0\.0\.1:\d+, not https:\/\/127\.0\.0\.1:\d+/);
    expect(elsewhere.requests('/moved/collector')).toHaveLength(0);
    expect(await w.subscription(sub.id)).toMatchObject({ status: 'disabled', disabledReason: expect.stringMatching(/stored credentials were given for/) });
  });

  it('sends no token to a tracker base_url moved to another destination: export failed, no request', async () => {
    const target = await w.api().post('/api/v1/issue-export-targets').set(bearer(w.org.admin.token))
      .send({ kind: 'github', name: 'moved', base_url: w.receiver.url('/api/v3'), repository: 'acme/moved', token: OLD_TOKEN });
    await w.h.deps.prisma.issueExportTarget.update({ where: { id: target.body.id }, data: { baseUrl: elsewhere.url('/api/v3') } });
    const exported = await w.api().post(`/api/v1/findings/${findings[0].id}/issue-exports`).set(bearer(w.org.admin.token)).send({ target_id: target.body.id });
    expect(await waitForExport(exported.body.id)).toMatchObject({ status: 'failed', lastError: expect.stringMatching(/stored credentials were given for/) });
    expect(elsewhere.requests('/api/v3/repos/acme/moved/issues')).toHaveLength(0);
  });

  it('binds credentials stored before the binding existed at start-up, to the URL they hold', async () => {
    const sub = await w.subscribe({ name: 'legacy', url: w.receiver.url('/legacy/collector'), events: ['report.ready'], authorization: 'Splunk legacy-token' });
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: sub.id }, data: { credentialDestination: null } });
    expect(await bindStoredCredentials(w.h.deps.prisma, credentialDestination)).toBeGreaterThanOrEqual(1);
    expect((await w.subscription(sub.id)).credentialDestination).toBe(credentialDestination(w.receiver.url('/')));
    expect((await w.publishTo(sub.id, { type: 'report.ready', data: { report_id: 'rpt_legacy' } })).status).toBe('succeeded');
    expect(w.receiver.requests('/legacy/collector')[0].headers.authorization).toBe('Splunk legacy-token');
  });
});
