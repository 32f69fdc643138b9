// Liveness and readiness probes, outside /api/v1 and without credentials.
import { Router } from 'express';
import { TimeoutError, withTimeout } from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../../http/errors';

type CheckResult = 'ok' | 'unreachable' | 'timeout';

/** Runs one check, giving up after `timeoutMs` so a hung dependency cannot hang the probe. */
function check(probe: () => Promise<unknown>, timeoutMs: number): Promise<CheckResult> {
  return withTimeout(probe, timeoutMs).then(
    (): CheckResult => 'ok',
    (err: unknown): CheckResult => (err instanceof TimeoutError ? 'timeout' : 'unreachable'),
  );
}

export function healthRouter(deps: AppDeps): Router {
  const router = Router();
  // Liveness: the process answers. It never looks at PostgreSQL or Redis, so an outage does not get it restarted.
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // Readiness: both backing services answer within READINESS_TIMEOUT_MS, checked in parallel.
  router.get('/readyz', async (_req, res) => {
    const timeoutMs = deps.config.availability.readinessTimeoutMs;
    const [database, redis] = await Promise.all([
      check(() => deps.prisma.$queryRaw`SELECT 1`, timeoutMs),
      check(() => deps.redis.ping(), timeoutMs),
    ]);
    const checks = { database, redis };
    const failing = Object.entries(checks).filter(([, result]) => result !== 'ok');
    if (failing.length === 0) {
      res.json({ status: 'ready', checks });
      return;
    }
    const detail = `Not ready: ${failing.map(([name, result]) => `${name} ${result}`).join(', ')}.`;
    res.set('Retry-After', String(OUTAGE_RETRY_AFTER_SECONDS)).status(503).json({ status: 'not_ready', detail, checks });
  });
  return router;
}
