// Issue exports share the delivery workers' slots, and a tracker is isolated as a webhook endpoint is (DESIGN:
// trackers get the same isolation): its own in-flight cap and breaker, keyed by the export target. A tracker that
// never answers holds its cap (WEBHOOK_MIN_IN_FLIGHT, 4) of the worker's slots, not all of them: the exports over
// the cap wait without a slot, and a webhook goes out meanwhile instead of waiting for the tracker's timeouts.
import { bearer, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { insertFinding } from '../../api/test/support/domain';
import { fakeGitHub } from './support/trackers';
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
