// The API's connections to PostgreSQL and Redis, opened the same way by main.ts and the test harness. Both are set
// to fail fast during an outage (docs/operations.md "Outages"): a request waits at most DATABASE_CONNECT_TIMEOUT_MS for a
// PostgreSQL connection and REDIS_COMMAND_TIMEOUT_MS for Redis, then answers 503.
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config, Logger } from '@svc/config';
import { createPgPool, createPrismaClient, warnOfIdleConnectionError, type Db, type PgPool } from '@svc/db';
import { createDeliveryQueue, createFailFastRedis, createReportQueue, type DeliveryJobData, type ReportJobData } from '@svc/queue';

/** The application_name of the connection that renews idempotency locks (pg_stat_activity). */
const IDEMPOTENCY_LOCKS_APPLICATION = 'svc-api-idempotency-locks';

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
    onIdleError: warnOfIdleConnectionError(logger),
  });
  // Apart from the main pool, whose connections the requests it protects may all be holding; closed when idle. Its
  // statement waits for no lock (SKIP LOCKED); the client gives up after 10 s on a connection gone dead. (No
  // statement_timeout: a startup parameter PgBouncer refuses.)
  const idempotencyPool = createPgPool(config.databaseUrl, {
    max: 1,
    connectTimeoutMs: config.availability.databaseConnectTimeoutMs,
    idleTimeoutMs: 10_000,
    queryTimeoutMs: 10_000,
    allowExitOnIdle: true,
    applicationName: IDEMPOTENCY_LOCKS_APPLICATION,
  });
  // An idle connection the server ends (a restart, a failover) is an 'error' on the pool: without a listener it
  // would end the process. The next renewal opens a new one.
  idempotencyPool.on('error', (err) => logger.warn('Idempotency lock connection lost; the next renewal reconnects', { error: err.message }));
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
