// Erasing an organization's or a project's history in bounded batches (issue 21). A single DELETE of the
// organization row would cascade through millions of deliveries, attempts and events in one statement, holding
// its locks (and a transaction's worth of WAL) for minutes. Instead the large tables go first, a batch of rows per
// statement through the foreign-key indexes, each statement its own short transaction; the row itself goes last,
// and its cascade then only meets the small tables (every foreign-key column is indexed:
// apps/api/test/foreign-key-indexes.test.ts). The request answers 204 once the data is gone (README "Retention at
// volume" has the measured time for an organization holding 100,000 deliveries).
import { Prisma, queryRows, type Db } from '@svc/db';

export const ERASE_BATCH = 5000;

/** What is erased with a project: its own id and its assessments' (stored objects are kept per both). */
export interface ErasedProject {
  organizationId: string;
  projectId: string;
  assessmentIds: string[];
}

/**
 * Removes the stored objects (uploaded source archives and extracted files) of a project and its assessments, once
 * per erased project and before its rows go. The storage module (DESIGN.md "Storage and outbound integrations")
 * deletes its objects here; until it exists there are no stored objects to remove.
 */
export async function removeStoredObjects(_project: ErasedProject): Promise<void> {}

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

async function projectsOf(db: Db, where: Prisma.Sql): Promise<ErasedProject[]> {
  const rows = await queryRows<{ id: string; organization_id: string; assessment_ids: string[] }>(
    db,
    Prisma.sql`SELECT p.id, p.organization_id,
                      ARRAY(SELECT a.id FROM assessments a WHERE a.project_id = p.id ORDER BY a.id) AS assessment_ids
               FROM projects p WHERE ${where} ORDER BY p.id`,
  );
  return rows.map((r) => ({ organizationId: r.organization_id, projectId: r.id, assessmentIds: r.assessment_ids }));
}

/** Deletes an organization's deliveries (with their attempts) and events in batches, and its stored objects. */
export async function eraseOrganizationHistory(db: Db, organizationId: string): Promise<void> {
  for (const project of await projectsOf(db, Prisma.sql`p.organization_id = ${organizationId}`)) await removeStoredObjects(project);
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
 * batches, and its stored objects. Its events stay with the organization's history (an organization-level
 * subscription may have received them) until retention removes them.
 */
export async function eraseProjectHistory(db: Db, organizationId: string, projectId: string): Promise<void> {
  for (const project of await projectsOf(db, Prisma.sql`p.id = ${projectId} AND p.organization_id = ${organizationId}`)) {
    await removeStoredObjects(project);
  }
  await deleteInBatches(
    db,
    deleted(Prisma.sql`DELETE FROM webhook_deliveries WHERE id IN (
      SELECT d.id FROM webhook_subscriptions s JOIN webhook_deliveries d ON d.subscription_id = s.id
      WHERE s.project_id = ${projectId} AND s.organization_id = ${organizationId} LIMIT ${ERASE_BATCH})`),
  );
}
