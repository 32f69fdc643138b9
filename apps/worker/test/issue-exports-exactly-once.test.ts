// Exactly one tracker issue per export (issue 35): GitHub and Jira trackers on loopback that create the issue and
// then answer after the worker's timeout, answer 502, answer a 2xx that cannot be read, or hold the answer while the
// worker is SIGKILLed (a real child worker). Each time the next attempt finds the issue by the export's marker and
// adopts it: the tracker holds one issue and the export ends succeeded with that issue.
import type { Finding } from '@svc/db';
import { bearer, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { insertFinding } from '../../api/test/support/domain';
import { withJobLogger } from '@svc/config';
import { closeDeliveryContext, createDeliveryContext, type DeliveryContext } from '../src/deliver';
import { processIssueExport } from '../src/issue-export';
import { startWorker, type RunningWorker } from '../src/worker';
import { buildWorker, spawnWorker, type ChildWorker } from './support/child-worker';
import { fakeGitHub, fakeJira, type Behaviour, type FakeTracker } from './support/trackers';
import { createWorld, type World } from './support/world';

const TIMEOUT_MS = 1_500;
const GITHUB_TOKEN = 'ghp_exactlyOnceToken0123456789';
const JIRA_EMAIL = 'bot@acme.com';
const JIRA_TOKEN = 'ATATT-exactly-once';

let w: World;
let finding: Finding;
let trackers = 0;

beforeAll(async () => {
  buildWorker();
  w = await createWorld({ worker: false, env: { PUBLIC_BASE_URL: 'https://security.example.com', WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) } });
  const project = await insertProject(w.h, w.org.id);
  const assessment = await insertAssessment(w.h, w.org.id, project.id);
  finding = await insertFinding(w.h, assessment, { title: 'SQL injection in login', severity: 'critical' });
}, 180_000);
afterAll(() => w?.close());

/** A tracker of its own for each test: its own repository or site, so its issues are its test's alone. */
function newTracker(kind: 'github' | 'jira', behaviour: Behaviour): FakeTracker {
  trackers += 1;
  return kind === 'github'
    ? fakeGitHub(w.receiver, `/gh${trackers}/api/v3`, `acme/repo${trackers}`, GITHUB_TOKEN, behaviour)
    : fakeJira(w.receiver, `/jira${trackers}`, 'SEC', JIRA_EMAIL, JIRA_TOKEN, behaviour);
}

async function exportTo(tracker: FakeTracker): Promise<string> {
  const target = await w.api().post('/api/v1/issue-export-targets').set(bearer(w.org.admin.token)).send({ name: `tracker ${trackers}`, ...tracker.targetFields });
  if (target.status !== 201) throw new Error(`Creating a target answered ${target.status}: ${JSON.stringify(target.body)}`);
  const res = await w.api().post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(w.org.admin.token)).send({ target_id: target.body.id });
  if (res.status !== 202) throw new Error(`Exporting answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

async function waitForExport(id: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const row = await w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id } });
    if (row.status !== 'pending') return row;
    if (Date.now() > deadline) throw new Error(`export ${id} still pending: ${JSON.stringify(row)}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

/** What the user sees: the finding's export, succeeded, linking the one issue the tracker holds. */
async function expectOneIssue(tracker: FakeTracker, exportId: string, timeoutMs?: number) {
  const done = await waitForExport(exportId, timeoutMs);
  expect(tracker.issues).toHaveLength(1);
  const [issue] = tracker.issues;
  expect(done).toMatchObject({ status: 'succeeded', externalKey: issue.key, externalUrl: issue.url, lastError: null });
  const shown = await w.api().get(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(w.org.admin.token));
  expect(shown.body.data).toContainEqual(expect.objectContaining({ id: exportId, status: 'succeeded', external_key: issue.key, external_url: issue.url }));
  // The issue carries the export's marker: a hidden comment in the GitHub body, a label on Jira.
  expect(issue.text).toContain(tracker.kind === 'github' ? `<!-- svc-export:${exportId} -->` : `svc-export-${exportId}`);
  return done;
}

describe('a worker that retries', () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startWorker(w.workerDeps, { schedule: false });
  });
  afterAll(() => worker.close());

  describe.each(['github', 'jira'] as const)('%s', (kind) => {
    it('adopts the issue created by a request answered after the timeout', async () => {
      const tracker = newTracker(kind, { answer: (n, normal) => (n === 1 ? { ...normal, delayMs: TIMEOUT_MS + 2_500 } : normal) });
      const id = await exportTo(tracker);
      const done = await expectOneIssue(tracker, id);
      expect(tracker.creates()).toHaveLength(1);
      expect(tracker.lookups().length).toBeGreaterThanOrEqual(1);
      expect(done.attemptCount).toBeGreaterThanOrEqual(2); // 2 unless a lookup itself timed out on a loaded machine
    }, 60_000);

    it('adopts the issue created by a request answered 502', async () => {
      const tracker = newTracker(kind, { answer: (n, normal) => (n === 1 ? { status: 502, headers: { 'content-type': 'text/html' }, body: '<html>Bad Gateway</html>' } : normal) });
      const id = await exportTo(tracker);
      await expectOneIssue(tracker, id);
      expect(tracker.creates()).toHaveLength(1);
    }, 60_000);

    it('adopts the issue created by a request whose 2xx answer cannot be read', async () => {
      const tracker = newTracker(kind, { answer: (n, normal) => (n === 1 ? { status: 201, headers: { 'content-type': 'application/json' }, body: '{"id":' } : normal) });
      const id = await exportTo(tracker);
      await expectOneIssue(tracker, id);
      expect(tracker.creates()).toHaveLength(1);
    }, 60_000);

    it('creates the issue when the lookup after a 502 finds none (the tracker created nothing)', async () => {
      const tracker = newTracker(kind, { creates: (n) => n > 1, answer: (n, normal) => (n === 1 ? { status: 502, body: 'bad gateway' } : normal) });
      const id = await exportTo(tracker);
      await expectOneIssue(tracker, id);
      expect(tracker.creates()).toHaveLength(2);
      // The second create request came after a lookup that found nothing.
      expect(tracker.lookups()[0].at).toBeLessThan(tracker.creates()[1].at);
    }, 60_000);

    it('an export that ended failed with its outcome unknown adopts the issue when exported again', async () => {
      let lookupsDown = true;
      const tracker = newTracker(kind, {
        answer: (n, normal) => (n === 1 ? { status: 504, body: 'gateway timeout' } : normal),
        lookupAnswer: (_n, normal) => (lookupsDown ? { status: 503, headers: { 'content-type': 'application/json' }, body: '{"message":"Service Unavailable"}' } : normal),
      });
      const id = await exportTo(tracker);
      const failed = await waitForExport(id);
      expect(failed).toMatchObject({ status: 'failed', lastError: expect.stringMatching(/looking for the issue: HTTP 503/) });
      expect(tracker.creates()).toHaveLength(1);
      lookupsDown = false;
      const again = await w.api().post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(w.org.admin.token)).send({ target_id: failed.targetId });
      expect(again.status).toBe(202);
      await expectOneIssue(tracker, id);
      expect(tracker.creates()).toHaveLength(1);
    }, 60_000);
  });
});

describe('a busy GitHub repository', () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startWorker(w.workerDeps, { schedule: false });
  });
  afterAll(() => worker.close());

  it('finds the issue through the search API when more issues were created since than the list pages hold', async () => {
    const tracker: FakeTracker = newTracker('github', {
      answer: (n, normal) => {
        if (n > 1) return normal;
        tracker.addIssues(400); // others' issues, created after the export's one: it is on the list's 14th page
        return { status: 502, body: 'bad gateway' };
      },
    });
    const id = await exportTo(tracker);
    await expectOneIssue(tracker, id);
    expect(tracker.issues).toHaveLength(1);
    expect(tracker.creates()).toHaveLength(1);
    const lookups = tracker.lookups();
    expect(lookups.filter((r) => r.path.includes('/repos/'))).toHaveLength(10);
    expect(lookups.filter((r) => r.path.endsWith('/search/issues'))).toHaveLength(1);
  }, 60_000);
});

describe('a public GitHub repository', () => {
  let worker: RunningWorker;
  beforeAll(async () => {
    worker = await startWorker(w.workerDeps, { schedule: false });
  });
  afterAll(() => worker.close());

  it('adopts its own issue, not an older one whose author pasted the marker into it meanwhile', async () => {
    // The export's issue is public, its marker readable; the author of an older issue edits that one to carry it.
    let older: { body: string; updated_at: string } | undefined;
    const tracker: FakeTracker = newTracker('github', {
      answer: (n, normal) => {
        if (n > 1) return normal;
        const marker = /<!-- svc-export:[^ ]+ -->/.exec(tracker.issues[0].text)![0];
        older!.body += `\n\n${marker}`;
        older!.updated_at = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
        return { status: 502, body: 'bad gateway' };
      },
    });
    older = tracker.addIssue('A feature request from last year.', new Date(Date.now() - 365 * 24 * 3600_000));
    const id = await exportTo(tracker);
    await expectOneIssue(tracker, id);
    expect(tracker.creates()).toHaveLength(1);
  }, 60_000);

  it('adopts its own issue, not a newer one carrying its marker that 29 more issues pushed onto the first page', async () => {
    // Newest first: the copy and 29 others fill the list's first page, the export's own issue is on the second.
    const tracker: FakeTracker = newTracker('github', {
      answer: (n, normal) => {
        if (n > 1) return normal;
        const marker = /<!-- svc-export:[^ ]+ -->/.exec(tracker.issues[0].text)![0];
        tracker.addIssue(`Looks like yours.\n\n${marker}`, new Date());
        tracker.addIssues(29);
        return { status: 502, body: 'bad gateway' };
      },
    });
    const id = await exportTo(tracker);
    await expectOneIssue(tracker, id);
    expect(tracker.creates()).toHaveLength(1);
  }, 60_000);
});

describe('a worker SIGKILLed between the tracker\'s answer and its record', () => {
  let child: ChildWorker | undefined;
  let rescuer: RunningWorker | undefined;
  afterAll(async () => {
    if (child && child.process.exitCode === null && child.process.signalCode === null) {
      child.process.kill('SIGKILL');
      await child.exited;
    }
    await rescuer?.close();
  });

  it('leaves one issue on GitHub and on Jira: another worker takes the job over and adopts it', async () => {
    // The trackers create the issue and hold the answer: the worker is killed while it waits for it.
    const github = newTracker('github', { answer: (n, normal) => (n === 1 ? { hang: true } : normal) });
    const jira = newTracker('jira', { answer: (n, normal) => (n === 1 ? { hang: true } : normal) });
    child = spawnWorker(w, { WEBHOOK_TIMEOUT_MS: '120000' });
    await child.waitForLog('Worker started');
    const ids = [await exportTo(github), await exportTo(jira)];
    await github.waitForIssues(1);
    await jira.waitForIssues(1);

    child.process.kill('SIGKILL');
    expect((await child.exited).signal).toBe('SIGKILL');
    // What the dead worker left: no answer recorded, but the mark that a create request went out.
    for (const id of ids) {
      expect(await w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id } })).toMatchObject({ status: 'pending', attemptCount: 0, createSentAt: expect.any(Date) });
    }

    // The dead worker's lock on each job runs out (30 s); the stalled check returns the jobs to this worker.
    rescuer = await startWorker(w.workerDeps, { schedule: false, delivery: { stalledInterval: 500 } });
    const [fromGitHub, fromJira] = [await expectOneIssue(github, ids[0], 90_000), await expectOneIssue(jira, ids[1], 10_000)];
    expect(fromGitHub.attemptCount).toBe(1);
    expect(fromJira.attemptCount).toBe(1);
    expect(github.creates()).toHaveLength(1);
    expect(jira.creates()).toHaveLength(1);
  }, 120_000);
});

describe('two runs of one export at once (a job taken over by another worker while its first run waits)', () => {
  let ctx: DeliveryContext;
  beforeAll(() => {
    ctx = createDeliveryContext(w.workerDeps);
  });
  afterAll(() => closeDeliveryContext(ctx));

  /** Runs the export's processor as a worker would (its queued job is left alone: no worker runs here). */
  const run = (id: string) => processIssueExport(withJobLogger(ctx, `run-${id}`), id);

  describe.each(['github', 'jira'] as const)('%s', (kind) => {
    it('started together: one create request, one issue; the other run sends nothing and tries again later', async () => {
      const tracker = newTracker(kind, { answer: (_n, normal) => ({ ...normal, delayMs: 400 }) });
      const id = await exportTo(tracker);
      const [first, second] = await Promise.allSettled([run(id), run(id)]);
      const outcomes = [first, second].map((r) => (r.status === 'fulfilled' ? r.value.status : (r.reason as Error).name));
      expect(outcomes.sort()).toEqual(['RetryableDeliveryError', 'succeeded']);
      expect(tracker.creates()).toHaveLength(1);
      await expectOneIssue(tracker, id);
      expect((await w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id } })).attemptCount).toBe(1);
    });

    it('the second started while the first waits for the tracker, whose lookups do not show the issue yet: still one issue', async () => {
      // Jira's search (and a slow GitHub) may not list an issue for some seconds after it was created.
      const tracker = newTracker(kind, {
        answer: (_n, normal) => ({ ...normal, delayMs: 600 }),
        lookupAnswer: (_n, normal) => (tracker.issues.length > 0 ? emptyLookup(kind) : normal),
      });
      const id = await exportTo(tracker);
      const first = run(id);
      await tracker.waitForIssues(1);
      const second = run(id).catch((err: Error) => err.name);
      expect(await first).toMatchObject({ status: 'succeeded' });
      expect(await second).toBe('RetryableDeliveryError');
      expect(tracker.lookups().length).toBeGreaterThan(0);
      expect(tracker.creates()).toHaveLength(1);
      await expectOneIssue(tracker, id);
    });
  });
});

/** A lookup answer listing no issue, in the tracker's own shape. */
function emptyLookup(kind: 'github' | 'jira') {
  const body = kind === 'github' ? [] : { issues: [], isLast: true };
  return { status: 200, headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify(body) };
}
