// Queue names, job shapes and Redis connections shared by the API (producer) and the worker (consumer).
import { Queue, type JobsOptions } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';

export const DELIVERY_QUEUE = 'webhook-deliveries';
export const MAINTENANCE_QUEUE = 'maintenance';

export interface DeliveryJobData {
  deliveryId: string;
}

export type MaintenanceJobName = 'outbox-relay' | 'retention-purge';

/** BullMQ workers need `maxRetriesPerRequest: null` so blocking commands survive reconnects. */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, ...options });
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

export async function enqueueDelivery(
  queue: Queue<DeliveryJobData>,
  deliveryId: string,
  remainingAttempts: number,
  delayMs = 0,
): Promise<void> {
  await queue.add('deliver', { deliveryId }, deliveryJobOptions(deliveryId, remainingAttempts, delayMs));
}
