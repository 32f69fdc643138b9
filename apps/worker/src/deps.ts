// What the worker needs from the outside world. main.ts builds the real ones; tests inject their own
// (a movable clock, a DNS override) and run real BullMQ workers in-process.
import type { Redis, RedisOptions } from 'ioredis';
import type { Config, Logger } from '@svc/config';
import type { Db } from '@svc/db';
import type { Mailer } from '@svc/mail';
import type { Lookup } from '@svc/net';
import type { Clock } from '@svc/domain';
import type { ObjectStorage } from '@svc/storage';

export interface WorkerDeps {
  config: Config;
  logger: Logger;
  prisma: Db;
  /** Returns a new Redis connection; every BullMQ worker and queue gets its own. */
  redis: (options?: RedisOptions) => Redis;
  clock: Clock;
  /** DNS override for the URL-safety check (tests); the system resolver otherwise. */
  lookup?: Lookup;
  /** Outgoing mail (API-key expiry warnings); built from config.mail when absent. */
  mailer?: Mailer;
  /** Stored source objects (the orphan sweep); built from config.storage when absent. */
  storage?: ObjectStorage;
}
