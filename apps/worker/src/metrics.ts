// The worker's Prometheus metrics (DESIGN.md: prefix `svc_`, no organization, subscription or user id as a label).
// Counters live in one process-wide registry; the gauges read the queue and PostgreSQL when scraped.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Queue } from 'bullmq';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Db } from '@svc/db';
import type { Logger } from '@svc/config';

const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'svc_worker_' });

export const attemptsTotal = new Counter({
  name: 'svc_webhook_attempts_total',
  help: 'Delivery attempts by outcome and response status class (2xx..5xx, none)',
  labelNames: ['outcome', 'status_class'] as const,
  registers: [registry],
});

export const attemptDuration = new Histogram({
  name: 'svc_webhook_attempt_duration_seconds',
  help: 'Duration of one delivery attempt (request and response)',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

export const firstAttemptLatency = new Histogram({
  name: 'svc_webhook_first_attempt_latency_seconds',
  help: 'Time from the delivery being created (event published) to the start of its first attempt',
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers: [registry],
});

export const deliveriesEnded = new Counter({
  name: 'svc_webhook_deliveries_ended_total',
  help: 'Deliveries that reached a final state, by result (succeeded, failed, skipped) and reason (last outcome)',
  labelNames: ['result', 'reason'] as const,
  registers: [registry],
});

export const relayRequeued = new Counter({
  name: 'svc_outbox_relay_requeued_total',
  help: 'Overdue pending deliveries the outbox relay put back on the queue',
  registers: [registry],
});

export const deliveriesPostponed = new Counter({
  name: 'svc_webhook_postponed_total',
  help: 'Deliveries held back without an attempt by the isolation, by reason (breaker_open, in_flight_cap, rate_limit)',
  labelNames: ['reason'] as const,
  registers: [registry],
});

export const breakerTransitions = new Counter({
  name: 'svc_webhook_breaker_transitions_total',
  help: 'Circuit breaker transitions of subscriptions, by the state entered (open, half_open, closed)',
  labelNames: ['to'] as const,
  registers: [registry],
});

export function statusClass(status: number | null): string {
  return status === null ? 'none' : `${Math.floor(status / 100)}xx`;
}

/** Gauges read at scrape time from the queue and PostgreSQL: cheap aggregate queries, no per-tenant labels. */
function registerScrapeGauges(prisma: Db, queue: Queue): void {
  // A process serves one metrics server; re-registering (tests) replaces the previous gauges.
  for (const name of ['svc_webhook_queue_jobs', 'svc_webhook_outbox_lag_seconds', 'svc_webhook_subscriptions', 'svc_webhook_breakers']) registry.removeSingleMetric(name);
  new Gauge({
    name: 'svc_webhook_queue_jobs',
    help: 'Delivery queue jobs by state',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const counts = await queue.getJobCounts('waiting', 'delayed', 'active', 'failed', 'prioritized');
      for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'svc_webhook_outbox_lag_seconds',
    help: 'Age of the oldest pending delivery whose next attempt is due (0 when none is due)',
    registers: [registry],
    async collect() {
      const [row] = await prisma.$queryRaw<Array<{ lag: number | null }>>`
        SELECT EXTRACT(EPOCH FROM (now() - MIN(COALESCE(next_attempt_at, created_at))))::float8 AS lag
        FROM webhook_deliveries WHERE status = 'pending' AND COALESCE(next_attempt_at, created_at) <= now()`;
      this.set(Math.max(0, row?.lag ?? 0));
    },
  });
  new Gauge({
    name: 'svc_webhook_breakers',
    help: 'Live subscriptions by circuit-breaker state (closed, open, half_open)',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const groups = await prisma.webhookSubscription.groupBy({ by: ['breakerState'], where: { deletedAt: null }, _count: { _all: true } });
      for (const state of ['closed', 'open', 'half_open']) {
        this.set({ state }, groups.find((g) => g.breakerState === state)?._count._all ?? 0);
      }
    },
  });
  new Gauge({
    name: 'svc_webhook_subscriptions',
    help: 'Live (not deleted) webhook subscriptions by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const groups = await prisma.webhookSubscription.groupBy({ by: ['status'], where: { deletedAt: null }, _count: { _all: true } });
      for (const status of ['active', 'failing', 'disabled']) {
        this.set({ status }, groups.find((g) => g.status === status)?._count._all ?? 0);
      }
    },
  });
}

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** Serves GET /metrics on its own port (METRICS_PORT): for the cluster's scraper, not for the public. */
/** Another process (a second worker on the host, say) already listens on METRICS_PORT. */
export class MetricsPortInUseError extends Error {
  override name = 'MetricsPortInUseError';
  constructor(host: string, port: number) {
    super(
      `METRICS_PORT=${port} is already in use on ${host} (another worker on this host?): give each worker its own METRICS_PORT, ` +
        'or set METRICS_PORT=0 for a worker that serves no metrics',
    );
  }
}

export async function startMetricsServer(deps: { prisma: Db; logger: Logger }, queue: Queue, port: number, host = '0.0.0.0'): Promise<MetricsServer> {
  registerScrapeGauges(deps.prisma, queue);
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Not found.' }));
      return;
    }
    registry
      .metrics()
      .then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text))
      .catch((err: unknown) => {
        deps.logger.error('Metrics scrape failed', { error: err instanceof Error ? err.message : String(err) });
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: 'Metrics unavailable.' }));
      });
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve)).catch((err: NodeJS.ErrnoException) => {
    throw err.code === 'EADDRINUSE' ? new MetricsPortInUseError(host, port) : err;
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
