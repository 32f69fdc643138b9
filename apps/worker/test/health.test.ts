// Pure rules of subscription health and of the retry schedule handed to BullMQ.
import { loadConfig } from '@svc/config';
import { healthAfterSuccess, healthAfterTerminalFailure, healthAfterUnsafeUrl, type SubscriptionHealth } from '@svc/domain';
import { RetryableDeliveryError, deliveryBackoffStrategy } from '../src/retry';
import { outcomeOfError, outcomeOfHttp, recordedHeaders } from '../src/http/outcome';
import { dashboardLink } from '../src/health-notify';

const HOUR = 3600 * 1000;
const t0 = new Date('2026-11-01T00:00:00Z');
const at = (hours: number) => new Date(t0.getTime() + hours * HOUR);
const fresh: SubscriptionHealth = { status: 'active', consecutiveFailures: 0, firstFailureAt: null, disabledReason: null };

function failTimes(start: SubscriptionHealth, times: Date[]): SubscriptionHealth {
  return times.reduce((h, now) => healthAfterTerminalFailure(h, now), start);
}

describe('subscription health', () => {
  it('counts terminal failures from the first one and turns failing at the third', () => {
    const two = failTimes(fresh, [at(0), at(1)]);
    expect(two).toMatchObject({ status: 'active', consecutiveFailures: 2, firstFailureAt: at(0) });
    expect(healthAfterTerminalFailure(two, at(2))).toMatchObject({ status: 'failing', consecutiveFailures: 3, firstFailureAt: at(0) });
  });

  it('disables after 10 failures only when they span 24 hours', () => {
    const tenInADay = failTimes(fresh, Array.from({ length: 10 }, (_, i) => at(i * 2)));
    expect(tenInADay).toMatchObject({ status: 'failing', consecutiveFailures: 10 });
    const tenOverADay = failTimes(fresh, [...Array.from({ length: 9 }, (_, i) => at(i)), at(24)]);
    expect(tenOverADay.status).toBe('disabled');
    expect(tenOverADay.disabledReason).toMatch(/10 consecutive failed deliveries over 24 hours/);
    const nineOverADay = failTimes(fresh, [at(0), ...Array.from({ length: 8 }, (_, i) => at(30 + i))]);
    expect(nineOverADay.status).toBe('failing');
  });

  it('resets on success and brings failing back to active, but never re-enables a disabled subscription', () => {
    const failing = failTimes(fresh, [at(0), at(1), at(2)]);
    expect(healthAfterSuccess(failing)).toEqual({ ...fresh });
    const disabled: SubscriptionHealth = { status: 'disabled', consecutiveFailures: 4, firstFailureAt: at(0), disabledReason: 'disabled by a user' };
    expect(healthAfterSuccess(disabled)).toMatchObject({ status: 'disabled', consecutiveFailures: 0, disabledReason: 'disabled by a user' });
    expect(healthAfterTerminalFailure(disabled, at(30)).status).toBe('disabled');
  });

  it('disables at once for an unsafe URL, whatever the state', () => {
    expect(healthAfterUnsafeUrl(fresh, 'the host is not a public address (private)')).toMatchObject({
      status: 'disabled',
      disabledReason: 'URL became unsafe: the host is not a public address (private)',
    });
  });
});

describe('backoff handed to BullMQ', () => {
  const config = loadConfig({ ...process.env, WEBHOOK_BACKOFF_BASE_MS: '30000' });
  const strategy = deliveryBackoffStrategy(config);

  it('is the delay the processor computed and stored', () => {
    expect(strategy(3, 'webhook', new RetryableDeliveryError('x', 1234))).toBe(1234);
  });

  it('falls back to the schedule for unexpected errors', () => {
    const delay = strategy(2, 'webhook', new Error('database unreachable'));
    expect(delay).toBeGreaterThanOrEqual(120_000 * 0.8);
    expect(delay).toBeLessThanOrEqual(120_000 * 1.2);
  });
});

describe('attempt outcomes', () => {
  const result = (status: number | null, error: (Error & { code?: string }) | null = null) => ({
    response: status === null ? null : { status, headers: {} },
    body: Buffer.alloc(0),
    error,
    durationMs: 1,
  });

  it('classifies responses: 2xx success, 3xx redirect, others http_error', () => {
    expect([200, 204, 299, 301, 304, 400, 429, 500].map((s) => outcomeOfHttp(result(s)))).toEqual([
      'success', 'success', 'success', 'redirect', 'redirect', 'http_error', 'http_error', 'http_error',
    ]);
  });

  it('classifies errors: timeout, TLS, network', () => {
    expect(outcomeOfError(Object.assign(new Error('Timeout awaiting'), { name: 'TimeoutError', code: 'ETIMEDOUT' }))).toBe('timeout');
    expect(outcomeOfError(Object.assign(new Error('self-signed'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }))).toBe('tls_error');
    expect(outcomeOfError(Object.assign(new Error('altname'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }))).toBe('tls_error');
    expect(outcomeOfError(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))).toBe('network_error');
    expect(outcomeOfHttp(result(null, Object.assign(new Error('reset'), { code: 'ECONNRESET' })))).toBe('network_error');
  });

  it('keeps a few response headers only', () => {
    expect(recordedHeaders({ 'content-type': 'text/html', 'set-cookie': ['a=b'], server: 'nginx', 'retry-after': '30' })).toEqual({
      'content-type': 'text/html',
      server: 'nginx',
      'retry-after': '30',
    });
  });
});

describe('configurable thresholds', () => {
  it('follows the operator\'s rules instead of the defaults', () => {
    const rules = { failingAfterFailures: 1, disableAfterFailures: 2, disableMinSpanMs: 0 };
    const start = { status: 'active' as const, consecutiveFailures: 0, firstFailureAt: null, disabledReason: null };
    const once = healthAfterTerminalFailure(start, new Date(0), rules);
    expect(once.status).toBe('failing');
    expect(healthAfterTerminalFailure(once, new Date(1), rules).status).toBe('disabled');
    expect(healthAfterTerminalFailure(start, new Date(0)).status).toBe('active');
  });
});

describe('dashboard link of a health e-mail', () => {
  const sub = { id: 'whsub_1', level: 'organization', projectId: null, assessmentId: null };
  it('points at the subscription page of its level', () => {
    expect(dashboardLink('https://svc.example', sub)).toBe('https://svc.example/webhooks/whsub_1');
    expect(dashboardLink('https://svc.example/sub', { ...sub, level: 'project', projectId: 'prj_2' })).toBe('https://svc.example/sub/projects/prj_2/webhooks/whsub_1');
    expect(dashboardLink('https://svc.example', { ...sub, level: 'assessment', assessmentId: 'asm_3' })).toBe('https://svc.example/assessments/asm_3/webhooks/whsub_1');
  });
});
