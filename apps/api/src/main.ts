// API entry point: configuration, connections, HTTP server, graceful shutdown on SIGTERM/SIGINT.
import { createLogger, loadConfigOrExit } from '@svc/config';
import { createApp } from './app';
import { openApiConnections } from './connections';
import { systemClock } from '@svc/domain';
import { warmUpQueryCompiler } from '@svc/db';
import { createMailer } from '@svc/mail';
import { createStorage } from '@svc/storage';
import { sweepTempFilesAtStart } from './modules/source/temp-files';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger({ level: config.logLevel, service: 'api' });
  const connections = openApiConnections(config, logger);
  const { prisma, redis, deliveryQueue, reportQueue } = connections;
  void warmUpQueryCompiler(prisma);
  const mailer = createMailer(config.mail);
  // Upload leftovers of an earlier process that was killed mid-upload (README "Source").
  await sweepTempFilesAtStart(config.source, logger);
  const app = createApp({ config, logger, prisma, redis, deliveryQueue, reportQueue, mailer, clock: systemClock, storage: createStorage(config.storage) });

  const server = app.listen(config.port, config.host, () => {
    logger.info('API listening', { url: `http://${config.host}:${config.port}` });
  });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('Shutting down', { signal });
    server.close();
    server.closeIdleConnections();
    await new Promise((resolve) => server.once('close', resolve));
    await connections.close();
    logger.info('Stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

void main();
