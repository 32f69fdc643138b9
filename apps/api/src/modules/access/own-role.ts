// The caller's role as committed now, inside the transaction of a change that depends on it. A request is authorized
// with the role read when it started; a demotion or a removal committed since then would otherwise not stop it.
//
// Lock order, so that these re-checks cannot deadlock with one another or with a role change (which holds the
// memberships, then disables its member's routes and writes its audit entry, a foreign key to the organization's
// row): the organization's row first, FOR NO KEY UPDATE and never FOR UPDATE (organization-lock.ts; it does not hold
// up the organization's inserts); then memberships, several of them in user-id order; then the rows the change
// writes (a subscription, a project, an assessment).
import { Prisma, type Tx } from '@svc/db';
import { effectiveKeyScopes, roleBundle, type Role, type Scope } from '@svc/scopes';
import { forbidden } from '../../http/errors';
import type { Principal } from '../../auth/principal';

/**
 * The options of a change's transaction that re-checks the caller first: it waits there, as the single statement
 * it often was before did, for whatever holds the rows it re-checks (an organization's deletion holds every
 * membership; a project's or an assessment's deletion its row and, through the cascade, its grants), for as long as
 * such a deletion may run (DELETION_TRANSACTION). With Prisma's default of 5 s the change answered 503 ("the database
 * is unavailable") after such a wait, where it should answer 404 for what is gone (recheck-waits.test.ts).
 */
export const RECHECKED_TRANSACTION = { timeout: 10 * 60 * 1000 } as const;

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

/**
 * For a change the principal makes to another member, or gives them: both memberships' roles as committed now, both
 * rows locked in `mode` until the transaction ends (NO KEY UPDATE when the member's row is changed: the caller's own
 * row is then locked so too, which only makes the caller's other changes wait; SHARE to keep both as they are).
 * One statement locks them in user-id order, so two such changes at once (two members changing each other) do not
 * deadlock: the second waits for the first and then sees its result (undefined: no longer a member).
 */
export async function lockOwnRoleAndMember(
  tx: Pick<Tx, '$queryRaw'>,
  principal: Pick<Principal, 'organizationId' | 'userId'>,
  userId: string,
  mode: 'NO KEY UPDATE' | 'SHARE',
): Promise<{ own: Role | undefined; member: Role | undefined }> {
  const rows = await tx.$queryRaw<Array<{ user_id: string; role: string }>>`
    SELECT user_id, role::text AS role FROM memberships
    WHERE organization_id = ${principal.organizationId} AND user_id IN (${principal.userId}, ${userId})
    ORDER BY user_id
    FOR ${Prisma.raw(mode)}`;
  const roleOf = (id: string) => rows.find((r) => r.user_id === id)?.role as Role | undefined;
  return { own: roleOf(principal.userId), member: roleOf(userId) };
}

/**
 * The role as committed now (`own`, from lockOwnRole or lockOwnRoleAndMember) still carries `scope`, or a 403 that
 * says so: `action` names what the request was doing ("Adding team members").
 */
export function requireCommittedScope(own: Role | undefined, scope: Scope, action: string): Role {
  if (!own || !roleBundle(own).has(scope)) {
    throw forbidden(`${action} needs a role you no longer hold${own ? ` (yours is now ${own})` : ''}.`);
  }
  return own;
}

/**
 * lockOwnRole and requireCommittedScope in one, inside the transaction of a change that needs `scope`: the caller's
 * role as committed now still carries it, their membership share-locked until the commit.
 */
export async function requireStillHolds(tx: Pick<Tx, '$queryRaw'>, principal: Pick<Principal, 'organizationId' | 'userId'>, scope: Scope, action: string): Promise<Role> {
  return requireCommittedScope(await lockOwnRole(tx, principal), scope, action);
}

/**
 * requireStillHolds, answering the principal as committed: its role now, and its scopes cut to that role's bundle (as a
 * demoted creator's keys are cut, effectiveKeyScopes), for the checks a change makes beyond its route's scope (a
 * project's deletion asks for assessments:delete and webhooks:delete when it has assessments or subscriptions).
 */
export async function principalAsCommitted(tx: Pick<Tx, '$queryRaw'>, principal: Principal, scope: Scope, action: string): Promise<Principal> {
  const role = await requireStillHolds(tx, principal, scope, action);
  return { ...principal, role, scopes: new Set(effectiveKeyScopes(principal.scopes, role)) };
}
