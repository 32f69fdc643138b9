import type { Tx } from '@svc/db';
import { notFound } from '../../http/errors';

/**
 * Locks the organization's row until the transaction ends, so what the caller reads next is what its update
 * replaces: a concurrent change of the same settings waits, and the audit entry's previous value is not stale.
 * FOR NO KEY UPDATE, the lock an UPDATE of the row takes anyway: the foreign keys' FOR KEY SHARE (inserts of the
 * organization's rows, the findings batch's SKIP LOCKED) are not held up by it.
 */
export async function lockOrganization(tx: Tx, organizationId: string): Promise<void> {
  const rows = await tx.$queryRaw<unknown[]>`SELECT id FROM organizations WHERE id = ${organizationId} FOR NO KEY UPDATE`;
  if (rows.length === 0) throw notFound('Organization');
}
