// Liveness and readiness probes, outside /api/v1 and without credentials.
import { Router } from 'express';
import type { AppDeps } from '../../app-deps';

export function healthRouter(deps: AppDeps): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [database, redis] = await Promise.all([
      deps.prisma.$queryRaw`SELECT 1`.then(() => 'ok', () => 'unreachable'),
      deps.redis.ping().then(() => 'ok', () => 'unreachable'),
    ]);
    const ready = database === 'ok' && redis === 'ok';
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not_ready', checks: { database, redis } });
  });
  return router;
}
