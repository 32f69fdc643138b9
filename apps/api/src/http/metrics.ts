// The API's Prometheus metrics (DESIGN.md: prefix `svc_`, no tenant ids as labels). One registry per app, so tests
// that build several apps in one process do not collide. Served on GET /metrics, closable by configuration.
import { timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler, Router } from 'express';
import express from 'express';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Config } from '@svc/config';

export interface ApiMetrics {
  registry: Registry;
  requestDuration: Histogram<'method' | 'route' | 'status_class'>;
  rateLimited: Counter<'route'>;
  authFailures: Counter<'kind'>;
  writeTurnsLeft: Counter<'reason'>;
  /** Reads the write turns' load at each scrape (organization-turns.ts loadAll), once the app has them. */
  watchWriteTurns(load: () => { running: number; waiting: number }): void;
}

export function createApiMetrics(): ApiMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_api_' });
  let writeTurnsLoad: () => { running: number; waiting: number } = () => ({ running: 0, waiting: 0 });
  new Gauge({
    name: 'svc_write_turns',
    help: "This instance's write requests in a turn (running) and waiting for one (waiting), all organizations together",
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const { running, waiting } = writeTurnsLoad();
      this.set({ state: 'running' }, running);
      this.set({ state: 'waiting' }, waiting);
    },
  });
  return {
    registry,
    requestDuration: new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'API request duration by method, route template and status class',
      labelNames: ['method', 'route', 'status_class'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    rateLimited: new Counter({
      name: 'svc_http_rate_limited_total',
      help: 'Requests rejected with 429 by a rate limit, by route template',
      labelNames: ['route'],
      registers: [registry],
    }),
    authFailures: new Counter({
      name: 'svc_auth_failures_total',
      help: 'Requests answered 401, by the kind of credential presented (none, api_key, bearer_token, session_cookie)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    writeTurnsLeft: new Counter({
      name: 'svc_write_turns_left_total',
      help: 'Write requests that left the line for their turn without running, by reason (timeout: 503 after WRITE_TURN_TIMEOUT_MS; client_gone)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    watchWriteTurns(load) {
      writeTurnsLoad = load;
    },
  };
}

/**
 * The matched route's template as declared under /api/v1 (`/webhooks/deliveries/:id`), never the raw path: ids stay
 * out of labels. (req.baseUrl is already unwound when the response finishes, so the mount prefix is not included.)
 */
function routeTemplate(req: Request): string {
  const path = (req.route as { path?: unknown } | undefined)?.path;
  return typeof path === 'string' ? path : 'unmatched';
}

function credentialKind(req: Request): string {
  const auth = req.headers.authorization;
  if (auth) return /^Bearer\s+sk-/i.test(auth) ? 'api_key' : 'bearer_token';
  return req.headers.cookie ? 'session_cookie' : 'none';
}

export function observeRequests(metrics: ApiMetrics): RequestHandler {
  return (req, res, next) => {
    const end = metrics.requestDuration.startTimer();
    res.on('finish', () => {
      const route = routeTemplate(req);
      end({ method: req.method, route, status_class: `${Math.floor(res.statusCode / 100)}xx` });
      if (res.statusCode === 429) metrics.rateLimited.inc({ route });
      if (res.statusCode === 401) metrics.authFailures.inc({ kind: credentialKind(req) });
    });
    next();
  };
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** GET /metrics; with METRICS_TOKEN set, only for `Authorization: Bearer <token>`. */
export function metricsRouter(metrics: ApiMetrics, config: Config['metrics']): Router {
  const router = express.Router();
  router.get('/metrics', (req, res, next) => {
    if (config.token) {
      const given = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
      if (!sameSecret(given, config.token)) {
        res.status(401).set('WWW-Authenticate', 'Bearer').json({ detail: 'A valid metrics token is required.' });
        return;
      }
    }
    metrics.registry
      .metrics()
      .then((text) => res.type(metrics.registry.contentType).send(text))
      .catch(next);
  });
  return router;
}
