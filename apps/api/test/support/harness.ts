// A real API for integration tests: the run's PostgreSQL database (test-support/global-setup.js), real Redis
// under a key prefix of its own, a mail outbox in a temp folder and a clock tests can move.
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { createLogger, loadConfig, type Config } from '@svc/config';
import { createPrismaClient } from '@svc/db';
import { createDeliveryQueue, createRedis, createReportQueue } from '@svc/queue';
import { createApp, type App } from '../../src/app';
import type { AppDeps } from '../../src/app-deps';
import { OffsetClock } from './clock';
import { createMailer } from '@svc/mail';

export interface Harness {
  app: App;
  deps: AppDeps;
  clock: OffsetClock;
  config: Config;
  outboxDir: string;
  /** Messages written to the outbox so far, oldest first. */
  mail(): Array<{ to: string; subject: string; text: string }>;
  close(): Promise<void>;
}

export function uniqueSuffix(): string {
  return randomBytes(5).toString('hex');
}

export async function createHarness(env: Record<string, string> = {}): Promise<Harness> {
  const outboxDir = mkdtempSync(path.join(tmpdir(), 'svc-outbox-'));
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'test',
    REDIS_PREFIX: `test:${process.env.TEST_RUN_ID ?? 'local'}:${uniqueSuffix()}`,
    BCRYPT_ROUNDS: '4',
    MAIL_OUTBOX_DIR: outboxDir,
    LOG_LEVEL: 'error',
    ...env,
  });
  const logger = createLogger({ level: config.logLevel, service: 'api-test', silent: !process.env.TEST_LOGS });
  const prisma = createPrismaClient(config.databaseUrl, { max: 4 });
  const redis = createRedis(config.redisUrl);
  const deliveryQueue = createDeliveryQueue(redis, config.redisPrefix);
  const reportQueue = createReportQueue(redis, config.redisPrefix);
  const clock = new OffsetClock();
  const deps: AppDeps = { config, logger, prisma, redis, deliveryQueue, reportQueue, mailer: createMailer(config.mail), clock };
  const app = createApp(deps);
  return {
    app,
    deps,
    clock,
    config,
    outboxDir,
    mail: () =>
      readdirSync(outboxDir)
        .sort()
        .map((f) => JSON.parse(readFileSync(path.join(outboxDir, f), 'utf8'))),
    async close() {
      await deliveryQueue.close();
      await reportQueue.close();
      const keys = await redis.keys(`${config.redisPrefix}:*`);
      if (keys.length > 0) await redis.del(...keys);
      await redis.quit();
      await prisma.$disconnect();
    },
  };
}
