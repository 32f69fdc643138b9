// Every event type end to end (issue 4, "Done means"): each is caused by its domain action through the HTTP API
// (the engine's calls with an API key holding assessments:update and billing:manage; finding.sla_breached by the
// worker's scan function with a moved clock), delivered by the real in-process worker to a real HTTPS receiver,
// and checked there: signature (verifySignature), headers, `type`, `data.kind`, the event's own fields, and
// nothing in `data` but public identifiers (no internal ids, tokens, keys or secrets). A per-project and a
// per-assessment subscription receive exactly the events of their project / assessment.
import { EVENT_TYPES as ALL_EVENT_TYPES, isOperationalEventType, renderPayload, verifySignature } from '@svc/webhooks';

/** SPEC's twelve event types: the operational events (operational-events.test.ts) come only when a delivery fails. */
const EVENT_TYPES = ALL_EVENT_TYPES.filter((type) => !isOperationalEventType(type));
import { scanSlaBreaches } from '../src/sla-scan';
import { outboxDeps } from '@svc/outbox';
import { bearer } from '../../api/test/support/fixtures';
import { createKey } from '../../api/test/support/domain';
import type { ReceivedRequest } from './support/receiver';
import { createWorld, poll, type CreatedSubscription, type World } from './support/world';

let w: World;
let engine: string;
let subs: { all: CreatedSubscription; project: CreatedSubscription; assessment: CreatedSubscription };
// P holds assessments A1 (the one most events happen on) and A2; Q holds B1.
let P: string;
let Q: string;
let A1: string;
let A2: string;
let B1: string;
let F1: string; // high, on A1: confirmed, fix-verified, regressed
let F2: string; // critical, on A1: breaches its SLA
let otherFindings: { a2: string; b1: string };

type Envelope = { id: string; event_id: string; type: string; created_at: string; organization_id: string; data: Record<string, unknown> };

const PUBLIC_ID = /^(org|prj|asm|fnd|rpt|fxv|prr|lim|whsub)_[0-9a-z]{26}$/;
const api = () => w.api();

async function post(path: string, token: string, body: Record<string, unknown> = {}, expected = 200) {
  const res = await api().post(`/api/v1${path}`).set(bearer(token)).send(body);
  if (res.status !== expected) throw new Error(`POST ${path} answered ${res.status} (expected ${expected}): ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Secrets of this world that must never appear in a payload. */
function secrets(): string[] {
  const o = w.org;
  return [engine, subs.all.secret, subs.project.secret, subs.assessment.secret, ...[o.owner, o.admin, o.manager, o.member].flatMap((u) => [u.token, u.csrfToken])];
}

/** Public identifiers only: every *_id is a public prefixed id; no internal principal ids, no token, key or secret. */
function expectPublicData(data: Record<string, unknown>) {
  const text = JSON.stringify(data);
  for (const secret of secrets()) expect(text).not.toContain(secret);
  expect(text).not.toMatch(/sk-svc-|whsec_|\b(usr|ses|key|mem|whdel|event|use)_[0-9a-z]{26}\b/);
  const walk = (value: unknown, key: string) => {
    if (/(token|secret|password|authorization|api_key|credential)/i.test(key)) throw new Error(`data carries ${key}`);
    if (typeof value === 'string') {
      if (key.endsWith('_id')) expect(value).toMatch(PUBLIC_ID);
      if (/^[a-z]+_[0-9a-z]{26}$/.test(value)) expect(value).toMatch(PUBLIC_ID);
    } else if (value && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) walk(v, k);
    }
  };
  walk(data, '');
}

function parse(request: ReceivedRequest): Envelope {
  return JSON.parse(request.body.toString('utf8')) as Envelope;
}

/**
 * Waits for the delivery of a `type` event whose data matches, on the org-wide subscription's path; checks the
 * signature, the headers, the envelope and the public-data rule; returns the envelope.
 */
async function received(type: string, match: Record<string, unknown> = {}, path = '/all', secret = subs.all.secret): Promise<Envelope> {
  const matches = (r: ReceivedRequest) => {
    if (r.headers['x-service-event'] !== type) return false;
    const data = parse(r).data;
    return Object.entries(match).every(([k, v]) => data[k] === v);
  };
  const [request] = await poll(
    async () => w.receiver.requests(path).filter(matches),
    (found) => found.length > 0,
    20_000,
    `a ${type} delivery on ${path} matching ${JSON.stringify(match)}`,
  );
  const verified = verifySignature(request.body, String(request.headers['x-service-signature']), secret);
  expect(verified).toEqual({ ok: true, timestamp: expect.any(Number) });
  expect(request.headers['content-type']).toBe('application/json');
  expect(request.headers['x-service-format']).toBe('service');
  const envelope = parse(request);
  expect(request.headers['x-service-delivery']).toBe(envelope.id);
  expect(request.headers['x-service-timestamp']).toBe(String(verified.ok && verified.timestamp));
  expect(envelope).toEqual({
    id: expect.stringMatching(/^whdel_[0-9a-z]{26}$/),
    event_id: expect.stringMatching(/^event_[0-9a-z]{26}$/),
    type,
    created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    organization_id: w.org.id,
    data: expect.objectContaining({ kind: type }),
  });
  expectPublicData(envelope.data);
  return envelope;
}

beforeAll(async () => {
  w = await createWorld();
  engine = await createKey(w.h, w.org.owner.token, ['assessments:update', 'billing:manage']);
  const admin = w.org.admin.token;
  P = (await post('/projects', admin, { name: 'Storefront' }, 201)).id;
  Q = (await post('/projects', admin, { name: 'Back office' }, 201)).id;
  A1 = (await post(`/projects/${P}/assessments`, admin, { name: 'Storefront pentest' }, 201)).id;
  A2 = (await post(`/projects/${P}/assessments`, admin, { name: 'Storefront rescan' }, 201)).id;
  B1 = (await post(`/projects/${Q}/assessments`, admin, { name: 'Back office pentest' }, 201)).id;
  const events = EVENT_TYPES.filter((t) => t !== 'webhook.test');
  subs = {
    all: await w.subscribe({ name: 'everything', url: w.receiver.url('/all'), events: [...EVENT_TYPES] }),
    project: await w.subscribe({ name: 'project P', url: w.receiver.url('/project'), events }, { level: 'project', projectId: P }),
    assessment: await w.subscribe({ name: 'assessment A1', url: w.receiver.url('/assessment'), events }, { level: 'assessment', assessmentId: A1 }),
  };
});
afterAll(() => w?.close());

describe('every event type, from its action through the API to a signed delivery', () => {
  it('finding.created: the engine records a finding on a running assessment', async () => {
    await post(`/assessments/${A1}/launch`, w.org.admin.token);
    await post(`/assessments/${A1}/start`, engine);
    const finding = await post(
      `/assessments/${A1}/findings`,
      engine,
      { title: 'SQL injection in login', severity: 'high', fingerprint: 'sqli-login', location: 'src/login.ts:42', description: 'secret-free text' },
      201,
    );
    F1 = finding.id;
    const { data } = await received('finding.created', { finding_id: F1 });
    expect(data).toEqual({
      kind: 'finding.created',
      finding_id: F1,
      assessment_id: A1,
      project_id: P,
      title: 'SQL injection in login',
      severity: 'high',
      status: 'open',
      location: 'src/login.ts:42',
      fingerprint: 'sqli-login',
    });
  });

  it('(events of other assessments and projects, for the level checks below)', async () => {
    for (const a of [A2, B1]) {
      await post(`/assessments/${a}/launch`, w.org.admin.token);
      await post(`/assessments/${a}/start`, engine);
    }
    otherFindings = {
      a2: (await post(`/assessments/${A2}/findings`, engine, { title: 'Open redirect', severity: 'medium', fingerprint: 'redirect' }, 201)).id,
      b1: (await post(`/assessments/${B1}/findings`, engine, { title: 'Weak TLS', severity: 'low', fingerprint: 'tls' }, 201)).id,
    };
    await post(`/assessments/${B1}/complete`, engine, { summary: 'done' });
    await received('finding.created', { finding_id: otherFindings.a2 });
    await received('finding.created', { finding_id: otherFindings.b1 });
    await received('assessment.completed', { assessment_id: B1 });
  });

  it('finding.confirmed and finding.status_changed: triage confirms the finding', async () => {
    await post(`/findings/${F1}/confirm`, w.org.admin.token);
    const confirmed = await received('finding.confirmed', { finding_id: F1 });
    expect(confirmed.data).toMatchObject({ finding_id: F1, assessment_id: A1, project_id: P, status: 'confirmed', severity: 'high', title: 'SQL injection in login' });
    const changed = await received('finding.status_changed', { finding_id: F1, status: 'confirmed' });
    expect(changed.data).toMatchObject({ finding_id: F1, assessment_id: A1, project_id: P, status: 'confirmed', previous_status: 'open' });
  });

  it('assessment.completed: the engine completes the assessment', async () => {
    F2 = (await post(`/assessments/${A1}/findings`, engine, { title: 'Hard-coded admin password', severity: 'critical', fingerprint: 'hardcoded' }, 201)).id;
    await post(`/assessments/${A1}/complete`, engine, { summary: { text: 'Two findings' } });
    const { data } = await received('assessment.completed', { assessment_id: A1 });
    expect(data).toEqual({
      kind: 'assessment.completed',
      assessment_id: A1,
      project_id: P,
      name: 'Storefront pentest',
      status: 'completed',
      findings_count: 2,
      findings_by_severity: { critical: 1, high: 1, medium: 0, low: 0, info: 0 },
      started_at: expect.any(String),
      completed_at: expect.any(String),
    });
  });

  it('finding.sla_breached: the scheduled scan, with the clock moved past the finding’s SLA', async () => {
    // The scan covers the whole (shared) test database: this finding is moved to 1985 and the scan runs in 1985,
    // a time no other test uses, so it breaches this finding only (critical: 7 days).
    await w.h.deps.prisma.finding.update({ where: { id: F2 }, data: { openedAt: new Date('1985-01-01T00:00:00.000Z') } });
    const deps = outboxDeps(w.h.deps, w.h.deps.deliveryQueue);
    expect(await scanSlaBreaches(deps, new Date('1985-01-08T00:00:00.000Z'))).toBe(0);
    expect(await scanSlaBreaches(deps, new Date('1985-01-09T00:00:00.000Z'))).toBe(1);
    const { data } = await received('finding.sla_breached', { finding_id: F2 });
    expect(data).toEqual({
      kind: 'finding.sla_breached',
      finding_id: F2,
      assessment_id: A1,
      project_id: P,
      title: 'Hard-coded admin password',
      severity: 'critical',
      status: 'open',
      location: null,
      fingerprint: 'hardcoded',
      sla_days: 7,
      due_at: '1985-01-08T00:00:00.000Z',
    });
  });

  it('report.ready: a report is generated and the worker renders it', async () => {
    const report = await post(`/assessments/${A1}/reports`, w.org.admin.token, { title: 'Storefront report' }, 202);
    expect(report.status).toBe('pending');
    const { data } = await received('report.ready', { report_id: report.id });
    const stored = await api().get(`/api/v1/reports/${report.id}`).set(bearer(w.org.admin.token));
    expect(stored.body.status).toBe('ready');
    expect(data).toEqual({
      kind: 'report.ready',
      report_id: report.id,
      assessment_id: A1,
      project_id: P,
      title: 'Storefront report',
      size_bytes: stored.body.size_bytes,
      ready_at: stored.body.ready_at,
    });
  });

  it('fix_verify.completed: the engine verifies the fix; a fixed result moves the finding to fixed', async () => {
    const run = await post(`/findings/${F1}/fix-verifications`, engine, {}, 201);
    await post(`/fix-verifications/${run.id}/complete`, engine, { result: 'fixed' });
    const { data } = await received('fix_verify.completed', { fix_verification_id: run.id });
    expect(data).toEqual({
      kind: 'fix_verify.completed',
      fix_verification_id: run.id,
      finding_id: F1,
      assessment_id: A1,
      project_id: P,
      result: 'fixed',
      finding_status: 'fixed',
    });
    const changed = await received('finding.status_changed', { finding_id: F1, status: 'fixed' });
    expect(changed.data.previous_status).toBe('confirmed');
  });

  it('monitoring.regression: a monitoring check finds the fixed finding again', async () => {
    await post(`/findings/${F1}/monitoring-checks`, engine, { result: 'regressed' });
    const { data } = await received('monitoring.regression', { finding_id: F1 });
    expect(data).toEqual({
      kind: 'monitoring.regression',
      finding_id: F1,
      assessment_id: A1,
      project_id: P,
      title: 'SQL injection in login',
      severity: 'high',
      location: 'src/login.ts:42',
      previous_fixed_at: expect.any(String),
    });
    const changed = await received('finding.status_changed', { finding_id: F1, status: 'regressed' });
    expect(changed.data.previous_status).toBe('fixed');
  });

  it('pr_review.completed: the engine posts a PR security review', async () => {
    const review = await post(
      `/projects/${P}/pr-reviews`,
      engine,
      { repository: 'acme/storefront', pr_number: 1234, verdict: 'changes_requested', findings_count: 2, url: 'https://git.example.com/acme/storefront/pull/1234' },
      201,
    );
    const { data } = await received('pr_review.completed', { pr_review_id: review.id });
    expect(data).toEqual({
      kind: 'pr_review.completed',
      pr_review_id: review.id,
      project_id: P,
      repository: 'acme/storefront',
      pr_number: 1234,
      verdict: 'changes_requested',
      findings_count: 2,
      url: 'https://git.example.com/acme/storefront/pull/1234',
    });
  });

  it('spend.threshold_crossed: usage recorded by the engine crosses a project threshold', async () => {
    const limit = await post('/billing/limits', w.org.admin.token, { project_id: P, kind: 'threshold', credits: '10' }, 201);
    await post('/usage', engine, { project_id: P, credits: '6.25' }, 201);
    await post('/usage', engine, { project_id: P, credits: '4.00', description: 'rescan' }, 201);
    const { data } = await received('spend.threshold_crossed', { limit_id: limit.id });
    expect(data).toEqual({
      kind: 'spend.threshold_crossed',
      limit_id: limit.id,
      scope: 'project',
      project_id: P,
      threshold_credits: '10.00',
      spent_credits: '10.25',
    });
  });

  it('spend.cap_reached: usage reaches a cap; launching in that project is then refused with 400', async () => {
    const cap = await post('/billing/limits', w.org.admin.token, { project_id: Q, kind: 'cap', credits: '5' }, 201);
    await post('/usage', engine, { project_id: Q, credits: '7.25' }, 201);
    const { data } = await received('spend.cap_reached', { limit_id: cap.id });
    expect(data).toEqual({ kind: 'spend.cap_reached', limit_id: cap.id, scope: 'project', project_id: Q, cap_credits: '5.00', spent_credits: '7.25' });
    const draft = await post(`/projects/${Q}/assessments`, w.org.admin.token, { name: 'Blocked' }, 201);
    const refused = await api().post(`/api/v1/assessments/${draft.id}/launch`).set(bearer(w.org.admin.token)).send();
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/^Spend cap reached/);
  });

  it('webhook.test: the test route', async () => {
    const sent = await post(`/webhooks/subscriptions/${subs.all.id}/test`, w.org.admin.token, {}, 202);
    const envelope = await received('webhook.test', { subscription_id: subs.all.id });
    expect(envelope.event_id).toBe(sent.event_id);
    expect(envelope.id).toBe(sent.delivery_id);
    expect(envelope.data).toEqual({ kind: 'webhook.test', subscription_id: subs.all.id, message: 'This is a test delivery.' });
  });

  it('the org-wide subscription received all 12 event types, each delivery once', async () => {
    const types = new Set(w.receiver.requests('/all').map((r) => r.headers['x-service-event']));
    expect([...types].sort()).toEqual([...EVENT_TYPES].sort());
    const ids = w.receiver.requests('/all').map((r) => parse(r).id);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('subscription levels', () => {
  async function settled(subscriptionId: string) {
    return poll(
      () => w.h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId } }),
      (rows) => rows.every((d) => d.status === 'succeeded'),
      20_000,
      `the deliveries to ${subscriptionId} to succeed`,
    );
  }

  it('a per-project subscription receives the events of its project only', async () => {
    const deliveries = await settled(subs.project.id);
    const requests = w.receiver.requests('/project');
    expect(requests).toHaveLength(deliveries.length);
    const envelopes = requests.map((r) => {
      expect(verifySignature(r.body, String(r.headers['x-service-signature']), subs.project.secret).ok).toBe(true);
      return parse(r);
    });
    for (const e of envelopes) expect(e.data.project_id).toBe(P);
    const types = new Set(envelopes.map((e) => e.type));
    expect([...types].sort()).toEqual(
      [
        'assessment.completed', 'finding.confirmed', 'finding.created', 'finding.sla_breached', 'finding.status_changed',
        'fix_verify.completed', 'monitoring.regression', 'pr_review.completed', 'report.ready', 'spend.threshold_crossed',
      ].sort(),
    );
    const findingIds = envelopes.filter((e) => e.type === 'finding.created').map((e) => e.data.finding_id);
    expect(findingIds.sort()).toEqual([F1, F2, otherFindings.a2].sort()); // A2 is in P too; B1 (in Q) is not
    expect(envelopes.some((e) => e.data.assessment_id === B1 || e.data.project_id === Q)).toBe(false);
  });

  it('a per-assessment subscription receives the events of its assessment only', async () => {
    const deliveries = await settled(subs.assessment.id);
    const requests = w.receiver.requests('/assessment');
    expect(requests).toHaveLength(deliveries.length);
    const envelopes = requests.map((r) => {
      expect(verifySignature(r.body, String(r.headers['x-service-signature']), subs.assessment.secret).ok).toBe(true);
      return parse(r);
    });
    for (const e of envelopes) expect(e.data.assessment_id).toBe(A1);
    const types = new Set(envelopes.map((e) => e.type));
    expect([...types].sort()).toEqual(
      [
        'assessment.completed', 'finding.confirmed', 'finding.created', 'finding.sla_breached', 'finding.status_changed',
        'fix_verify.completed', 'monitoring.regression', 'report.ready',
      ].sort(),
    );
    expect(envelopes.filter((e) => e.type === 'finding.created').map((e) => e.data.finding_id).sort()).toEqual([F1, F2].sort());
  });
});

describe('sentinel-schema route against the events the actions above really produced', () => {
  it('lists, per event type, exactly the columns of the Sentinel record of each real delivery, with their types', async () => {
    const admin = w.org.admin.token;
    const url = `${w.receiver.url(`/dataCollectionRules/dcr-${'c'.repeat(32)}/streams/Custom-Schema`)}?api-version=2023-01-01`;
    const sentinel = await w.subscribe({ name: 'schema', url, events: ['webhook.test'], payload_format: 'microsoft_sentinel' });
    const envelopes = w.receiver.requests('/all').map(parse);
    for (const type of EVENT_TYPES) {
      const patched = await api().patch(`/api/v1/webhooks/subscriptions/${sentinel.id}`).set(bearer(admin)).send({ events: [type] });
      expect(patched.status).toBe(200);
      const schema = await api().get(`/api/v1/webhooks/subscriptions/${sentinel.id}/sentinel-schema`).set(bearer(admin));
      expect(schema.status).toBe(200);
      const columns = schema.body.columns as Array<{ name: string; type: string }>;
      const ofType = envelopes.filter((e) => e.type === type);
      expect(ofType.length).toBeGreaterThan(0);
      for (const envelope of ofType) {
        const [record] = JSON.parse(renderPayload('microsoft_sentinel', envelope as never).body.toString('utf8')) as Array<Record<string, unknown>>;
        expect({ type, columns: columns.map((c) => c.name).sort() }).toEqual({ type, columns: Object.keys(record).sort() });
        for (const column of columns) {
          const value = record[column.name];
          if (value === null || column.name === 'TimeGenerated') continue;
          // A real column takes whole numbers too (credits of 500 arrive as 500).
          const expected = typeof value === 'number' ? (Number.isInteger(value) && column.type !== 'real' ? 'long' : 'real') : typeof value;
          expect({ column: column.name, type: column.type }).toEqual({ column: column.name, type: expected });
        }
      }
    }
  });
});
