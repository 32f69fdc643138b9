// Erasing an organization's or a project's history in bounded batches (issue 21). A single DELETE of the
// organization row would cascade through millions of deliveries, attempts and events in one statement, holding
// its locks (and a transaction's worth of WAL) for minutes. Instead the large tables go first, a batch of rows per
// statement through the foreign-key indexes, each statement its own short transaction; the row itself goes last,
// and its cascade then only meets the small tables (every foreign-key column is indexed:
// apps/api/test/foreign-key-indexes.test.ts). The request answers 204 once the data is gone (docs/performance.md "Retention at
// volume" has the measured time for an organization holding 100,000 deliveries). Stored objects (uploaded source)
// are removed by the callers once the rows are gone (modules/source/stored-objects.ts).
import { Prisma, queryRows, type Db } from '@svc/db';

export const ERASE_BATCH = 5000;

/** Repeats `statement` (which deletes at most ERASE_BATCH rows and returns them) until a batch comes back short. */
async function deleteInBatches(db: Db, statement: Prisma.Sql): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await queryRows<{ n: number }>(db, statement);
    const deleted = rows[0]?.n ?? 0;
    total += deleted;
    if (deleted < ERASE_BATCH) return total;
  }
}

const deleted = (sql: Prisma.Sql) => Prisma.sql`WITH gone AS (${sql} RETURNING 1) SELECT count(*)::int AS n FROM gone`;

/** Deletes an organization's deliveries (with their attempts) and events in batches. */
export async function eraseOrganizationHistory(db: Db, organizationId: string): Promise<void> {
  await deleteInBatches(
    db,
    deleted(Prisma.sql`DELETE FROM webhook_deliveries WHERE id IN (
      SELECT id FROM webhook_deliveries WHERE organization_id = ${organizationId} LIMIT ${ERASE_BATCH})`),
  );
  await deleteInBatches(
    db,
    deleted(Prisma.sql`DELETE FROM events WHERE id IN (
      SELECT id FROM events WHERE organization_id = ${organizationId} LIMIT ${ERASE_BATCH})`),
  );
}

/**
 * Deletes the deliveries (with their attempts) of a project's subscriptions, project- and assessment-level, in
 * batches. Its events stay with the organization's history (an organization-level
 * subscription may have received them) until retention removes them. `liveToo` false: only the history of deleted
 * subscriptions (a caller who may not delete live ones: one created meanwhile makes the deletion refuse, and its
 * history must still be there then).
 */
export async function eraseProjectHistory(db: Db, organizationId: string, projectId: string, { liveToo }: { liveToo: boolean }): Promise<void> {
  const which = liveToo ? Prisma.empty : Prisma.sql`AND s.deleted_at IS NOT NULL`;
  await deleteInBatches(
    db,
    deleted(Prisma.sql`DELETE FROM webhook_deliveries WHERE id IN (
      SELECT d.id FROM webhook_subscriptions s JOIN webhook_deliveries d ON d.subscription_id = s.id
      WHERE s.project_id = ${projectId} AND s.organization_id = ${organizationId} ${which} LIMIT ${ERASE_BATCH})`),
  );
}
