// The BullMQ side of the worker: the delivery Worker (one job = one attempt at one delivery), the maintenance
// Worker (purge, SLA scan, key lifecycle), the outbox relay's own Worker, and their job schedulers. Tests start these in-process with injected deps.
import { DelayedError, Worker, type Job, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { withJobLogger } from '@svc/config';
import { waitAtMost } from '@svc/domain';
import {
  DELIVERY_QUEUE,
  ISSUE_EXPORT_JOB,
  MAINTENANCE_QUEUE,
  RELAY_QUEUE,
  bullPrefix,
  createDeliveryQueue,
  createMaintenanceQueue,
  createRelayQueue,
  createReportQueue,
  type DeliveryJobData,
  type ReportJobData,
} from '@svc/queue';
import type { Queue } from 'bullmq';
import type { WorkerDeps } from './deps';
import { closeDeliveryContext, createDeliveryContext, processDelivery, type DeliveryResult } from './deliver';
import { processIssueExport } from './issue-export';
import { deliveriesEnded, deliveriesPostponed } from './metrics';
import { runMaintenanceJob, runOutboxRelay, scheduleMaintenance } from './maintenance';
import { RetryableDeliveryError, deliveryBackoffStrategy } from './retry';
import { RendersUnderWay, createReportWorker, releaseRendersCutOff, scheduleReportRelay } from './reports/report-job';
import { RunningJobs, handBack } from './running-jobs';

/** BullMQ tuning a test may override (a short stalledInterval, say). */
export type WorkerTuning = Pick<WorkerOptions, 'stalledInterval' | 'lockDuration' | 'maxStalledCount' | 'concurrency' | 'autorun'>;

/** The worker owns the connection it was given: it is closed when the worker is. */
function ownConnection(worker: Worker, connection: Redis): void {
  worker.on('closed', () => {
    connection.quit().catch(() => connection.disconnect());
  });
}

function logFailures(worker: Worker, deps: WorkerDeps): void {
  worker.on('failed', (job, err) => {
    if (err instanceof RetryableDeliveryError) return; // already logged as an attempt
    deps.logger.error('Job failed', { queue: worker.name, job_id: job?.id, error: err.message, stack: err.stack });
  });
  worker.on('error', (err) => deps.logger.error('Worker error', { queue: worker.name, error: err.message }));
}

function countEndedDelivery(result: DeliveryResult): void {
  if (result.status === 'succeeded' || result.status === 'failed') deliveriesEnded.inc({ result: result.status, reason: result.outcome });
  else if (result.status === 'skipped') deliveriesEnded.inc({ result: 'skipped', reason: 'not_attempted' });
}

/** The delivery Worker, with the drain its close and the worker's close wait for before BullMQ's own close. */
export type DeliveryWorker = Worker<DeliveryJobData, DeliveryResult> & {
  /**
   * Starts no Splunk ack request any more; resolves once the running jobs have returned, the held-back deliveries'
   * rows are written and the ack requests in flight have ended with their answers recorded. Needs no Redis.
   */
  drain(): Promise<void>;
};

export function createDeliveryWorker(deps: WorkerDeps, jobs: RunningJobs, tuning: WorkerTuning = {}): DeliveryWorker {
  const wakeConnection = deps.redis();
  const wakeQueue = createDeliveryQueue(wakeConnection, deps.config);
  const ctx = createDeliveryContext(deps, wakeQueue);
  const connection = deps.redis();
  let draining: Promise<void> | null = null;
  const processor = async (job: Job<DeliveryJobData>, token?: string) => {
    // Handed over once the worker has begun to stop: the context is about to close.
    if (draining) return handBack(job, token);
    // Issue exports share the queue (transport, concurrency, backoff); their jobs carry the export's id.
    const process = job.name === ISSUE_EXPORT_JOB ? processIssueExport : processDelivery;
    // The job id goes on every log line through the job's own logger, not an AsyncLocalStorage (@svc/config's logger).
    const result = await process(withJobLogger(ctx, job.id), job.data.deliveryId);
    if (result.status === 'awaiting_ack') {
      // Splunk's indexer acknowledgement is polled later: the job waits without a slot, BullMQ's attempt count unchanged.
      await job.moveToDelayed(result.until.getTime(), token);
      throw new DelayedError();
    }
    if (result.status !== 'postponed') return result;
    // A postponement is not an attempt: the job goes back to wait, BullMQ's attempt count unchanged.
    deliveriesPostponed.inc({ reason: result.reason });
    await job.moveToDelayed(result.until.getTime(), token);
    if (await ctx.isolation?.park(result.subscriptionId, job.id!, result.reason, result.until, ctx.clock.now())) {
      await job.promote().catch(() => undefined);
    }
    throw new DelayedError();
  };
  const worker = new Worker<DeliveryJobData, DeliveryResult>(DELIVERY_QUEUE, jobs.counting(processor), {
    connection,
    prefix: bullPrefix(deps.config),
    concurrency: deps.config.webhooks.workerConcurrency,
    settings: { backoffStrategy: deliveryBackoffStrategy(deps.config) },
    ...tuning,
  });
  ownConnection(worker, connection);
  // Once the last jobs have run: the held-back deliveries' rows are written, and the Splunk ack requests still in
  // flight end and their answers are recorded (through the transport and the wake queue, closed after them), before
  // the caller closes the database.
  const closeWorker = worker.close.bind(worker);
  const finish = async () => {
    try {
      await jobs.settled();
      await Promise.all([ctx.postponements.flush(), ctx.ackPolls.settled()]);
    } finally {
      void closeDeliveryContext(ctx).catch(() => undefined);
      void wakeQueue.close().finally(() => wakeConnection.quit().catch(() => wakeConnection.disconnect()));
    }
  };
  const drain = () => {
    ctx.ackPolls.stopAsking();
    return (draining ??= finish());
  };
  worker.close = async (force?: boolean) => {
    // BullMQ's close first: it stops taking jobs. It resolves once it has closed its connections, which may be never.
    const stopping = closeWorker(force);
    stopping.catch(() => undefined);
    await drain();
    await stopping;
  };
  worker.on('completed', (_job, result) => countEndedDelivery(result));
  logFailures(worker, deps);
  return Object.assign(worker, { drain });
}

export function createMaintenanceWorker(deps: WorkerDeps, deliveryQueue: Queue<DeliveryJobData>, jobs: RunningJobs, tuning: WorkerTuning = {}): Worker {
  const connection = deps.redis();
  const worker = new Worker(
    MAINTENANCE_QUEUE,
    jobs.counting((job: Job) => runMaintenanceJob(withJobLogger(deps, job.id), deliveryQueue, job.name)),
    { connection, prefix: bullPrefix(deps.config), concurrency: 1, ...tuning },
  );
  ownConnection(worker, connection);
  logFailures(worker, deps);
  return worker;
}

/** The outbox relay's own worker: one job at a time, never queued behind a maintenance job. */
export function createRelayWorker(deps: WorkerDeps, deliveryQueue: Queue<DeliveryJobData>, jobs: RunningJobs): Worker {
  const connection = deps.redis();
  const worker = new Worker(
    RELAY_QUEUE,
    jobs.counting((job: Job) => runOutboxRelay(withJobLogger(deps, job.id), deliveryQueue)),
    { connection, prefix: bullPrefix(deps.config), concurrency: 1 },
  );
  ownConnection(worker, connection);
  logFailures(worker, deps);
  return worker;
}

/**
 * A Redis that restarts without persistence comes back empty: no job schedulers, so no relay to re-enqueue the
 * deliveries whose jobs were lost with it. Registering the (idempotent) schedulers again after every reconnection
 * brings the relay back, and the relay brings back every pending delivery from PostgreSQL.
 */
function rescheduleAfterReconnect(connection: Redis, schedule: () => Promise<void>, deps: WorkerDeps): void {
  let disconnected = false;
  connection.on('close', () => {
    disconnected = true;
  });
  connection.on('ready', () => {
    if (!disconnected) return;
    disconnected = false;
    deps.logger.info('Redis reachable again; registering the maintenance schedules');
    schedule().catch((err: unknown) =>
      deps.logger.error('Could not register the maintenance schedules after reconnecting', { error: String(err) }),
    );
  });
}

export interface StartWorkerOptions {
  delivery?: WorkerTuning;
  /** Register the maintenance job schedulers (default true). */
  schedule?: boolean;
}

export interface RunningWorker {
  deliveryWorker: DeliveryWorker;
  maintenanceWorker: Worker;
  /** The outbox relay, on a queue of its own. */
  relayWorker: Worker;
  deliveryQueue: Queue<DeliveryJobData>;
  maintenanceQueue: Queue;
  relayQueue: Queue;
  /** Renders PDF reports (apps/worker/src/reports). */
  reportWorker: Worker;
  reportQueue: Queue<ReportJobData>;
  /**
   * Stops taking jobs, lets the running ones finish (at most WORKER_SHUTDOWN_TIMEOUT_MS), then closes every Redis
   * connection (cut after 5 s more). Idempotent.
   */
  close(): Promise<void>;
}

/** Once the jobs are done, how long close() waits for BullMQ to close its queues and connections over Redis. */
const QUEUE_CLOSE_TIMEOUT_MS = 5_000;

/**
 * The deps with every Redis connection opened through them kept in `open` until it ends (maintenance jobs open and
 * quit their own each run), for a close that must cut them.
 */
function trackingConnections(deps: WorkerDeps, open: Set<Redis>): WorkerDeps {
  return {
    ...deps,
    redis: (options) => {
      const connection = deps.redis(options);
      open.add(connection);
      connection.once('end', () => open.delete(connection));
      return connection;
    },
  };
}

export async function startWorker(untracked: WorkerDeps, options: StartWorkerOptions = {}): Promise<RunningWorker> {
  const open = new Set<Redis>();
  const deps = trackingConnections(untracked, open);
  const queueConnection = deps.redis();
  const deliveryQueue = createDeliveryQueue(queueConnection, deps.config);
  const maintenanceQueue = createMaintenanceQueue(queueConnection, deps.config);
  const jobs = new RunningJobs();
  const deliveryWorker = createDeliveryWorker(deps, jobs, options.delivery);
  const maintenanceWorker = createMaintenanceWorker(deps, deliveryQueue, jobs);
  const relayQueue = createRelayQueue(queueConnection, deps.config);
  const relayWorker = createRelayWorker(deps, deliveryQueue, jobs);
  const reportQueue = createReportQueue(queueConnection, deps.config);
  const rendersUnderWay = new RendersUnderWay();
  const reportWorker = createReportWorker(deps, deliveryQueue, reportQueue, jobs, rendersUnderWay);
  if (options.schedule !== false) {
    const schedule = async () => {
      await scheduleMaintenance(deps, maintenanceQueue, relayQueue);
      await scheduleReportRelay(deps, reportQueue);
    };
    await schedule();
    rescheduleAfterReconnect(queueConnection, schedule, deps);
  }
  await Promise.all([deliveryWorker, maintenanceWorker, relayWorker, reportWorker].map((w) => w.waitUntilReady()));
  const closeAll = async () => {
    rendersUnderWay.stopTaking();
    const closingQueues = (async () => {
      await Promise.all([deliveryWorker, maintenanceWorker, relayWorker, reportWorker].map((w) => w.close()));
      await Promise.all([deliveryQueue, maintenanceQueue, relayQueue, reportQueue].map((q) => q.close()));
      await queueConnection.quit().catch(() => queueConnection.disconnect());
    })().catch((err: unknown) => deps.logger.warn('Closing the queues failed', { error: String(err) }));
    // The jobs running return, their attempts made and recorded, and the Splunk ack requests in flight end: each
    // within its own timeouts, all within WORKER_SHUTDOWN_TIMEOUT_MS. This waits on the jobs, not on BullMQ's close.
    const shutdownMs = deps.config.workerShutdownTimeoutMs;
    await waitAtMost(() => deliveryWorker.drain(), shutdownMs, () =>
      deps.logger.warn('Jobs still running at the shutdown deadline: cut off', { jobs: jobs.size, timeout_ms: shutdownMs }),
    );
    await releaseRendersCutOff(deps, rendersUnderWay);
    // What is left is BullMQ's bookkeeping over Redis. Its close waits for an "end" that a client reconnecting to a
    // Redis gone away (a restart, a failover) never emits (taskforcesh/bullmq#4656): past the bound, the connections
    // are cut. A job cut off is taken again by BullMQ's stalled-job recovery, as after a kill.
    await waitAtMost(() => closingQueues, QUEUE_CLOSE_TIMEOUT_MS, () => {
      deps.logger.warn('Queues not closed in time: stopping anyway', { timeout_ms: QUEUE_CLOSE_TIMEOUT_MS });
      for (const connection of open) connection.disconnect();
    });
  };
  let closed: Promise<void> | null = null;
  return {
    deliveryWorker,
    maintenanceWorker,
    relayWorker,
    deliveryQueue,
    maintenanceQueue,
    relayQueue,
    reportWorker,
    reportQueue,
    close() {
      closed ??= closeAll();
      return closed;
    },
  };
}
