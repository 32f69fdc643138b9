// Builds the Express application without listening: main.ts serves it, supertest drives it in tests.
import cookieParser from 'cookie-parser';
import express, { type Express } from 'express';
import helmet from 'helmet';
import type { AppDeps } from './app-deps';
import { ApiKeyCache } from './auth/authenticate';
import { dashboardRouter } from './http/dashboard';
import { errorHandler, unknownRoute } from './http/errors';
import { createRateLimiters, type RateLimiters } from './http/rate-limit';
import { accessLog, requestId } from './http/request-id';
import { createApiMetrics, metricsRouter, observeRequests } from './http/metrics';
import { routerFor, type RouteSpec } from './http/route';
import { HeldIdempotencyKeys } from './modules/idempotency/held-keys';
import { apiRoutes } from './routes';
import { healthRouter } from './modules/health/health.routes';
import { openApiRoute } from './openapi/openapi.routes';
import { SHARED_REPORTS_PREFIX } from './modules/report-shares/report-shares.routes';
import { sharedResponseHeaders } from './modules/report-shares/shared-report.service';
import { turnsFor } from './http/organization-turns';

export interface App extends Express {
  locals: Express['locals'] & { routes: RouteSpec[]; limiters: RateLimiters; heldKeys: HeldIdempotencyKeys };
}

export function createApp(deps: AppDeps): App {
  const app = express() as App;
  app.disable('x-powered-by');
  app.set('trust proxy', deps.config.trustProxy);
  app.set('etag', false);

  const limiters = createRateLimiters(deps.redis, deps.config.redisPrefix, {
    perMinute: deps.config.rateLimitPerMinute,
    loginPerMinute: deps.config.loginRateLimitPerMinute,
    totpMaxFailures: deps.config.totpMaxFailures,
    partialTokenTtlSeconds: deps.config.partialTokenTtlSeconds,
    passwordReset: deps.config.passwordReset,
  });
  const routes: RouteSpec[] = [...apiRoutes(deps, limiters), openApiRoute(() => routes, deps.config.publicBaseUrl)];
  app.locals.routes = routes;
  app.locals.limiters = limiters;

  const metrics = createApiMetrics();
  app.use(requestId);
  app.use(accessLog(deps.logger));
  app.use(observeRequests(metrics));
  if (deps.config.metrics.enabled) app.use(metricsRouter(metrics, deps.config.metrics));
  app.use(helmet());
  // The public report share routes and the dashboard page they back (signed out), errors and 429s included.
  app.use([`/api/v1${SHARED_REPORTS_PREFIX}`, SHARED_REPORTS_PREFIX], sharedResponseHeaders);
  app.use(express.json({ limit: '1mb', strict: true }));
  app.use(cookieParser());
  app.use(healthRouter(deps));
  // One API-key principal cache per app (per process in production); auth epochs in Redis keep instances in step.
  // The Idempotency-Keys this instance's requests hold while they run (main.ts stores what is pending at shutdown).
  app.locals.heldKeys = new HeldIdempotencyKeys(deps.idempotencyPool, deps.clock, deps.logger);
  // The turns of each organization's writes on this instance (http/organization-turns.ts).
  app.locals.organizationTurns = turnsFor(deps.config, (reason) => metrics.writeTurnsLeft.inc({ reason }));
  metrics.watchWriteTurns(() => app.locals.organizationTurns.loadAll());
  app.use('/api/v1', routerFor(routes, deps, limiters, new ApiKeyCache(deps.config.apiKeyCacheTtlSeconds * 1000), app.locals.heldKeys, app.locals.organizationTurns));
  const dashboard = dashboardRouter(deps.config.webDistDir, deps.logger);
  if (dashboard) app.use(dashboard);
  app.use(unknownRoute);
  app.use(errorHandler(deps.logger));
  return app;
}
