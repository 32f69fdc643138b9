// Forgets Idempotency-Keys 24 h after their first request (issue 37; the table is written by the API's
// modules/idempotency). Runs with the retention purge, every minute, in batches so no statement holds many locks.
import { Prisma, utcTimestamp, type Db } from '@svc/db';
import { IDEMPOTENCY_KEY_TTL_MS } from '@svc/domain';
import { deleteInBatches } from './batched-delete';

export const IDEMPOTENCY_SWEEP_BATCH = 5000;

/** Deletes every key older than 24 h at `now`; returns how many went. */
export async function sweepIdempotencyKeys(prisma: Db, now: Date, batchSize = IDEMPOTENCY_SWEEP_BATCH): Promise<number> {
  const cutoff = utcTimestamp(new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS));
  return deleteInBatches(batchSize, (limit) =>
    prisma.$executeRaw(Prisma.sql`
      DELETE FROM idempotency_keys WHERE ctid IN (
        SELECT ctid FROM idempotency_keys WHERE created_at <= ${cutoff} LIMIT ${limit})`),
  );
}
