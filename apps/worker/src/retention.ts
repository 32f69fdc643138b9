// The retention purge at volume (DESIGN.md "Retention"; docs/performance.md "Retention at volume"). Deliveries (and, by
// cascade, their attempts) go 30 days after they reached a terminal state; an event goes once it is as old and no
// delivery references it any more. Every statement walks an index, a bounded batch at a time, so its cost per row
// does not grow with the table:
//   1. expired deliveries, oldest completion first, through webhook_deliveries(completed_at, id), resuming each batch
//      where the last one ended (keyset), so the dead index entries of earlier batches are not walked again;
//      the attempts go by ON DELETE CASCADE through webhook_attempts(delivery_id, number);
//   2. the events those deliveries belonged to, each checked through webhook_deliveries(event_id);
//   3. old events no delivery ever referenced (no subscription matched), through events(created_at, id), keyset too.
// A run stops when its time budget is spent and says so (`complete: false`); the next run carries on. Each batch
// is its own short transaction: nothing is locked for longer than one batch.
// With it (purgeSecurityNotices), security notices go 30 days after the change they were about, once sent or given
// up (next_attempt_at null): through security_notices(created_at), in batches.
import { Prisma, queryRows, utcTimestamp, type Db } from '@svc/db';
import { SECURITY_NOTICE_RETENTION_MS } from '@svc/domain';
import { deleteInBatches } from './batched-delete';

export interface RetentionOptions {
  cutoff: Date;
  /** Wall-clock time one run may take; checked between batches. */
  budgetMs: number;
  /** Rows per statement. */
  batchSize: number;
  /**
   * After each batch, rest this many times as long as the batch took (0: none). The purge then takes at most
   * 1 / (1 + ratio) of a PostgreSQL backend while it runs, leaving the rest to the deliveries it shares the
   * database with; the rest counts against the budget.
   */
  pauseRatio?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const sleepMs = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface PurgeResult {
  deliveries: number;
  events: number;
  /** False when the run stopped on its time budget with expired rows left: the next run continues. */
  complete: boolean;
}

interface Keyset {
  at: Date;
  id: string;
}

const EPOCH: Keyset = { at: new Date(0), id: '' };

/** Deletes one batch of expired deliveries after `from`; returns the events they referenced and where to resume. */
async function deleteExpiredDeliveries(db: Db, cutoff: Date, from: Keyset, batchSize: number) {
  const rows = await queryRows<{ event_id: string; completed_at: Date; id: string }>(
    db,
    Prisma.sql`
      WITH doomed AS (
        SELECT id FROM webhook_deliveries
        WHERE completed_at < ${utcTimestamp(cutoff)}
          AND completed_at >= ${utcTimestamp(from.at)}
          AND (completed_at, id) > (${utcTimestamp(from.at)}, ${from.id})
          AND status IN ('succeeded', 'failed')
        ORDER BY completed_at, id
        LIMIT ${batchSize}
        FOR UPDATE SKIP LOCKED
      )
      DELETE FROM webhook_deliveries d USING doomed WHERE d.id = doomed.id
      RETURNING d.event_id, d.completed_at AT TIME ZONE 'UTC' AS completed_at, d.id`,
    'retention_deliveries',
  );
  let last: Keyset | null = null;
  for (const row of rows) {
    if (!last || row.completed_at > last.at || (row.completed_at.getTime() === last.at.getTime() && row.id > last.id)) {
      last = { at: row.completed_at, id: row.id };
    }
  }
  return { deleted: rows.length, eventIds: [...new Set(rows.map((r) => r.event_id))], last };
}

/** Deletes those of `eventIds` that are older than the cutoff and that no delivery references any more. */
async function deleteUnreferencedEvents(db: Db, cutoff: Date, eventIds: string[]): Promise<number> {
  if (eventIds.length === 0) return 0;
  const rows = await queryRows<{ id: string }>(
    db,
    Prisma.sql`
      DELETE FROM events e
      WHERE e.id = ANY(${eventIds}::text[])
        AND e.created_at < ${utcTimestamp(cutoff)}
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
      RETURNING e.id`,
    'retention_events',
  );
  return rows.length;
}

/** One batch of the sweep over old events after `from`: deletes the unreferenced ones; returns where to resume. */
async function sweepOldEvents(db: Db, cutoff: Date, from: Keyset, batchSize: number) {
  const rows = await queryRows<{ deleted: number; last_at: Date | null; last_id: string | null; scanned: number }>(
    db,
    Prisma.sql`
      WITH scanned AS (
        SELECT id, created_at FROM events
        WHERE created_at < ${utcTimestamp(cutoff)}
          AND created_at >= ${utcTimestamp(from.at)}
          AND (created_at, id) > (${utcTimestamp(from.at)}, ${from.id})
        ORDER BY created_at, id
        LIMIT ${batchSize}
      ), gone AS (
        DELETE FROM events e USING scanned s
        WHERE e.id = s.id AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
        RETURNING e.id
      ), last AS (
        SELECT id, created_at FROM scanned ORDER BY created_at DESC, id DESC LIMIT 1
      )
      SELECT (SELECT count(*) FROM gone)::int AS deleted, (SELECT count(*) FROM scanned)::int AS scanned,
             (SELECT created_at AT TIME ZONE 'UTC' FROM last) AS last_at, (SELECT id FROM last) AS last_id`,
    'retention_event_sweep',
  );
  const row = rows[0];
  const last = row.last_at && row.last_id ? { at: row.last_at, id: row.last_id } : null;
  return { deleted: row.deleted, scanned: row.scanned, last };
}

/** Runs the three phases in batches until nothing is left or the budget is spent. */
export async function purgeExpired(db: Db, options: RetentionOptions): Promise<PurgeResult> {
  const now = options.now ?? Date.now;
  const deadline = now() + options.budgetMs;
  const result: PurgeResult = { deliveries: 0, events: 0, complete: false };

  const rest = async (batchStarted: number) => {
    const pause = Math.min((now() - batchStarted) * (options.pauseRatio ?? 0), deadline - now());
    if (pause > 0) await (options.sleep ?? sleepMs)(pause);
  };

  let from = EPOCH;
  for (;;) {
    if (now() >= deadline) return result;
    const started = now();
    const batch = await deleteExpiredDeliveries(db, options.cutoff, from, options.batchSize);
    result.deliveries += batch.deleted;
    result.events += await deleteUnreferencedEvents(db, options.cutoff, batch.eventIds);
    if (!batch.last || batch.deleted < options.batchSize) break;
    from = batch.last;
    await rest(started);
  }

  from = EPOCH;
  for (;;) {
    if (now() >= deadline) return result;
    const started = now();
    const batch = await sweepOldEvents(db, options.cutoff, from, options.batchSize);
    result.events += batch.deleted;
    if (!batch.last || batch.scanned < options.batchSize) break;
    from = batch.last;
    await rest(started);
  }
  result.complete = true;
  return result;
}

export const SECURITY_NOTICE_PURGE_BATCH = 5000;

/** Deletes the security notices older than 30 days at `now` that are sent or given up; returns how many went. */
export async function purgeSecurityNotices(db: Db, now: Date, batchSize = SECURITY_NOTICE_PURGE_BATCH): Promise<number> {
  const cutoff = utcTimestamp(new Date(now.getTime() - SECURITY_NOTICE_RETENTION_MS));
  return deleteInBatches(batchSize, (limit) =>
    db.$executeRaw(Prisma.sql`
      DELETE FROM security_notices WHERE id IN (
        SELECT id FROM security_notices WHERE created_at < ${cutoff} AND next_attempt_at IS NULL LIMIT ${limit})`),
  );
}
