// Issue exports end to end (issue 24): GitHub (Enterprise base URL) and Jira targets configured through the API,
// a finding exported by the real in-process worker to loopback HTTPS servers speaking GitHub's
// POST /repos/{owner}/{repo}/issues and Jira's POST /rest/api/3/issue; retries, idempotency, sealed credentials,
// scopes, roles, tenancy and URL safety. Exactly one issue after unknown outcomes: issue-exports-exactly-once.test.ts.
import { credentialDestination } from '@svc/webhooks';
import type { Lookup } from '@svc/net';
import type { Finding } from '@svc/db';
import { bearer, createOrg, insertAssessment, insertProject, type TestOrg, type TestUser } from '../../api/test/support/fixtures';
import { insertFinding } from '../../api/test/support/domain';
import type { ReceivedRequest } from './support/receiver';
import { fakeGitHub } from './support/trackers';
import { createWorld, type World } from './support/world';
import { runOutboxRelay } from '../src/maintenance';
import { newId } from '@svc/db';
import { relayOverdueIssueExports } from '@svc/outbox';
import { ISSUE_EXPORT_JOB, deliveryJobOptions } from '@svc/queue';

const internalLookup: Lookup = async (hostname) => {
  if (hostname === 'jira.internal.test') return [{ address: '10.1.2.3', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let w: World;
let other: TestOrg;
let finding: Finding;
let githubNumber = 0;

const TARGETS = '/api/v1/issue-export-targets';
const GITHUB_TOKEN = 'ghp_loopbackSecretToken0123456789';
const JIRA_TOKEN = 'ATATT-loopback-jira-secret';

/** GitHub's answer to a created issue: the fields we read sit among many others, as in the real API. */
function githubCreated(request: ReceivedRequest) {
  githubNumber += 1;
  const [, , owner, repo] = request.path.replace('/ghe/api/v3', '').split('/');
  const html = `https://ghe.example.com/${owner}/${repo}/issues/${githubNumber}`;
  const padding = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`extra_${i}`, 'x'.repeat(100)]));
  return { status: 201, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ url: `${request.path}/${githubNumber}`, ...padding, html_url: html, id: 1000 + githubNumber, number: githubNumber, title: JSON.parse(request.body.toString()).title }) };
}

beforeAll(async () => {
  w = await createWorld({ lookup: internalLookup, env: { PUBLIC_BASE_URL: 'https://security.example.com' } });
  other = await createOrg(w.h);
  const project = await insertProject(w.h, w.org.id);
  const assessment = await insertAssessment(w.h, w.org.id, project.id);
  finding = await insertFinding(w.h, assessment, { title: 'SQL injection in login', severity: 'critical', location: 'src/login.ts:42', description: 'User input reaches the query.' });
  w.receiver.script('/ghe/api/v3/repos/acme/web/issues', (req) => githubCreated(req));
  w.receiver.script('/jira/rest/api/3/issue', () => ({ status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":"10001","key":"SEC-12","self":"https://acme.atlassian.net/rest/api/3/issue/10001"}' }));
});
afterAll(() => w?.close());

async function createTarget(body: Record<string, unknown>, user: TestUser = w.org.admin) {
  const res = await w.api().post(TARGETS).set(bearer(user.token)).send(body);
  if (res.status !== 201) throw new Error(`Creating a target answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body as { id: string; [field: string]: unknown };
}

const github = (extra: Record<string, unknown> = {}) =>
  createTarget({ kind: 'github', name: 'acme/web', base_url: w.receiver.url('/ghe/api/v3'), repository: 'acme/web', token: GITHUB_TOKEN, ...extra });

async function exportTo(targetId: string, findingId = finding.id, user: TestUser = w.org.admin) {
  return w.api().post(`/api/v1/findings/${findingId}/issue-exports`).set(bearer(user.token)).send({ target_id: targetId });
}

async function waitForExport(id: string) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const row = await w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id } });
    if (row.status !== 'pending') return row;
    if (Date.now() > deadline) throw new Error(`export ${id} still pending: ${JSON.stringify(row)}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

describe('GitHub Issues', () => {
  it('creates the issue with title, severity, location and a link back, and records its key and URL on the finding', async () => {
    const target = await github();
    expect(target).toMatchObject({ kind: 'github', repository: 'acme/web', has_credentials: true, last_success_at: null });
    expect(JSON.stringify(target)).not.toContain(GITHUB_TOKEN);
    const row = await w.h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id: target.id } });
    expect(row.credentialsEnc).not.toContain(GITHUB_TOKEN);

    const res = await exportTo(target.id);
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'pending', finding_id: finding.id, target_id: target.id, target_name: 'acme/web' });
    const done = await waitForExport(res.body.id);
    expect(done).toMatchObject({ status: 'succeeded', attemptCount: 1, externalKey: expect.stringMatching(/^acme\/web#\d+$/) });

    const requests = w.receiver.requests('/ghe/api/v3/repos/acme/web/issues');
    const request = requests[requests.length - 1];
    expect(request.headers.authorization).toBe(`Bearer ${GITHUB_TOKEN}`);
    expect(request.headers.accept).toBe('application/vnd.github+json');
    const body = JSON.parse(request.body.toString());
    expect(body.title).toBe('[critical] SQL injection in login');
    expect(body.body).toContain('**Severity:** critical');
    expect(body.body).toContain('**Location:** `src/login.ts:42`');
    expect(body.body).toContain(`(https://security.example.com/assessments/${finding.assessmentId}#finding-${finding.id})`);

    const audit = await w.h.deps.prisma.auditEvent.findMany({ where: { targetId: { in: [target.id, finding.id] } }, orderBy: { createdAt: 'asc' } });
    expect(audit.map((a) => a.action)).toEqual(['issue_export_target.created', 'finding.issue_exported']);
    expect(JSON.stringify(audit)).not.toContain(GITHUB_TOKEN);
    const shown = await w.api().get(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(w.org.admin.token));
    expect(shown.body.data).toEqual([expect.objectContaining({ status: 'succeeded', external_key: done.externalKey, external_url: done.externalUrl, kind: 'github' })]);
    expect((await w.api().get(`${TARGETS}/${target.id}`).set(bearer(w.org.member.token))).body.last_success_at).not.toBeNull();
  });

  it('is idempotent: a second export returns the existing issue and sends nothing', async () => {
    const target = await github({ name: 'idempotent' });
    const first = await exportTo(target.id);
    const done = await waitForExport(first.body.id);
    const sent = w.receiver.requests('/ghe/api/v3/repos/acme/web/issues').length;
    const second = await exportTo(target.id);
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ id: first.body.id, status: 'succeeded', external_key: done.externalKey, external_url: done.externalUrl });
    await new Promise((r) => setTimeout(r, 300));
    expect(w.receiver.requests('/ghe/api/v3/repos/acme/web/issues')).toHaveLength(sent);
    expect(await w.h.deps.prisma.findingIssueExport.count({ where: { findingId: finding.id, targetId: target.id } })).toBe(1);
  });

  it('retries a 502 and a 429 with Retry-After, looking for the issue before each retry, then succeeds', async () => {
    const tracker = fakeGitHub(w.receiver, '/ghe/api/v3', 'acme/flaky', GITHUB_TOKEN, {
      creates: (n) => n === 3,
      answer: (n, normal) =>
        n === 1 ? { status: 502, body: 'bad gateway' } : n === 2 ? { status: 429, headers: { 'retry-after': '1', 'content-type': 'application/json' }, body: '{"message":"API rate limit exceeded"}' } : normal,
    });
    const target = await github({ name: 'flaky', repository: 'acme/flaky' });
    const res = await exportTo(target.id);
    const done = await waitForExport(res.body.id);
    expect(done).toMatchObject({ status: 'succeeded', attemptCount: 3, lastError: null, externalKey: 'acme/flaky#1' });
    expect(tracker.creates()).toHaveLength(3);
    // After the 502 the outcome is unknown: every later attempt first lists the repository's issues, and the first
    // retry sends nothing until the tracker's search lag after that answer has passed (then it looks again).
    expect(tracker.lookups()).toHaveLength(3);
    expect(tracker.creates()[1].at - tracker.creates()[0].at).toBeGreaterThanOrEqual(10_000);
    const shown = (await w.api().get(`${TARGETS}/${target.id}`).set(bearer(w.org.manager.token))).body;
    expect(shown.last_error).toBe('HTTP 429: API rate limit exceeded');
  });

  it('fails at once on a 4xx other than 408/429, saying what the tracker said; exporting again starts over', async () => {
    const tracker = fakeGitHub(w.receiver, '/ghe/api/v3', 'acme/gone', GITHUB_TOKEN, {
      creates: (n) => n > 1,
      answer: (n, normal) => (n === 1 ? { status: 404, headers: { 'content-type': 'application/json' }, body: '{"message":"Not Found"}' } : normal),
    });
    const target = await github({ name: 'gone', repository: 'acme/gone' });
    const res = await exportTo(target.id);
    expect(await waitForExport(res.body.id)).toMatchObject({ status: 'failed', attemptCount: 1, lastError: 'HTTP 404: Not Found' });
    const again = await exportTo(target.id);
    expect(again.status).toBe(202);
    expect(await waitForExport(again.body.id)).toMatchObject({ id: res.body.id, status: 'succeeded', externalKey: 'acme/gone#1' });
    expect(tracker.issues).toHaveLength(1);
  });
});

describe('relay', () => {
  it('enqueues an overdue pending export whose job was lost, and it is exported', async () => {
    const target = await github({ name: 'relayed' });
    const other = await insertFinding(w.h, { id: finding.assessmentId, organizationId: w.org.id, projectId: finding.projectId }, { title: 'Lost job' });
    const lost = await w.h.deps.prisma.findingIssueExport.create({
      data: { id: newId('iexj'), organizationId: w.org.id, findingId: other.id, targetId: target.id, createdAt: new Date(Date.now() - 3600_000) },
    });
    await runOutboxRelay(w.workerDeps, w.worker!.deliveryQueue); // nothing else enqueues it: the worker runs no schedules here
    expect(await waitForExport(lost.id)).toMatchObject({ status: 'succeeded', externalKey: expect.stringMatching(/^acme\/web#\d+$/) });
  });

  it('finds a lost export behind overdue ones whose jobs are still queued, a page at a time', async () => {
    const target = await github({ name: 'relayed-behind' });
    const queue = w.worker!.deliveryQueue;
    const overdue = async (title: string) => {
      const f = await insertFinding(w.h, { id: finding.assessmentId, organizationId: w.org.id, projectId: finding.projectId }, { title });
      return w.h.deps.prisma.findingIssueExport.create({
        data: { id: newId('iexj'), organizationId: w.org.id, findingId: f.id, targetId: target.id, createdAt: new Date(Date.now() - 3600_000) },
      });
    };
    // Three whose jobs wait in the queue (delayed an hour, as behind a tracker's backoff), then the lost one.
    const queued = [await overdue('Queued 1'), await overdue('Queued 2'), await overdue('Queued 3')];
    for (const e of queued) await queue.add(ISSUE_EXPORT_JOB, { deliveryId: e.id }, deliveryJobOptions(e.id, 8, 3600_000));
    const lost = await overdue('Lost behind');
    try {
      // Pages of 2: the lost one is on the second page. Only it is enqueued; the queued ones keep their jobs.
      expect(await relayOverdueIssueExports(w.h.deps.prisma, queue, { ageMs: 0, maxAttempts: 8, batchSize: 2 })).toBe(1);
      expect(await waitForExport(lost.id)).toMatchObject({ status: 'succeeded' });
      for (const e of queued) expect(await queue.getJobState(e.id)).toBe('delayed');
    } finally {
      for (const e of queued) await queue.remove(e.id);
      await w.h.deps.prisma.findingIssueExport.updateMany({ where: { id: { in: queued.map((e) => e.id) } }, data: { status: 'failed' } });
    }
  });
});

describe('Jira', () => {
  it('creates the issue with basic auth and an ADF description, and records the key and browse URL', async () => {
    const target = await createTarget({ kind: 'jira', name: 'SEC', base_url: w.receiver.url('/jira'), project_key: 'SEC', issue_type: 'Task', email: 'bot@acme.com', api_token: JIRA_TOKEN });
    expect(target).toMatchObject({ kind: 'jira', project_key: 'SEC', issue_type: 'Task', has_credentials: true });
    expect(JSON.stringify(target)).not.toContain(JIRA_TOKEN);
    expect(JSON.stringify(target)).not.toContain('bot@acme.com');
    const res = await exportTo(target.id);
    const done = await waitForExport(res.body.id);
    expect(done).toMatchObject({ status: 'succeeded', externalKey: 'SEC-12', externalUrl: `${w.receiver.url('/jira')}/browse/SEC-12` });
    const [request] = w.receiver.requests('/jira/rest/api/3/issue');
    expect(request.headers.authorization).toBe(`Basic ${Buffer.from(`bot@acme.com:${JIRA_TOKEN}`).toString('base64')}`);
    const { fields } = JSON.parse(request.body.toString());
    expect(fields).toMatchObject({ project: { key: 'SEC' }, issuetype: { name: 'Task' }, summary: '[critical] SQL injection in login', labels: ['security', `svc-export-${res.body.id}`] });
    expect(fields.description.type).toBe('doc');
    expect(JSON.stringify(fields.description)).toContain(`https://security.example.com/assessments/${finding.assessmentId}#finding-${finding.id}`);
  });
});

describe('configuration, scopes, roles and tenancy', () => {
  it("member reads targets but cannot configure or export; manager reads but does not configure (SPEC's role table)", async () => {
    const target = await github({ name: 'roles' });
    expect((await w.api().get(TARGETS).set(bearer(w.org.member.token))).status).toBe(200);
    const create = await w.api().post(TARGETS).set(bearer(w.org.member.token)).send({ kind: 'github', name: 'x', repository: 'a/b', token: 't' });
    expect(create.status).toBe(403);
    expect(create.body.detail).toBe('Missing required scope: issue_exports:configure.');
    const exported = await exportTo(target.id, finding.id, w.org.member);
    expect(exported.body.detail).toBe('Missing required scope: findings:export_issue.');
    const asManager = bearer(w.org.manager.token);
    expect((await w.api().get(TARGETS).set(asManager)).status).toBe(200);
    for (const res of [
      await w.api().post(TARGETS).set(asManager).send({ kind: 'github', name: 'x', repository: 'a/b', token: 't' }),
      await w.api().patch(`${TARGETS}/${target.id}`).set(asManager).send({ name: 'renamed' }),
      await w.api().delete(`${TARGETS}/${target.id}`).set(asManager),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.detail).toBe('Missing required scope: issue_exports:configure.');
    }
    expect((await w.api().get(`${TARGETS}/${target.id}`).set(asManager)).body.name).toBe('roles');
    expect((await w.api().get('/api/v1/webhooks/subscriptions').set(bearer(w.org.manager.token))).status).toBe(403);
  });

  it("answers 404 for another organization's target and finding", async () => {
    const target = await github({ name: 'mine' });
    const as = bearer(other.admin.token);
    expect((await w.api().get(`${TARGETS}/${target.id}`).set(as)).status).toBe(404);
    expect((await w.api().patch(`${TARGETS}/${target.id}`).set(as).send({ name: 'theirs' })).status).toBe(404);
    expect((await w.api().delete(`${TARGETS}/${target.id}`).set(as)).status).toBe(404);
    expect((await exportTo(target.id, finding.id, other.admin)).status).toBe(404);
    const theirs = await createTarget({ kind: 'github', name: 'theirs', repository: 'other/repo', token: 't0ken' }, other.admin);
    expect((await exportTo(theirs.id)).status).toBe(404);
  });

  it('refuses the other tracker\'s fields and bad values, replaces credentials without showing them, and revokes', async () => {
    expect((await w.api().post(TARGETS).set(bearer(w.org.admin.token)).send({ kind: 'github', name: 'x', repository: 'a/b', token: 't', project_key: 'SEC' })).status).toBe(400);
    expect((await w.api().post(TARGETS).set(bearer(w.org.admin.token)).send({ kind: 'jira', name: 'x', base_url: w.receiver.url('/jira'), project_key: 'sec', email: 'a@b.co', api_token: 't' })).status).toBe(400);
    const target = await github({ name: 'rotate' });
    expect((await w.api().patch(`${TARGETS}/${target.id}`).set(bearer(w.org.admin.token)).send({ project_key: 'SEC' })).status).toBe(422);
    const before = (await w.h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id: target.id } })).credentialsEnc;
    const patched = await w.api().patch(`${TARGETS}/${target.id}`).set(bearer(w.org.admin.token)).send({ token: 'ghp_newToken' });
    expect(JSON.stringify(patched.body)).not.toContain('ghp_newToken');
    expect((await w.h.deps.prisma.issueExportTarget.findUniqueOrThrow({ where: { id: target.id } })).credentialsEnc).not.toBe(before);
    expect((await w.api().delete(`${TARGETS}/${target.id}`).set(bearer(w.org.admin.token))).status).toBe(204);
    expect((await w.api().get(`${TARGETS}/${target.id}`).set(bearer(w.org.manager.token))).status).toBe(404);
    expect((await exportTo(target.id)).status).toBe(404);
  });
});

describe('URL safety', () => {
  it.each([
    ['an http URL', 'http://203.0.114.10/api/v3'],
    ['a private address', 'https://10.1.2.3/api/v3'],
    ['loopback', 'https://[::1]/api/v3'],
    ['localhost', 'https://localhost/api/v3'],
    ['cloud metadata', 'https://169.254.169.254/latest'],
  ])('refuses %s as a GitHub Enterprise or Jira URL with 422', async (_label, url) => {
    const gh = await w.api().post(TARGETS).set(bearer(w.org.admin.token)).send({ kind: 'github', name: 'x', base_url: url, repository: 'a/b', token: 't' });
    expect(gh.status).toBe(422);
    expect(gh.body.detail).toMatch(/^Issue tracker URL refused/);
    const jira = await w.api().post(TARGETS).set(bearer(w.org.admin.token)).send({ kind: 'jira', name: 'x', base_url: url, project_key: 'SEC', email: 'a@b.co', api_token: 't' });
    expect(jira.status).toBe(422);
  });

  it('refuses at export time a site whose name now resolves to a private address: no request, export failed', async () => {
    const target = await createTarget({ kind: 'jira', name: 'rebind', base_url: w.receiver.url('/jira-rebind'), project_key: 'SEC', email: 'bot@acme.com', api_token: JIRA_TOKEN });
    await w.h.deps.prisma.issueExportTarget.update({ where: { id: target.id }, data: { baseUrl: 'https://jira.internal.test', credentialDestination: credentialDestination('https://jira.internal.test') } });
    const res = await exportTo(target.id);
    const done = await waitForExport(res.body.id);
    expect(done).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(done.lastError).toMatch(/not a public address \(private\)/);
    expect(w.receiver.requests('/jira-rebind/rest/api/3/issue')).toHaveLength(0);
  });
});
