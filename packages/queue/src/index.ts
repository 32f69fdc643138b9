// Queue names, job shapes and Redis connections shared by the API (producer) and the worker (consumer).
import { Queue, type JobsOptions } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';

export const DELIVERY_QUEUE = 'webhook-deliveries';
export const MAINTENANCE_QUEUE = 'maintenance';
/**
 * The outbox relay has a queue and a worker of its own: no maintenance job (a retention purge, an SLA scan) can
 * hold it up, so "nothing accepted is lost" keeps its timing when the volume is high.
 */
export const RELAY_QUEUE = 'outbox-relay';
export const RELAY_JOB = 'outbox-relay';

export interface DeliveryJobData {
  deliveryId: string;
}

export type MaintenanceJobName = 'retention-purge' | 'key-lifecycle' | 'sla-scan';

/** BullMQ workers need `maxRetriesPerRequest: null` so blocking commands survive reconnects. */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, ...options });
}

/**
 * The API's connection: requests must fail fast while Redis is down instead of hanging (BullMQ's "failing fast"
 * pattern). Commands are not queued while disconnected, an in-flight command is retried once after a reconnect,
 * and none waits longer than `commandTimeoutMs`. Reconnection goes on in the background.
 */
export function createFailFastRedis(url: string, commandTimeoutMs: number, options: RedisOptions = {}): Redis {
  return new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: commandTimeoutMs, ...options });
}

/** Resolves when the connection is ready, or rejects after `timeoutMs`. */
export function redisReady(redis: Redis, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      reject(new Error(`Redis was not ready within ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    redis.once('ready', onReady);
  });
}

const REDIS_UNAVAILABLE_MESSAGE =
  /Stream isn't writeable|Redis connection is not ready|Command timed out|Connection is closed|Reached the max retries per request|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|LOADING /i;

/** True when a Redis command failed because Redis is unreachable or not answering (not a script or data error). */
export function isRedisUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { name, message } = err as { name?: unknown; message?: unknown };
  return name === 'MaxRetriesPerRequestError' || (typeof message === 'string' && REDIS_UNAVAILABLE_MESSAGE.test(message));
}

/** Every BullMQ key lives under `<REDIS_PREFIX>:bull`, so several deployments (or test runs) share a Redis safely. */
export function bullPrefix(redisPrefix: string): string {
  return `${redisPrefix}:bull`;
}

export function createDeliveryQueue(connection: Redis, redisPrefix: string): Queue<DeliveryJobData> {
  return new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection, prefix: bullPrefix(redisPrefix) });
}

export function createMaintenanceQueue(connection: Redis, redisPrefix: string): Queue {
  return new Queue(MAINTENANCE_QUEUE, { connection, prefix: bullPrefix(redisPrefix) });
}

export function createRelayQueue(connection: Redis, redisPrefix: string): Queue {
  return new Queue(RELAY_QUEUE, { connection, prefix: bullPrefix(redisPrefix) });
}

/**
 * Options of a delivery job. The job id is the delivery id, so enqueueing the same delivery twice (the API after
 * commit, and the outbox relay) yields one job. Retries are driven by the worker, which throws to ask BullMQ
 * for the next attempt; `attempts` is only an upper bound.
 */
export function deliveryJobOptions(deliveryId: string, remainingAttempts: number, delayMs = 0): JobsOptions {
  return {
    jobId: deliveryId,
    attempts: Math.max(1, remainingAttempts),
    backoff: { type: 'webhook' },
    delay: delayMs,
    removeOnComplete: true,
    removeOnFail: true,
  };
}


// ---------------------------------------------------------------------------
// Report rendering: the API enqueues one `render` job per requested report (job id = report id) after commit;
// the worker renders the PDF and publishes `report.ready`. A `report-relay` job scheduler enqueues reports still
// pending after a while (an enqueue lost to a Redis outage or a crash), like the outbox relay does for deliveries.

export const REPORT_QUEUE = 'reports';

export interface ReportJobData {
  reportId: string;
}

export type ReportJobName = 'render' | 'report-relay';

/** Attempts at rendering one report before it is marked failed. */
export const REPORT_RENDER_ATTEMPTS = 3;

export function createReportQueue(connection: Redis, redisPrefix: string): Queue<ReportJobData> {
  return new Queue<ReportJobData>(REPORT_QUEUE, { connection, prefix: bullPrefix(redisPrefix) });
}

/** Job id = report id: enqueueing a report that already has a job (API after commit, and the relay) adds nothing. */
export function reportJobOptions(reportId: string): JobsOptions {
  return {
    jobId: reportId,
    attempts: REPORT_RENDER_ATTEMPTS,
    backoff: { type: 'exponential', delay: 2000 },
    removeOnComplete: true,
    removeOnFail: true,
  };
}

export async function enqueueReport(queue: Queue<ReportJobData>, reportId: string): Promise<void> {
  await queue.add('render', { reportId }, reportJobOptions(reportId));
}
export * from './auth-epoch';
