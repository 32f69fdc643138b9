// Both metrics endpoints, scraped for real and parsed with an independent Prometheus text-format parser: the
// counters move after a real delivery, a failure, a rate-limited request and a failed authentication; no tenant
// id appears in any label; the API endpoint closes behind METRICS_TOKEN.
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import request from 'supertest';
import { bearer } from '../../api/test/support/fixtures';
import { startMetricsServer, type MetricsServer } from '../src/metrics';
import { createWorld, type World } from './support/world';

const TOKEN = 'metrics-token-0123456789';
let w: World;
let server: MetricsServer;
beforeAll(async () => {
  w = await createWorld({ env: { METRICS_TOKEN: TOKEN, RATE_LIMIT_PER_MINUTE: '25' } });
  server = await startMetricsServer(w.h.deps, w.worker!.deliveryQueue, 0, '127.0.0.1');
});
afterAll(async () => {
  await server?.close();
  await w?.close();
});

type Families = ReturnType<typeof parsePrometheusTextFormat>;

async function scrapeWorker(): Promise<Families> {
  const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
  expect(res.status).toBe(200);
  return parsePrometheusTextFormat(await res.text());
}

let lastApiText = '';
async function scrapeApi(): Promise<Families> {
  const res = await w.api().get('/metrics').set(bearer(TOKEN));
  expect(res.status).toBe(200);
  lastApiText = res.text;
  return parsePrometheusTextFormat(res.text);
}

/** The parser keeps no labels on histograms, so a labelled histogram's count is read from its `_count` line. */
function histogramCount(text: string, name: string, labels: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}_count{${labels}}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

function value(families: Families, name: string, labels: Record<string, string> = {}): number {
  const family = families.find((f) => f.name === name);
  if (!family) return 0;
  const matching = family.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return matching.reduce((sum, m) => sum + Number(m.value ?? m.count ?? 0), 0);
}

function labelValues(families: Families): string[] {
  return families.flatMap((f) => f.metrics.flatMap((m) => Object.values(m.labels ?? {})));
}

const reply = (code: number) => ({ status: code, headers: { 'content-type': 'text/plain' }, body: 'x' });

describe('worker metrics', () => {
  it('counts a successful and a failed delivery, their attempts and latency, and reports queue, lag and subscriptions', async () => {
    const before = await scrapeWorker();
    w.receiver.script('/ok', () => reply(200));
    w.receiver.script('/broken', () => reply(500));
    const ok = await w.subscribe({ name: 'ok', url: w.receiver.url('/ok'), events: ['report.ready'] });
    const broken = await w.subscribe({ name: 'broken', url: w.receiver.url('/broken'), events: ['report.ready'] });
    expect((await w.publishTo(ok.id, { type: 'report.ready', data: { report_id: 'rep_1' } })).status).toBe('succeeded');
    expect((await w.publishTo(broken.id, { type: 'report.ready', data: { report_id: 'rep_2' } })).status).toBe('failed');
    // Each event reached both subscriptions: wait until all four deliveries ended (rep_1's retries to /broken run
    // on their own backoff and may end after rep_2's on a busy machine).
    for (let i = 0; i < 200; i++) {
      const all = [...(await w.deliveriesOf(ok.id)), ...(await w.deliveriesOf(broken.id))];
      if (all.length === 4 && all.every((d) => d.status !== 'pending')) break;
      await new Promise((r) => setTimeout(r, 50));
    }

    // The worker counts a delivery as ended just after recording it: scrape until both failures are counted.
    let after = await scrapeWorker();
    const ended = (scrape: typeof after) => value(scrape, 'svc_webhook_deliveries_ended_total', { result: 'failed', reason: 'http_error' }) - value(before, 'svc_webhook_deliveries_ended_total', { result: 'failed', reason: 'http_error' });
    for (let i = 0; i < 100 && ended(after) < 2; i++) {
      await new Promise((r) => setTimeout(r, 50));
      after = await scrapeWorker();
    }
    const delta = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
    expect(delta('svc_webhook_attempts_total', { outcome: 'success', status_class: '2xx' })).toBe(2);
    expect(delta('svc_webhook_attempts_total', { outcome: 'http_error', status_class: '5xx' })).toBe(16);
    expect(delta('svc_webhook_deliveries_ended_total', { result: 'succeeded' })).toBe(2);
    expect(delta('svc_webhook_deliveries_ended_total', { result: 'failed', reason: 'http_error' })).toBe(2);
    expect(delta('svc_webhook_attempt_duration_seconds')).toBe(18);
    expect(delta('svc_webhook_first_attempt_latency_seconds')).toBe(4); // both subscriptions receive both events
    expect(value(after, 'svc_webhook_subscriptions', { status: 'active' })).toBeGreaterThanOrEqual(2);
    expect(after.find((f) => f.name === 'svc_webhook_queue_jobs')?.metrics.map((m) => m.labels?.state).sort()).toEqual(
      expect.arrayContaining(['active', 'delayed', 'failed', 'waiting']),
    );
    expect(value(after, 'svc_webhook_outbox_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(after.some((f) => f.name === 'svc_worker_process_cpu_user_seconds_total')).toBe(true);
    const labels = labelValues(after);
    for (const id of [w.org.id, ok.id, broken.id]) expect(labels).not.toContain(id);
  }, 60_000);
});

describe('API metrics', () => {
  it('refuses a scrape without the metrics token', async () => {
    expect((await w.api().get('/metrics')).status).toBe(401);
    expect((await w.api().get('/metrics').set(bearer('wrong-token-0123456789'))).status).toBe(401);
  });

  it('counts requests by route template, rate-limited requests and authentication failures', async () => {
    const before = await scrapeApi();
    const beforeText = lastApiText;
    expect((await w.api().get('/api/v1/webhooks/events').set(bearer('sk-svc-not-a-real-key'))).status).toBe(401);
    expect((await w.api().get('/api/v1/webhooks/events')).status).toBe(401);
    let limited = 0;
    for (let i = 0; i < 30 && limited === 0; i++) {
      const res = await w.api().get('/api/v1/webhooks/events').set(bearer(w.org.member.token));
      if (res.status === 429) limited++;
    }
    expect(limited).toBe(1);
    expect((await w.api().get('/api/v1/webhooks/events').set(bearer(w.org.admin.token))).status).toBe(200);

    const after = await scrapeApi();
    const delta = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
    expect(delta('svc_http_rate_limited_total')).toBe(1);
    expect(delta('svc_auth_failures_total', { kind: 'api_key' })).toBe(1);
    expect(delta('svc_auth_failures_total', { kind: 'none' })).toBe(1);
    const count = (text: string, statusClass: string) =>
      histogramCount(text, 'svc_http_request_duration_seconds', `method="GET",route="/webhooks/events",status_class="${statusClass}"`);
    expect(count(lastApiText, '2xx') - count(beforeText, '2xx')).toBe(1);
    expect(count(lastApiText, '4xx') - count(beforeText, '4xx')).toBeGreaterThanOrEqual(3);
    expect(after.find((f) => f.name === 'svc_http_request_duration_seconds')?.type).toBe('HISTOGRAM');
    expect(labelValues(after)).not.toContain(w.org.id);
  });
});

describe('API metrics without a token', () => {
  it('is closed entirely with METRICS_ENABLED=false', async () => {
    const { createHarness } = await import('../../api/test/support/harness.js');
    const h = await createHarness({ METRICS_ENABLED: 'false' });
    try {
      expect((await request(h.app).get('/metrics')).status).toBe(404);
    } finally {
      await h.close();
    }
  });
});
