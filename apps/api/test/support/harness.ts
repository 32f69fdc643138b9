// A real API for integration tests: the run's PostgreSQL database (test-support/global-setup.js), real Redis
// under a key prefix of its own, a mail outbox in a temp folder and a clock tests can move.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createLogger, loadConfig, type Config } from '@svc/config';
import { redisReady } from '@svc/queue';
import { createApp, type App } from '../../src/app';
import { openApiConnections } from '../../src/connections';
import type { AppDeps } from '../../src/app-deps';
import { WorkAfterAnswer } from '../../src/http/after-answer';
import { OffsetClock } from './clock';
import { createMailer } from '@svc/mail';
import { createStorage } from '@svc/storage';

export interface Harness {
  app: App;
  deps: AppDeps;
  clock: OffsetClock;
  config: Config;
  outboxDir: string;
  /** Messages written to the outbox so far, oldest first. */
  /** The messages in the mail outbox folder, oldest first (`to` one visible recipient, or `bcc` several hidden ones). */
  mail(): Array<{ to: string; bcc?: string[]; subject: string; text: string }>;
  close(): Promise<void>;
}

export function uniqueSuffix(): string {
  return randomBytes(5).toString('hex');
}

/**
 * The API's database pool is DATABASE_POOL_SIZE, 4 unless `env` says otherwise (in-process workers share this small
 * pool): a test that keeps more requests waiting in their transactions at once asks for a larger one, and the write
 * turns follow from it as in production.
 */
export async function createHarness(env: Record<string, string> = {}): Promise<Harness> {
  const outboxDir = mkdtempSync(path.join(tmpdir(), 'svc-outbox-'));
  const storageDir = mkdtempSync(path.join(tmpdir(), 'svc-storage-'));
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'test',
    REDIS_PREFIX: `test:${process.env.TEST_RUN_ID ?? 'local'}:${uniqueSuffix()}`,
    BCRYPT_ROUNDS: '4',
    MAIL_OUTBOX_DIR: outboxDir,
    LOG_LEVEL: 'error',
    STORAGE_DIR: storageDir,
    // In-process workers share this small pool; pg counts waiting for a free slot in the connect timeout.
    DATABASE_CONNECT_TIMEOUT_MS: '30000',
    // A small pool, and the write turns that follow from it as in production (2 per organization, 3 of all).
    DATABASE_POOL_SIZE: '4',
    ...env,
  });
  const logger = createLogger({ level: config.logLevel, service: 'api-test', silent: !process.env.TEST_LOGS });
  const connections = openApiConnections(config, logger);
  const { prisma, idempotencyPool, redis, deliveryQueue, reportQueue } = connections;
  // The API's Redis connection does not queue commands while disconnected: wait for it before the first request.
  await redisReady(redis, 10_000);
  const clock = new OffsetClock();
  const deps: AppDeps = {
    config,
    logger,
    prisma,
    idempotencyPool,
    redis,
    deliveryQueue,
    reportQueue,
    mailer: createMailer(config.mail),
    clock,
    storage: createStorage(config.storage, logger),
    afterAnswer: new WorkAfterAnswer(logger),
  };
  const app = createApp(deps);
  return {
    app,
    deps,
    clock,
    config,
    outboxDir,
    mail: () =>
      readdirSync(outboxDir)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((f) => JSON.parse(readFileSync(path.join(outboxDir, f), 'utf8'))),
    async close() {
      // As main.ts at shutdown: the work requests left after their answers (audit entries, mails) ends first; a write
      // still under way when the pool closes would wait for a connection it never gets.
      await deps.afterAnswer.drain(config.shutdownDrainTimeoutMs);
      const keys = await redis.keys(`${config.redisPrefix}:*`).catch(() => []);
      // One DEL per key: on a Redis Cluster the keys sit in different slots.
      await Promise.all(keys.map((key) => redis.del(key)));
      await connections.close();
      deps.storage.close();
      rmSync(storageDir, { recursive: true, force: true });
      rmSync(outboxDir, { recursive: true, force: true });
    },
  };
}
