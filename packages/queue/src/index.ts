// Queue names, job shapes and Redis connections shared by the API (producer) and the worker (consumer).
import { readFileSync } from 'node:fs';
import { Job, Queue, type JobsOptions } from 'bullmq';
import { Cluster, Redis, SentinelConnector, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config, RedisNodeAuth, RedisTarget } from '@svc/config';

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

export type MaintenanceJobName = 'retention-purge' | 'key-lifecycle' | 'sla-scan' | 'erasure' | 'source-sweep' | 'security-notices';

/** Where to connect: a `redis://` URL (tests, single server) or the configuration's target. */
export type RedisWhere = string | RedisTarget;

/**
 * After a Sentinel failover the old master may come back as a replica, and a connection still open to it gets
 * READONLY on writes: reconnect (Sentinel then names the new master) and resend the command.
 */
const reconnectOnReadonly = (err: Error) => (err.message.startsWith('READONLY') ? 2 : false);

/**
 * ioredis's SentinelConnector, with the failover detector of the previous connection dropped when a new connection
 * attempt starts. Works around redis/ioredis#1362 as it bites on a failover (in 6.0.0; fixed upstream by
 * redis/ioredis#2198, which ties the cleanup to the stream's close; drop this class once on a release with it): the
 * detector (subscribed to `+switch-master` on every sentinel) is cleaned up only
 * when the client itself disconnects, not when the server closes the connection (a master killed, or demoted by
 * Sentinel with `CLIENT KILL TYPE normal`). The reconnection then asks a sentinel for the master while that stale
 * detector still listens; a `+switch-master` arriving in that moment (each sentinel publishes its own, up to a hello
 * period apart) makes it call `disconnect()` on the connector mid-resolve, `connect()` rejects with "Connection is
 * closed", and ioredis sets the client to `end`: it never reconnects. A BullMQ worker whose blocking connection
 * ended fetches no job again (issue 35: 45 of 60 deliveries stuck after a forced failover). Here the detector goes
 * when its connection closes, whoever closed it (as in #2198; a `quit()` no longer leaves its sentinel connections
 * open either), and in any case before a new connection asks the sentinels: only the client's own `disconnect()` can
 * abort a resolve. The new connection gets a detector of its own once its stream connects. Set as `Connector`, so
 * BullMQ's `duplicate()`s get it too.
 */
class ResumingSentinelConnector extends SentinelConnector {
  override async connect(eventEmitter: Parameters<SentinelConnector['connect']>[0]) {
    this.dropFailoverDetector();
    const stream = await super.connect(eventEmitter);
    stream.once('close', () => this.dropFailoverDetector());
    return stream;
  }

  private dropFailoverDetector(): void {
    const self = this as unknown as { failoverDetector: { cleanup(): void } | null };
    self.failoverDetector?.cleanup();
    self.failoverDetector = null;
  }
}

/**
 * How soon a connection notices that Redis is back (issue 35: a /readyz that stayed 503 for more than 10 s after a
 * Redis restart with AOF). ioredis's defaults wait up to 2 s between reconnection attempts and, when the server
 * answers that it is still loading its AOF or RDB, wait the server's loading estimate, up to 10 s, before asking again:
 * a reconnection that met a Redis a moment into loading stayed down for seconds after the load had ended. Here at
 * most 500 ms between attempts and 250 ms between readiness checks.
 */
const comeBackQuickly: RedisOptions = {
  retryStrategy: (times: number) => Math.min(times * 50, 500),
  maxLoadingRetryTime: 250,
};

/** A sentinel that accepts the connection and never answers (frozen, overloaded) is passed over after this. */
const SENTINEL_COMMAND_TIMEOUT_MS = 2_000;

function tlsOptions(enabled: boolean, caFile: string | undefined): RedisOptions['tls'] {
  if (!enabled) return undefined;
  return caFile ? { ca: readFileSync(caFile, 'utf8') } : {};
}

function nodeOptions(auth: RedisNodeAuth): RedisOptions {
  return { username: auth.username, password: auth.password, tls: tlsOptions(auth.tls, auth.tlsCaFile) };
}

/**
 * Opens a connection with ioredis's own Sentinel and Cluster support. A Cluster client is returned typed as `Redis`:
 * both answer the commands the service uses (every multi-key command and script keeps its keys in one slot), and
 * BullMQ and rate-limiter-flexible accept either. Sentinel: the master is asked of the sentinels
 * on every (re)connection, and `failoverDetector` moves to a promoted replica as soon as the sentinels announce it.
 * Cluster: `options` apply to every node connection; commands wait (offline queue) while slots are refreshed.
 */
function connect(where: RedisWhere, options: RedisOptions): Redis {
  const target: RedisTarget = typeof where === 'string' ? { mode: 'single', url: where } : where;
  switch (target.mode) {
    case 'single':
      return new Redis(target.url, { reconnectOnError: reconnectOnReadonly, ...comeBackQuickly, ...singleTls(target), ...options });
    case 'sentinel':
      return new Redis({
        sentinels: target.sentinels,
        name: target.masterName,
        sentinelUsername: target.sentinelUsername,
        sentinelPassword: target.sentinelPassword,
        enableTLSForSentinelMode: target.sentinelTls,
        sentinelTLS: tlsOptions(target.sentinelTls, target.tlsCaFile),
        failoverDetector: true,
        Connector: ResumingSentinelConnector as unknown as RedisOptions['Connector'],
        sentinelCommandTimeout: SENTINEL_COMMAND_TIMEOUT_MS,
        reconnectOnError: reconnectOnReadonly,
        ...comeBackQuickly,
        ...nodeOptions(target),
        ...options,
      });
    case 'cluster':
      return clusterClient(target, options) as unknown as Redis;
  }
}

function singleTls(target: Extract<RedisTarget, { mode: 'single' }>): RedisOptions {
  return target.tlsCaFile && target.url.startsWith('rediss:') ? { tls: { ca: readFileSync(target.tlsCaFile, 'utf8') } } : {};
}

function clusterClient(target: Extract<RedisTarget, { mode: 'cluster' }>, options: RedisOptions): Cluster {
  const { enableOfflineQueue, enableAutoPipelining, retryStrategy: _retry, ...perNode } = options;
  const clusterOptions: ClusterOptions = {
    // Managed clusters announce node names their TLS certificates carry; keep them as given.
    dnsLookup: (address, callback) => callback(null, address),
    redisOptions: { reconnectOnError: reconnectOnReadonly, maxLoadingRetryTime: comeBackQuickly.maxLoadingRetryTime, ...nodeOptions(target), ...perNode },
    ...(enableOfflineQueue !== undefined && { enableOfflineQueue }),
    ...(enableAutoPipelining !== undefined && { enableAutoPipelining }),
  };
  return new Cluster(target.nodes, clusterOptions);
}

/** BullMQ workers need `maxRetriesPerRequest: null` so blocking commands survive reconnects. */
export function createRedis(where: RedisWhere, options: RedisOptions = {}): Redis {
  return connect(where, { maxRetriesPerRequest: null, ...options });
}

/**
 * The API's connection: requests must fail fast while Redis is down instead of hanging (BullMQ's "failing fast"
 * pattern). Commands are not queued while disconnected, an in-flight command is retried once after a reconnect,
 * and none waits longer than `commandTimeoutMs`. Reconnection goes on in the background.
 */
export function createFailFastRedis(where: RedisWhere, commandTimeoutMs: number, options: RedisOptions = {}): Redis {
  return connect(where, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: commandTimeoutMs, ...options });
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
  /Stream isn't writeable|Redis connection is not ready|Command timed out|Connection is closed|Reached the max retries per request|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|LOADING |READONLY |CLUSTERDOWN|TRYAGAIN|Cluster isn't ready|None of startup nodes is available|Failed to refresh slots cache|All sentinels are unreachable/i;

/** True when a Redis command failed because Redis is unreachable or not answering (not a script or data error). */
export function isRedisUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { name, message } = err as { name?: unknown; message?: unknown };
  return name === 'MaxRetriesPerRequestError' || (typeof message === 'string' && REDIS_UNAVAILABLE_MESSAGE.test(message));
}

/** What names the queue keys: the prefix, and whether Redis is a Cluster. */
export type QueueNaming = Pick<Config, 'redisPrefix'> & { redis: Pick<RedisTarget, 'mode'> };

/**
 * Every BullMQ key lives under `<REDIS_PREFIX>:bull`, so several deployments (or test runs) share a Redis safely.
 * On a Cluster the prefix is a hash tag, `{<REDIS_PREFIX>:bull}` (BullMQ's documented way): BullMQ's Lua scripts
 * touch several keys of a queue at once, and a tag puts them all in one slot.
 */
export function bullPrefix(naming: QueueNaming): string {
  return naming.redis.mode === 'cluster' ? `{${naming.redisPrefix}:bull}` : `${naming.redisPrefix}:bull`;
}

export function createDeliveryQueue(connection: Redis, naming: QueueNaming): Queue<DeliveryJobData> {
  return new Queue<DeliveryJobData>(DELIVERY_QUEUE, { connection, prefix: bullPrefix(naming) });
}

export function createMaintenanceQueue(connection: Redis, naming: QueueNaming): Queue {
  return new Queue(MAINTENANCE_QUEUE, { connection, prefix: bullPrefix(naming) });
}

export function createRelayQueue(connection: Redis, naming: QueueNaming): Queue {
  return new Queue(RELAY_QUEUE, { connection, prefix: bullPrefix(naming) });
}

/**
 * Options of a delivery job. The job id is the delivery id, so enqueueing the same delivery twice (the API after
 * commit, and the outbox relay) yields one job. Retries are driven by the worker, which throws to ask BullMQ
 * for the next attempt; `attempts` is only an upper bound.
 */
export function deliveryJobOptions(deliveryId: string, remainingAttempts: number, delayMs = 0, priority = 0): JobsOptions {
  return {
    jobId: deliveryId,
    ...(priority > 0 && { priority }),
    attempts: Math.max(1, remainingAttempts),
    backoff: { type: 'webhook' },
    delay: delayMs,
    removeOnComplete: true,
    removeOnFail: true,
  };
}

/** A handle on a delivery's job by its id, for the scripts that need no more (promote, changeDelay): no read of the job. */
function deliveryJob(queue: Queue<DeliveryJobData>, id: string): Job<DeliveryJobData> {
  return new Job(queue, 'deliver', { deliveryId: id }, {}, id);
}

/** The Redis connection a queue runs its commands on (for the scripts that share its slot and connection). */
export async function queueRedis(queue: Queue): Promise<Redis> {
  return (await queue.backend.client) as unknown as Redis;
}

// EXISTS of each key, in one command: the relay asks about a page of 500 jobs at a time, and a pipeline of 500
// EXISTS cost the client and Redis about five times as much (10,000 jobs: 66 ms). A queue's keys share one hash
// slot in a Cluster (bullPrefix), so one script may read them all.
const JOBS_EXISTING = `local found = {}
for i, key in ipairs(KEYS) do found[i] = redis.call('EXISTS', key) end
return found`;

type ExistingRedis = {
  defineCommand(name: string, definition: { numberOfKeys?: number; lua: string }): void;
  jobsExisting?(keyCount: number, ...keys: string[]): Promise<number[]>;
};
const existingDefined = new WeakSet<object>();

/** Of these deliveries, those that have no job in the queue (none waiting, delayed, active or prioritized). */
export async function idsWithoutJob<T>(queue: Queue<T>, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const client = (await queueRedis(queue)) as unknown as ExistingRedis;
  if (!existingDefined.has(client)) {
    client.defineCommand('jobsExisting', { lua: JOBS_EXISTING });
    existingDefined.add(client);
  }
  const found = await client.jobsExisting!(ids.length, ...ids.map((id) => queue.toKey(id)));
  return ids.filter((_, i) => found[i] === 0);
}

const WAKE_CHUNK = 100;

/**
 * Moves waiting deliveries' delayed jobs to now (a slot freed, a breaker closed), a chunk at a time concurrently: a
 * closing breaker may wake thousands. A job no longer delayed (or gone) is left alone.
 */
export async function wakeDeliveryJobs(queue: Queue<DeliveryJobData>, ids: string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += WAKE_CHUNK) {
    await Promise.all(ids.slice(i, i + WAKE_CHUNK).map((id) => deliveryJob(queue, id).promote().catch(() => undefined)));
  }
}

/** Moves a delayed delivery job to `delayMs` from now (a breaker's prober to the probe time); a job gone is left alone. */
export async function redelayDeliveryJob(queue: Queue<DeliveryJobData>, id: string, delayMs: number): Promise<void> {
  await deliveryJob(queue, id).changeDelay(Math.max(0, delayMs)).catch(() => undefined);
}

// Issue exports (issue 24) ride the delivery queue, so they share its workers, concurrency and backoff strategy:
// a job named `issue-export` whose deliveryId is the export's id (job id = export id, so enqueueing twice adds one).
export const ISSUE_EXPORT_JOB = 'issue-export';

export async function enqueueIssueExport(queue: Queue<DeliveryJobData>, exportId: string, remainingAttempts: number): Promise<void> {
  await queue.add(ISSUE_EXPORT_JOB, { deliveryId: exportId }, deliveryJobOptions(exportId, remainingAttempts));
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

export function createReportQueue(connection: Redis, naming: QueueNaming): Queue<ReportJobData> {
  return new Queue<ReportJobData>(REPORT_QUEUE, { connection, prefix: bullPrefix(naming) });
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
export * from './isolation-state';
