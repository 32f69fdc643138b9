// The caller's organization: profile, rename, deletion (history in batches, then by cascade) and ownership transfer. The organization row
// itself is found by its id, the principal's organization; its memberships go through the scoped client.
import { retryingCollisions, scopedTo, type Organization, type Tx } from '@svc/db';
import type { Role } from '@svc/scopes';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { invalidateCachedPrincipals } from '../../auth/auth-epochs';
import { badRequest, conflict, notFound } from '../../http/errors';
import type { RateLimiters } from '../../http/rate-limit';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import { confirmSensitiveChange } from '../auth/reauthentication';
import { deleteStoredObjectsAfterDeletion } from '../source/stored-objects';
import { eraseOrganizationHistory } from '../history-deletion/history-deletion.service';
import { lockOrganization } from './organization-lock';
import { lockOwnRoleAndMember, RECHECKED_TRANSACTION, requireCommittedScope, requireStillHolds } from '../access/own-role';
import { DELETION_TRANSACTION } from '../webhooks/subscriptions.service';

export function presentOrganization(org: Organization) {
  return {
    id: org.id,
    name: org.name,
    created_at: org.createdAt.toISOString(),
    updated_at: org.updatedAt.toISOString(),
  };
}

async function loadOrganization(deps: AppDeps, principal: Principal): Promise<Organization> {
  const org = await deps.prisma.organization.findUnique({ where: { id: principal.organizationId } });
  if (!org) throw notFound('Organization');
  return org;
}

export async function getOrganization(deps: AppDeps, principal: Principal) {
  return presentOrganization(await loadOrganization(deps, principal));
}

/** Renames the organization; `organization.renamed` says from what, and a rename to the same name records nothing. */
export async function updateOrganization(deps: AppDeps, principal: Principal, input: { name: string }, meta: RequestMeta) {
  const now = deps.clock.now();
  const org = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await lockOrganization(tx, principal.organizationId);
    await requireStillHolds(tx, principal, 'org:update', 'Renaming the organization');
    const current = await tx.organization.findUniqueOrThrow({ where: { id: principal.organizationId } });
    if (current.name === input.name) return current;
    const renamed = await tx.organization.update({ where: { id: principal.organizationId }, data: { name: input.name } });
    await recordAs(tx, principal, meta, now, {
      action: 'organization.renamed',
      target: { type: 'organization', id: principal.organizationId },
      metadata: { previous_name: current.name, name: renamed.name },
    });
    return renamed;
  }, RECHECKED_TRANSACTION);
  return presentOrganization(org);
}

/**
 * The organization still has the name the caller confirmed, and the caller's role as committed still carries
 * org:delete: else a 409 or a 403. The organization's row is locked first, then the memberships (own-role.ts):
 * `memberships` 'own' share-locks the caller's; 'all' locks every one for the cascade that deletes them, in user-id
 * order as role changes take them (taken under the DELETE's lock of the organization's row instead, a wait for one
 * that a role change holds would deadlock with the audit entry it then writes).
 */
async function requireStillDeletable(tx: Tx, principal: Principal, confirmedName: string, memberships: 'own' | 'all'): Promise<void> {
  const [current] = await tx.$queryRaw<Array<{ name: string }>>`
    SELECT name FROM organizations WHERE id = ${principal.organizationId} FOR NO KEY UPDATE`;
  if (current?.name !== confirmedName) throw conflict('The organization changed while it was being deleted; re-fetch and retry.');
  if (memberships === 'own') {
    await requireStillHolds(tx, principal, 'org:delete', DELETING_ORGANIZATION);
    return;
  }
  const members = await tx.$queryRaw<Array<{ user_id: string; role: Role }>>`
    SELECT user_id, role::text AS role FROM memberships WHERE organization_id = ${principal.organizationId}
    ORDER BY user_id FOR UPDATE`;
  requireCommittedScope(members.find((m) => m.user_id === principal.userId)?.role, 'org:delete', DELETING_ORGANIZATION);
}

const DELETING_ORGANIZATION = 'Deleting the organization';

/**
 * Deletes the organization and everything it owns; users themselves remain. Its history (deliveries, attempts,
 * events, stored objects) goes first in bounded batches (erasure.service.ts), then the row, whose cascade is small.
 */
export async function deleteOrganization(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  input: { confirm: string; current_password?: string },
  meta: RequestMeta,
): Promise<void> {
  const org = await loadOrganization(deps, principal);
  if (input.confirm !== org.name) {
    throw badRequest('To delete the organization, send its exact name in the `confirm` field.');
  }
  await confirmSensitiveChange(deps, limiters, principal, input.current_password, 'organization_delete', meta);
  const db = scopedTo(deps.prisma, principal);
  // Checked again before any history goes (the password check takes a while: ownership may have been transferred
  // or the organization renamed meanwhile), and once more as the row goes, in the transaction that deletes it: a
  // change during the erasure itself leaves the history erased and the organization in place.
  await db.$transaction((tx) => requireStillDeletable(tx, principal, input.confirm, 'own'), RECHECKED_TRANSACTION);
  await eraseOrganizationHistory(deps.prisma, org.id);
  // The history is gone by now: a deadlock with a writer of the organization (one that takes a row the cascade
  // deletes before a membership) must not leave the organization behind, so the deletion runs again.
  await retryingCollisions(() =>
    db.$transaction(async (tx) => {
      await requireStillDeletable(tx, principal, input.confirm, 'all');
      await tx.organization.delete({ where: { id: org.id } });
    }, DELETION_TRANSACTION),
  );
  await invalidateCachedPrincipals(deps, { organizationIds: [org.id] });
  await deleteStoredObjectsAfterDeletion(deps, { organizationId: org.id });
}

/**
 * Makes an active member the owner; the previous owner becomes an admin. One transaction, and the demotion is
 * conditional on the caller still being the owner, so two concurrent transfers cannot both succeed.
 */
function refuseNewOwner<T extends { user: { status: string } }>(target: T | null): T {
  if (!target) throw notFound('Member');
  if (target.user.status !== 'active') throw badRequest('The new owner must be an active user.');
  return target;
}

export async function transferOwnership(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  input: { user_id: string; current_password?: string },
  meta: RequestMeta,
) {
  if (input.user_id === principal.userId) throw badRequest('You already own this organization.');
  // The new owner is checked before the password is asked (a transfer that would fail anyway does not ask), and
  // again in the transaction.
  const newOwner = { where: { userId: input.user_id }, include: { user: { select: { status: true } } } } as const;
  refuseNewOwner(await scopedTo(deps.prisma, principal).membership.findFirst(newOwner));
  await confirmSensitiveChange(deps, limiters, principal, input.current_password, 'ownership_transfer', meta);
  const now = deps.clock.now();
  const result = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // Both rows locked first, in the order every change between two members takes them (own-role.ts).
    await lockOwnRoleAndMember(tx, principal, input.user_id, 'NO KEY UPDATE');
    const target = refuseNewOwner(await tx.membership.findFirst(newOwner));
    const demoted = await tx.membership.updateMany({
      where: { userId: principal.userId, role: 'owner' },
      data: { role: 'admin' },
    });
    if (demoted.count !== 1) throw conflict('Only the current owner can transfer ownership.');
    await tx.membership.update({ where: { id: target.id }, data: { role: 'owner' } });
    await recordAs(tx, principal, meta, now, {
      action: 'organization.ownership_transferred',
      target: { type: 'user', id: input.user_id },
      metadata: { previous_owner_id: principal.userId, previous_owner_role: 'admin', new_owner_previous_role: target.role },
    });
    return { owner_id: input.user_id, previous_owner_id: principal.userId, previous_owner_role: 'admin' };
  }, RECHECKED_TRANSACTION);
  await invalidateCachedPrincipals(deps, { organizationIds: [principal.organizationId] });
  return result;
}
