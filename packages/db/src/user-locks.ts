// The order every change of who belongs where keeps: the person's users row first. A member's removal (the API's
// DELETE /members, a GDPR erasure) takes it FOR NO KEY UPDATE before deleting the membership; a sign-in holds it FOR
// SHARE while it chooses the organization and opens its session, so one of the two waits for the other.
import type { Tx } from './index';

/** Locks the person's row before their membership changes (until the transaction ends). */
export async function lockUserForMembershipChange(tx: Pick<Tx, '$queryRaw'>, userId: string): Promise<void> {
  await tx.$queryRaw`SELECT id FROM users WHERE id = ${userId} FOR NO KEY UPDATE`;
}
