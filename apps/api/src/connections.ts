// The API's connections to PostgreSQL and Redis, opened the same way by main.ts and the test harness. Both are set
// to fail fast during an outage (docs/operations.md "Outages"): a request waits at most DATABASE_CONNECT_TIMEOUT_MS for a
// PostgreSQL connection and REDIS_COMMAND_TIMEOUT_MS for Redis, then answers 503.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config, Logger } from '@svc/config';
import { createPgPool, createPrismaClient, type Db, type PgPool } from '@svc/db';
import { createDeliveryQueue, createFailFastRedis, createReportQueue, type DeliveryJobData, type ReportJobData } from '@svc/queue';

export interface ApiConnections {
  prisma: Db;
  idempotencyPool: PgPool;
  redis: Redis;
  deliveryQueue: Queue<DeliveryJobData>;
  reportQueue: Queue<ReportJobData>;
  close(): Promise<void>;
}

export function openApiConnections(config: Config, logger: Logger, options: { poolSize?: number } = {}): ApiConnections {
  const prisma = createPrismaClient(config.databaseUrl, {
    max: options.poolSize ?? config.databasePoolSize,
    connectTimeoutMs: config.availability.databaseConnectTimeoutMs,
  });
  // Apart from the main pool, whose connections the requests it protects may all be holding; closed when idle.
  const idempotencyPool = createPgPool(config.databaseUrl, {
    max: 1,
    connectTimeoutMs: config.availability.databaseConnectTimeoutMs,
    idleTimeoutMs: 10_000,
    queryTimeoutMs: 5_000,
    allowExitOnIdle: true,
  });
  const redis = createFailFastRedis(config.redis, config.availability.redisCommandTimeoutMs);
  logRedisAvailability(redis, logger);
  const deliveryQueue = createDeliveryQueue(redis, config);
  const reportQueue = createReportQueue(redis, config);
  deliveryQueue.on('error', (err) => logger.warn('Delivery queue error', { error: err.message }));
  reportQueue.on('error', (err) => logger.warn('Report queue error', { error: err.message }));
  return {
    prisma,
    idempotencyPool,
    redis,
    deliveryQueue,
    reportQueue,
    async close() {
      await deliveryQueue.close().catch(() => undefined);
      await reportQueue.close().catch(() => undefined);
      await redis.quit().catch(() => redis.disconnect());
      await prisma.$disconnect();
      await idempotencyPool.end().catch(() => undefined);
    },
  };
}

/** One warning when Redis goes away and one line when it is back, not one per reconnection attempt. */
function logRedisAvailability(redis: Redis, logger: Logger): void {
  let lost = false;
  redis.on('error', (err: Error) => {
    if (lost) return;
    lost = true;
    logger.warn('Redis unreachable; requests that need it answer 503 until it is back', { error: err.message });
  });
  redis.on('ready', () => {
    if (!lost) return;
    lost = false;
    logger.info('Redis reachable again');
  });
}
