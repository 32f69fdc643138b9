// The caller's role as committed now, inside the transaction of a change that depends on it. A request is authorized
// with the role read when it started; a demotion or a removal committed since then would otherwise not stop it.
import type { Tx } from '@svc/db';
import type { Role } from '@svc/scopes';
import type { Principal } from '../../auth/principal';

/**
 * The principal's membership role, its row share-locked until the transaction ends (undefined: no longer a member).
 * A role change (UPDATE) or a removal (DELETE) running at the same time either waits for this transaction, and then
 * undoes what it wrote as it undoes what was there before, or committed first, and the caller sees its result here.
 */
export async function lockOwnRole(tx: Pick<Tx, '$queryRaw'>, principal: Pick<Principal, 'organizationId' | 'userId'>): Promise<Role | undefined> {
  const rows = await tx.$queryRaw<Array<{ role: string }>>`
    SELECT role::text AS role FROM memberships
    WHERE organization_id = ${principal.organizationId} AND user_id = ${principal.userId}
    FOR SHARE`;
  return rows[0]?.role as Role | undefined;
}
