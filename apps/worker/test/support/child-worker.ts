// The real worker in a child process, started as in production (apps/worker/run.sh), for tests that kill or stop it.
import path from 'node:path';
import { buildApp, ROOT, spawnService, type ChildService } from '../../../../test-support/child-service';
import type { World } from './world';
import { FAST_RETRY_ENV } from './world';

export const WORKER_LAUNCHER = path.join(ROOT, 'apps/worker/run.sh');

/** Compiles the worker and the packages it uses (incremental; fast when nothing changed). */
export const buildWorker = (): void => buildApp('apps/worker');

export type ChildWorker = ChildService;

export function spawnWorker(w: World, env: Record<string, string> = {}): ChildWorker {
  return spawnService('worker', WORKER_LAUNCHER, {
    ...FAST_RETRY_ENV,
    NODE_ENV: 'test',
    // debug: successful attempts are logged at debug (apps/worker/src/deliver.ts logAttempt).
    LOG_LEVEL: 'debug',
    REDIS_PREFIX: w.h.config.redisPrefix,
    DATABASE_URL: w.h.config.databaseUrl,
    WEBHOOK_EXTRA_CA_FILE: w.tls.caFile,
    // No metrics server: its fixed default port would collide with other test files' workers, or a running service.
    METRICS_PORT: '0',
    ...env,
  }, 20_000);
}
