// API entry point: configuration, connections, HTTP server, graceful shutdown on SIGTERM/SIGINT.
import { createLogger, loadConfigOrExit, type Logger } from '@svc/config';
import { createApp } from './app';
import { openApiConnections, type ApiConnections } from './connections';
import { systemClock, waitAtMost } from '@svc/domain';
import { credentialDestination } from '@svc/webhooks';
import { secureStoredSecrets, warmUpQueryCompiler } from '@svc/db';
import { createMailer } from '@svc/mail';
import { createStorage } from '@svc/storage';
import { startTempFileSweeps } from './modules/source/temp-files';
import { WorkAfterAnswer } from './http/after-answer';

/**
 * The longest the connections' close may take at shutdown. Work cut off by the drain may still hold a PostgreSQL
 * connection (a statement waiting for a lock), and closing the pool waits for it: the process exits regardless.
 */
const CLOSE_TIMEOUT_MS = 5_000;

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger({ level: config.logLevel, service: 'api' });
  const connections = openApiConnections(config, logger);
  const { prisma, idempotencyPool, redis, deliveryQueue, reportQueue } = connections;
  void warmUpQueryCompiler(prisma);
  // Rows stored before chat URLs were sealed and credentials bound to their destination (packages/db
  // stored-credentials.ts): secured once, in the background.
  void secureStoredSecrets(prisma, config.encryptionKey, credentialDestination)
    .then((done) => (done.chatUrlsSealed > 0 || done.credentialsBound > 0) && logger.info('Secured stored secrets', { chat_urls_sealed: done.chatUrlsSealed, credentials_bound: done.credentialsBound }))
    .catch((err: unknown) => logger.warn('Securing stored secrets failed; the next start-up tries again', { error: err instanceof Error ? err.message : String(err) }));
  const mailer = createMailer(config.mail);
  // Upload leftovers of a process killed mid-upload, at start and while running (docs/domain.md "Source").
  const stopTempFileSweeps = await startTempFileSweeps(config.source, logger);
  const afterAnswer = new WorkAfterAnswer(logger);
  const app = createApp({
    config,
    logger,
    prisma,
    idempotencyPool,
    redis,
    deliveryQueue,
    reportQueue,
    mailer,
    clock: systemClock,
    storage: createStorage(config.storage, logger),
    afterAnswer,
  });

  const server = app.listen(config.port, config.host, () => {
    logger.info('API listening', { url: `http://${config.host}:${config.port}` });
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('Shutting down', { signal });
    stopTempFileSweeps();
    server.close();
    server.closeIdleConnections();
    await new Promise((resolve) => server.once('close', resolve));
    const unstored = await app.locals.heldKeys.storePendingAnswers();
    if (unstored > 0) {
      logger.warn('Stopping with answers of idempotent requests not stored: a retry with their key may run them again', { requests: unstored });
    }
    await drainWorkAfterAnswers(afterAnswer, config.shutdownDrainTimeoutMs, logger);
    await closeConnections(connections, logger);
    logger.info('Stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

/** Waits for the work requests left running after their answers (audit entries, mails), up to the deadline. */
async function drainWorkAfterAnswers(afterAnswer: WorkAfterAnswer, timeoutMs: number, logger: Logger): Promise<void> {
  const cutOff = await afterAnswer.drain(timeoutMs);
  if (cutOff > 0) {
    logger.warn('Stopping before the work left after answers has ended: what still runs is cut off', {
      cut_off: cutOff,
      work: afterAnswer.stillRunning(),
      timeout_ms: timeoutMs,
    });
  }
}

async function closeConnections(connections: ApiConnections, logger: Logger): Promise<void> {
  await waitAtMost(() => connections.close(), CLOSE_TIMEOUT_MS, () =>
    logger.warn('Connections not closed in time: stopping anyway', { timeout_ms: CLOSE_TIMEOUT_MS }),
  );
}

void main();
