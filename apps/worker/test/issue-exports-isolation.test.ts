// Issue exports share the delivery workers' slots, and a tracker is isolated as a webhook endpoint is (DESIGN:
// trackers get the same isolation): its own in-flight cap and breaker, keyed by the export target. A tracker that
// never answers holds its cap (WEBHOOK_MIN_IN_FLIGHT, 4) of the worker's slots, not all of them: the exports over
// the cap wait without a slot, and a webhook goes out meanwhile instead of waiting for the tracker's timeouts.
import { newId } from '@svc/db';
import { bearer, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { closeDeliveryContext, createDeliveryContext } from '../src/deliver';
import { processIssueExport } from '../src/issue-export';
import { insertFinding } from '../../api/test/support/domain';
import { fakeGitHub, type FakeTracker } from './support/trackers';
import { createWorld, type World } from './support/world';

const TIMEOUT_MS = 8_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let w: World;
beforeAll(async () => {
  w = await createWorld({
    env: {
      PUBLIC_BASE_URL: 'https://security.example.com',
      WORKER_CONCURRENCY: '6',
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      // The defaults (the test world raises the cap for speed): 4 at first, at most one worker's slots.
      WEBHOOK_MIN_IN_FLIGHT: '4',
      WEBHOOK_MAX_IN_FLIGHT: '6',
      WEBHOOK_BREAKER_FAILURES: '3',
    },
  });
}, 60_000);
afterAll(() => w?.close(), 60_000);

it('a tracker that never answers holds its cap of the worker slots, not all six; a webhook goes out meanwhile', async () => {
  // The tracker creates each issue and never answers.
  const tracker = fakeGitHub(w.receiver, '/gh/api/v3', 'acme/silent', 'ghp_silentTrackerToken0123456789', { answer: () => ({ hang: true }) });
  const target = await w.api().post('/api/v1/issue-export-targets').set(bearer(w.org.admin.token)).send({ name: 'silent', ...tracker.targetFields });
  expect(target.status).toBe(201);
  const project = await insertProject(w.h, w.org.id);
  const assessment = await insertAssessment(w.h, w.org.id, project.id);
  for (let i = 0; i < 8; i++) {
    const finding = await insertFinding(w.h, assessment, { title: `Finding ${i}` });
    const res = await w.api().post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(w.org.admin.token)).send({ target_id: target.body.id });
    expect(res.status).toBe(202);
  }
  await tracker.waitForIssues(4);
  await sleep(500);
  // Four requests hang at the tracker; the other four exports wait for the cap, holding no slot.
  expect(tracker.creates()).toHaveLength(4);

  const healthy = await w.subscribe({ name: 'healthy', url: w.receiver.url('/healthy'), events: ['report.ready'] });
  const started = Date.now();
  const delivered = await w.publishTo(healthy.id, { type: 'report.ready', data: { report_id: 'rpt_1' } });
  expect(delivered.status).toBe('succeeded');
  // Long before the tracker's requests time out (8 s), which is when a worker whose slots they all held would send it.
  expect(Date.now() - started).toBeLessThan(TIMEOUT_MS / 2);
}, 60_000);

/**
 * A target on `tracker` and `count` exports to it of findings in a new assessment, without queue jobs: only the
 * direct processIssueExport calls of the test run them.
 */
async function exportsWithoutJobs(world: World, tracker: FakeTracker, name: string, count: number, fields: { createSentAt?: Date } = {}) {
  const target = await world.api().post('/api/v1/issue-export-targets').set(bearer(world.org.admin.token)).send({ name, ...tracker.targetFields });
  expect(target.status).toBe(201);
  const project = await insertProject(world.h, world.org.id);
  const assessment = await insertAssessment(world.h, world.org.id, project.id);
  const exports: string[] = [];
  for (let i = 0; i < count; i++) {
    const finding = await insertFinding(world.h, assessment, { title: `${name} finding ${i}` });
    const id = newId('iexj');
    await world.h.deps.prisma.findingIssueExport.create({ data: { id, organizationId: world.org.id, findingId: finding.id, targetId: target.body.id, ...fields } });
    exports.push(id);
  }
  return { target, exports };
}

it("behind its tracker's open breaker, an export held back past its retry window fails saying so; a recent one waits", async () => {
  const tracker = fakeGitHub(w.receiver, '/gh-down/api/v3', 'acme/down', 'ghp_downTrackerToken0123456789', {});
  // Two exports last touched a minute ago and just now; this world's retry window (8 attempts at 50-150 ms) is about
  // a second.
  const touched = ["now() AT TIME ZONE 'UTC' - interval '1 minute'", "now() AT TIME ZONE 'UTC' + interval '1 minute'"];
  const { target, exports } = await exportsWithoutJobs(w, tracker, 'down', touched.length);
  for (const [i, id] of exports.entries()) {
    await w.h.deps.prisma.$executeRawUnsafe(`UPDATE finding_issue_exports SET updated_at = ${touched[i]} WHERE id = $1`, id);
  }
  const ctx = createDeliveryContext(w.workerDeps);
  try {
    // Three timeouts in a row open the tracker's breaker (WEBHOOK_BREAKER_FAILURES).
    for (const token of ['t1', 't2', 't3']) {
      await ctx.isolation!.admit({ id: target.body.id, rateLimit: null }, token, new Date());
      await ctx.isolation!.release(target.body.id, token, 'timeout', 10, new Date());
    }
    const [old, recent] = [await processIssueExport(ctx, exports[0]), await processIssueExport(ctx, exports[1])];
    expect(old).toEqual({ status: 'skipped', reason: expect.stringMatching(/^held back \(breaker open\) past its retry window/) });
    expect(recent).toMatchObject({ status: 'postponed', reason: 'breaker_open', subscriptionId: target.body.id });
    const row = (id: string) => w.h.deps.prisma.findingIssueExport.findUniqueOrThrow({ where: { id } });
    expect(await row(exports[0])).toMatchObject({ status: 'failed', attemptCount: 0, lastError: expect.stringMatching(/held back \(breaker open\)/) });
    expect(await row(exports[1])).toMatchObject({ status: 'pending', attemptCount: 0 });
    // Nothing was sent to the tracker.
    expect(tracker.creates()).toHaveLength(0);
    expect(tracker.lookups()).toHaveLength(0);
  } finally {
    await closeDeliveryContext(ctx);
  }
});

describe('an export run longer than one request', () => {
  const SHORT_TIMEOUT_MS = 2_000;
  let q: World;
  beforeAll(async () => {
    q = await createWorld({
      env: { PUBLIC_BASE_URL: 'https://security.example.com', WEBHOOK_TIMEOUT_MS: String(SHORT_TIMEOUT_MS), WEBHOOK_MIN_IN_FLIGHT: '1', WEBHOOK_MAX_IN_FLIGHT: '1' },
    });
  }, 60_000);
  afterAll(() => q?.close(), 60_000);

  it('holds its slot while it reads page after page of lookups: the tracker cap (1) lets no second run in meanwhile', async () => {
    // Each lookup page takes a second: ten full pages of other issues, then a search, outlast the timeout plus the
    // margin that bounds a one-request attempt's slot (7 s).
    const tracker = fakeGitHub(q.receiver, '/gh-busy/api/v3', 'acme/busy', 'ghp_busyTrackerToken0123456789', {
      lookupAnswer: (_n, normal) => ({ ...normal, delayMs: 1_000 }),
    });
    tracker.addIssues(300);
    // Two exports whose create request went out a minute ago, its answer lost: each run first looks for that issue.
    const { target, exports } = await exportsWithoutJobs(q, tracker, 'busy', 2, { createSentAt: new Date(Date.now() - 60_000) });
    const ctx = createDeliveryContext(q.workerDeps);
    try {
      const first = processIssueExport(ctx, exports[0]);
      await sleep(SHORT_TIMEOUT_MS + 6_500);
      // Still reading the lookup pages, and still holding the tracker's one slot.
      expect(tracker.lookups().length).toBeLessThan(11);
      expect(await processIssueExport(ctx, exports[1])).toMatchObject({ status: 'postponed', reason: 'in_flight_cap', subscriptionId: target.body.id });
      expect(await first).toMatchObject({ status: 'succeeded' });
      expect(tracker.creates()).toHaveLength(1);
    } finally {
      await closeDeliveryContext(ctx);
    }
  }, 60_000);
});
