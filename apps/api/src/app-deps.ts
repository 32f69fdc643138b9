import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Config, Logger } from '@svc/config';
import type { Db, PgPool } from '@svc/db';
import type { DeliveryJobData, ReportJobData } from '@svc/queue';
import type { Clock } from '@svc/domain';
import type { Mailer } from '@svc/mail';
import type { ObjectStorage } from '@svc/storage';
import type { WorkAfterAnswer } from './http/after-answer';

/** Everything the API needs from the outside world; main.ts builds it, tests build their own. */
export interface AppDeps {
  config: Config;
  logger: Logger;
  prisma: Db;
  /** One connection of its own, for renewing the locks of idempotent requests still running (held-keys.ts). */
  idempotencyPool: PgPool;
  redis: Redis;
  deliveryQueue: Queue<DeliveryJobData>;
  /** Producer side of the report-rendering queue (the worker renders); closed at shutdown with the rest. */
  reportQueue: Queue<ReportJobData>;
  mailer: Mailer;
  clock: Clock;
  /** Uploaded source archives and their extracted files (packages/storage). */
  storage: ObjectStorage;
  /** Work a request leaves running after its answer (audit entries, mails); main.ts drains it at shutdown. */
  afterAnswer: WorkAfterAnswer;
}
