// The real API in a child process, started as in production (apps/api/run.sh), on the harness's database, Redis
// prefix, mail outbox and storage, for tests that stop it.
import path from 'node:path';
import { buildApp, killIfRunning, ROOT, spawnService, type ChildService } from '../../../../test-support/child-service';
import { freePort } from '../../../../test-support/private-services';
import type { Harness } from './harness';

export { killIfRunning };

/** Compiles the API and the packages it uses (incremental; fast when nothing changed). */
export const buildApi = (): void => buildApp('apps/api');

export interface ChildApi extends ChildService {
  url: string;
}

/** Starts the API and waits until it listens. */
export async function spawnApi(h: Harness, env: Record<string, string> = {}): Promise<ChildApi> {
  const port = await freePort();
  const child = spawnService('API', path.join(ROOT, 'apps/api/run.sh'), {
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: h.config.databaseUrl,
    REDIS_PREFIX: h.config.redisPrefix,
    BCRYPT_ROUNDS: String(h.config.bcryptRounds),
    MAIL_OUTBOX_DIR: h.outboxDir,
    STORAGE_DIR: h.config.storage.driver === 'local' ? h.config.storage.dir : '',
    METRICS_ENABLED: 'false',
    ...env,
  }, 30_000);
  const api: ChildApi = { ...child, url: `http://127.0.0.1:${port}` };
  await api.waitForLog('API listening');
  return api;
}
