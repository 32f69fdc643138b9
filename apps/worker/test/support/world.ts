// Everything an end-to-end worker test needs: the real API (harness) on a database of its own and a Redis prefix of
// its own, an organization, an HTTPS receiver with a certificate from a test CA, and a real BullMQ worker running
// in-process on the same queues, with the harness's movable clock.
import request from 'supertest';
import { createIsolatedDatabase } from '../../../../test-support/databases';
import type { Lookup } from '@svc/net';
import type { WebhookAttempt, WebhookDelivery, WebhookSubscription } from '@svc/db';
import { createRedis } from '@svc/queue';
import type { RedisOptions } from 'ioredis';
import { withOutbox, type PublishEventInput, type PublishedEvent } from '@svc/outbox';
import { createHarness, type Harness } from '../../../api/test/support/harness';
import { bearer, createOrg, type TestOrg } from '../../../api/test/support/fixtures';
import type { WorkerDeps } from '../../src/deps';
import { startWorker, type RunningWorker, type StartWorkerOptions } from '../../src/worker';
import { startReceiver, type Receiver } from './receiver';
import { createTestTls, type TestTls } from './tls';

export const FAST_RETRY_ENV = {
  WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
  WEBHOOK_BACKOFF_BASE_MS: '50',
  WEBHOOK_BACKOFF_MAX_MS: '150',
  WEBHOOK_TIMEOUT_MS: '3000',
  // Retries here take milliseconds, so the retry window a held-back delivery may wait in is about a second, and a
  // breaker's open period is half a minute: tests of retries keep the isolation out of the way (a cap that never
  // binds, a breaker that never opens); the isolation tests (isolation.test.ts) set their own.
  WEBHOOK_BREAKER_FAILURES: '1000',
  WEBHOOK_MIN_IN_FLIGHT: '100',
  WEBHOOK_MAX_IN_FLIGHT: '100',
};

export type Level = { level: 'organization' } | { level: 'project'; projectId: string } | { level: 'assessment'; assessmentId: string };

export interface CreatedSubscription {
  id: string;
  secret: string;
  url: string;
  [field: string]: unknown;
}

export type DeliveryWithAttempts = WebhookDelivery & { attempts: WebhookAttempt[] };

export interface World {
  h: Harness;
  org: TestOrg;
  tls: TestTls;
  receiver: Receiver;
  workerDeps: WorkerDeps;
  worker: RunningWorker | null;
  api(): ReturnType<typeof request>;
  levelBase(level?: Level): string;
  subscribe(body: Record<string, unknown>, level?: Level): Promise<CreatedSubscription>;
  publish(input: Omit<PublishEventInput, 'organizationId'>): Promise<PublishedEvent>;
  waitForDelivery(id: string, timeoutMs?: number): Promise<DeliveryWithAttempts>;
  /** The id of the delivery an event made for one subscription. */
  deliveryFor(published: PublishedEvent, subscriptionId: string): Promise<string>;
  /** Publishes, then waits for the delivery to that subscription to finish. */
  publishTo(subscriptionId: string, input: Omit<PublishEventInput, 'organizationId'>): Promise<DeliveryWithAttempts>;
  deliveriesOf(subscriptionId: string): Promise<WebhookDelivery[]>;
  subscription(id: string): Promise<WebhookSubscription>;
  close(): Promise<void>;
}

export interface WorldOptions {
  env?: Record<string, string>;
  lookup?: Lookup;
  /** Start the in-process worker (default true). */
  worker?: boolean;
  workerOptions?: StartWorkerOptions;
  /** A database the test made itself (on a PostgreSQL of its own, say); default: a new one on the run's server. */
  database?: { url: string; drop(): Promise<void> };
}

export function levelBase(level: Level = { level: 'organization' }): string {
  switch (level.level) {
    case 'organization':
      return '/api/v1/webhooks';
    case 'project':
      return `/api/v1/projects/${level.projectId}/webhooks`;
    case 'assessment':
      return `/api/v1/assessments/${level.assessmentId}/webhooks`;
  }
}

async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 40));
  }
}

export async function createWorld(options: WorldOptions = {}): Promise<World> {
  const tls = await createTestTls();
  const receiver = await startReceiver(tls);
  // Workers scan every organization (relay, purge, schedulers): each world has a database of its own.
  const database = options.database ?? (await createIsolatedDatabase());
  const h = await createHarness({
    ...FAST_RETRY_ENV,
    WEBHOOK_EXTRA_CA_FILE: tls.caFile,
    DATABASE_URL: database.url,
    ...options.env,
  });
  const org = await createOrg(h);
  const workerDeps: WorkerDeps = {
    config: h.config,
    logger: h.deps.logger,
    prisma: h.deps.prisma,
    redis: (options?: RedisOptions) => createRedis(h.config.redis, options),
    clock: h.clock,
    lookup: options.lookup,
  };
  const worker = options.worker === false ? null : await startWorker(workerDeps, { schedule: false, ...options.workerOptions });
  const api = () => request(h.app);

  const world: World = {
    h,
    org,
    tls,
    receiver,
    workerDeps,
    worker,
    api,
    levelBase,
    async subscribe(body, level) {
      const res = await api().post(`${levelBase(level)}/subscriptions`).set(bearer(org.admin.token)).send(body);
      if (res.status !== 201) throw new Error(`Creating a subscription answered ${res.status}: ${JSON.stringify(res.body)}`);
      return res.body as CreatedSubscription;
    },
    publish(input) {
      return withOutbox({ ...h.deps, maxAttempts: h.config.webhooks.maxAttempts }, (_tx, publish) =>
        publish({ ...input, organizationId: org.id }),
        () => h.clock.now(),
      );
    },
    waitForDelivery(id, timeoutMs = 20_000) {
      return poll(
        () => h.deps.prisma.webhookDelivery.findUniqueOrThrow({ where: { id }, include: { attempts: { orderBy: { number: 'asc' } } } }),
        (d) => d.status !== 'pending',
        timeoutMs,
        `delivery ${id} to finish`,
      );
    },
    async deliveryFor(published, subscriptionId) {
      const delivery = await h.deps.prisma.webhookDelivery.findFirst({ where: { eventId: published.eventId, subscriptionId } });
      if (!delivery) throw new Error(`Event ${published.eventId} made no delivery for ${subscriptionId}`);
      return delivery.id;
    },
    async publishTo(subscriptionId, input) {
      const published = await world.publish(input);
      return world.waitForDelivery(await world.deliveryFor(published, subscriptionId));
    },
    deliveriesOf(subscriptionId) {
      return h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId }, orderBy: { id: 'asc' } });
    },
    subscription(id) {
      return h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } });
    },
    async close() {
      await world.worker?.close();
      await h.close();
      await receiver.close();
      await database.drop();
    },
  };
  return world;
}

export { poll };
