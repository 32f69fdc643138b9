// The worker process: configuration, logger, Prisma, Redis, the delivery and maintenance workers. SIGTERM or
// SIGINT stops taking jobs, lets in-flight attempts finish, disconnects and exits.
import { createLogger, loadConfigOrExit } from '@svc/config';
import { createPrismaClient, secureStoredSecrets, warmUpQueryCompiler, warnOfIdleConnectionError } from '@svc/db';
import { createMailer } from '@svc/mail';
import { createRedis } from '@svc/queue';
import { createStorage } from '@svc/storage';
import type { RedisOptions } from 'ioredis';
import { systemClock, waitAtMost } from '@svc/domain';
import { credentialDestination } from '@svc/webhooks';
import { MetricsPortInUseError, startMetricsServer } from './metrics';
import { startWorker } from './worker';

// pg counts the wait for a free pool slot in its connect timeout. A delivery may queue behind WORKER_CONCURRENCY
// others for a slot, so the worker does not use the API's short DATABASE_CONNECT_TIMEOUT_MS; this bound still frees
// an attempt stuck on an unreachable server well before BullMQ's lock on its job would expire.
const WORKER_POOL_WAIT_MS = 30_000;

/**
 * The longest closing the database pool may take at shutdown, once the jobs have finished. A statement of the
 * worker's own background work (binding stored credentials at start-up, say) may still wait for a row another
 * transaction holds, and closing the pool waits for it: the process exits regardless, as the API's does.
 */
const CLOSE_TIMEOUT_MS = 5_000;

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger({ level: config.logLevel, service: 'worker' });
  const prisma = createPrismaClient(config.databaseUrl, {
    max: config.databasePoolSize,
    connectTimeoutMs: WORKER_POOL_WAIT_MS,
    onIdleError: warnOfIdleConnectionError(logger),
  });
  void warmUpQueryCompiler(prisma);
  // Rows stored before chat URLs were sealed and credentials bound to their destination (packages/db
  // stored-credentials.ts): secured once, in the background.
  void secureStoredSecrets(prisma, config.encryptionKey, credentialDestination)
    .then((done) => (done.chatUrlsSealed > 0 || done.credentialsBound > 0) && logger.info('Secured stored secrets', { chat_urls_sealed: done.chatUrlsSealed, credentials_bound: done.credentialsBound }))
    .catch((err: unknown) => logger.warn('Securing stored secrets failed; the next start-up tries again', { error: err instanceof Error ? err.message : String(err) }));
  const deps = {
    config,
    logger,
    prisma,
    redis: (options?: RedisOptions) => createRedis(config.redis, options),
    clock: systemClock,
    mailer: createMailer(config.mail),
    storage: createStorage(config.storage, logger),
  };
  const running = await startWorker(deps);
  const metrics =
    config.metrics.port > 0
      ? await startMetricsServer(deps, running.deliveryQueue, config.metrics.port).catch(async (err: unknown) => {
          if (!(err instanceof MetricsPortInUseError)) throw err;
          logger.error(err.message);
          await running.close();
          process.exit(1);
        })
      : null;
  logger.info('Worker started', {
    concurrency: config.webhooks.workerConcurrency,
    relay_interval_ms: config.webhooks.relayIntervalMs,
    pid: process.pid,
    metrics_port: metrics?.port ?? null,
  });

  let stopping = false;
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info('Shutting down: finishing in-flight attempts', { signal });
    try {
      // Beside the workers' close (which stops taking jobs at once): a scrape in flight may wait for Redis (queue
      // counts), so the metrics server gets the same bound as the connections.
      const closingMetrics = metrics
        ? waitAtMost(() => metrics.close(), CLOSE_TIMEOUT_MS, () =>
            logger.warn('Metrics server not closed in time: stopping anyway', { timeout_ms: CLOSE_TIMEOUT_MS }),
          )
        : Promise.resolve(true);
      await Promise.all([running.close(), closingMetrics]);
      await waitAtMost(() => prisma.$disconnect(), CLOSE_TIMEOUT_MS, () =>
        logger.warn('Connections not closed in time: stopping anyway', { timeout_ms: CLOSE_TIMEOUT_MS }),
      );
      logger.info('Worker stopped');
      process.exit(0);
    } catch (err) {
      logger.error('Shutdown failed', { error: err instanceof Error ? err.message : String(err) });
      process.exit(1);
    }
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`Worker failed to start: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
