// Memberships of the caller's organization. The role ladder: nobody grants a role above their own or touches
// someone whose role is above their own; the owner role moves only through transfer-ownership, so an
// organization always keeps exactly one owner.
import { roleRank, type Role } from '@svc/scopes';
import { lockUserForMembershipChange, organizationOf, scopedTo, type Membership, type Scoped, type Tx, type User } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { invalidateCachedPrincipals } from '../../auth/auth-epochs';
import { badRequest, conflict, forbidden, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import type { RateLimiters } from '../../http/rate-limit';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import { confirmSensitiveChange } from '../auth/reauthentication';
import { disableRoutesConfiguredBy } from '../access/event-routing';
import { lockOwnRoleAndMember, RECHECKED_TRANSACTION, requireCommittedScope } from '../access/own-role';

type MembershipWithUser = Membership & { user: Pick<User, 'email' | 'name' | 'status'> };

export function presentMember(m: MembershipWithUser) {
  return {
    user_id: m.userId,
    email: m.user.email,
    name: m.user.name,
    status: m.user.status,
    role: m.role,
    joined_at: m.createdAt.toISOString(),
  };
}

const userInfo = { user: { select: { email: true, name: true, status: true } } } as const;

export async function listMembers(deps: AppDeps, principal: Principal, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).membership.findMany({
    ...args,
    where: args.where,
    include: userInfo,
  });
  return toPage(rows, query, presentMember);
}

async function findMember(deps: AppDeps, principal: Principal, userId: string): Promise<MembershipWithUser> {
  const m = await scopedTo(deps.prisma, principal).membership.findFirst({
    where: { userId },
    include: userInfo,
  });
  if (!m) throw notFound('Member');
  return m;
}

/**
 * The member's e-mail and name, their membership locked (FOR SHARE) until the transaction ends, or a 404. For
 * what is given to a member (a team membership, a grant): a concurrent removal from the organization waits and
 * then takes it along, or went first and this is a 404, so nothing is left to somebody who is no longer a member.
 */
export async function holdMember(tx: Scoped<Tx>, userId: string): Promise<Pick<User, 'email' | 'name'>> {
  // Raw SQL is not scoped: the organization is named here.
  const [member] = await tx.$queryRaw<Array<Pick<User, 'email' | 'name'>>>`
    SELECT u.email, u.name FROM memberships m JOIN users u ON u.id = m.user_id
     WHERE m.organization_id = ${organizationOf(tx)} AND m.user_id = ${userId}
       FOR SHARE OF m`;
  if (!member) throw notFound('Member');
  return member;
}

/**
 * The pending invitations a member sent stop with their right to send them (demoted below admin, or removed): a
 * pending link would otherwise let them, or a second address of theirs, join again with the role they lost. Runs in
 * the transaction of the change; an accept that comes later finds no invitation (400). Answers how many went (the
 * audit entry of the change counts them as `invitations_revoked`).
 */
async function revokeInvitationsSentBy(tx: Scoped<Tx>, userId: string): Promise<number> {
  const { count } = await tx.invitation.deleteMany({ where: { invitedById: userId, acceptedAt: null } });
  return count;
}

function refuseIfAbove(own: Role, target: Role, action: string): void {
  if (roleRank(target) > roleRank(own)) {
    throw forbidden(`You cannot ${action} a member whose role (${target}) is above your own (${own}).`);
  }
}

function refuseGrantAbove(own: Role, granted: Role): void {
  if (roleRank(granted) > roleRank(own)) {
    throw forbidden(`You cannot grant a role (${granted}) above your own (${own}).`);
  }
}

type MemberChange = { scope: 'members:change_role'; role: Role } | { scope: 'members:remove' };

/**
 * The checks above, against both roles as committed now (own-role.ts), both memberships locked until the commit.
 * The request was authorized with the roles read when it started: a caller demoted or removed while it ran (a
 * password check takes a while), or a member raised above them meanwhile, is refused instead of acting on a right
 * that has gone. The member gone meanwhile is a 404. Answers the member's role as committed (locked until the commit).
 */
async function requireStillMayChange(tx: Pick<Tx, '$queryRaw'>, principal: Principal, userId: string, change: MemberChange): Promise<Role> {
  const locked = await lockOwnRoleAndMember(tx, principal, userId, 'NO KEY UPDATE');
  const member = locked.member;
  if (!member) throw notFound('Member');
  const own = requireCommittedScope(locked.own, change.scope, change.scope === 'members:remove' ? 'Removing members' : "Changing members' roles");
  refuseIfAbove(own, member, change.scope === 'members:remove' ? 'remove' : 'change the role of');
  if (change.scope === 'members:change_role') refuseGrantAbove(own, change.role);
  return member;
}

export async function changeRole(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  userId: string,
  input: { role: Role; current_password?: string },
  meta: RequestMeta,
) {
  const target = await findMember(deps, principal, userId);
  refuseIfAbove(principal.role, target.role as Role, 'change the role of');
  if (input.role === 'owner') {
    throw badRequest('The owner role can only be given by transferring ownership (POST /organization/transfer-ownership).');
  }
  refuseGrantAbove(principal.role, input.role);
  if (target.role === 'owner') {
    throw badRequest('The organization must keep its owner: transfer ownership before changing the owner\'s role.');
  }
  // Raising a role is sudo mode (an accomplice's account gains what a stolen session has); lowering one never waits
  // for a password: it is how access is taken away in a hurry.
  const raising = roleRank(input.role) > roleRank(target.role);
  if (raising) {
    await confirmSensitiveChange(deps, limiters, principal, input.current_password, 'role_raise', meta);
  }
  const now = deps.clock.now();
  const changedFrom = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // The member's role as committed, their row locked: what this change replaces (a change made meanwhile by someone
    // else included), and never the owner's (ownership may have been transferred to them meanwhile).
    const previousRole = await requireStillMayChange(tx, principal, userId, { scope: 'members:change_role', role: input.role });
    if (previousRole === 'owner') {
      throw badRequest('The organization must keep its owner: transfer ownership before changing the owner\'s role.');
    }
    // A lowering as read that raises the role as committed (lowered meanwhile by someone else) was not asked for
    // the password; it is sent again, and then it is.
    if (!raising && roleRank(input.role) > roleRank(previousRole)) {
      throw conflict(`The member's role changed meanwhile (it is now ${previousRole}): making them ${input.role} raises it, which needs your password; send the change again.`);
    }
    // The row locked above (by user: a membership removed and made again meanwhile has a new id, and is the one changed).
    const { count } = await tx.membership.updateMany({ where: { userId }, data: { role: input.role } });
    if (count !== 1) throw notFound('Member');
    // Routes of events they configured stop with the organization-wide role (access/event-routing.ts), and so do
    // the invitations they sent: below admin they could not send them (members:invite).
    let invitationsRevoked = 0;
    if (roleRank(input.role) < roleRank('admin')) {
      await disableRoutesConfiguredBy(tx, principal, meta, userId, now);
      invitationsRevoked = await revokeInvitationsSentBy(tx, userId);
    }
    if (previousRole !== input.role) {
      await recordAs(tx, principal, meta, now, {
        action: 'member.role_changed',
        target: { type: 'user', id: userId },
        metadata: { email: target.user.email, previous_role: previousRole, role: input.role, invitations_revoked: invitationsRevoked },
      });
    }
    return previousRole;
  }, RECHECKED_TRANSACTION);
  if (changedFrom !== input.role) await invalidateCachedPrincipals(deps, { organizationIds: [principal.organizationId] });
  return presentMember({ ...target, role: input.role });
}

/**
 * Removes a member: the membership, their team memberships and direct grants in this organization go, and their
 * sessions and API keys of this organization are revoked, all in one transaction.
 */
export async function removeMember(deps: AppDeps, principal: Principal, userId: string, meta: RequestMeta): Promise<void> {
  const target = await findMember(deps, principal, userId);
  refuseIfAbove(principal.role, target.role as Role, 'remove');
  if (target.role === 'owner') {
    throw badRequest('The owner cannot be removed: transfer ownership first.');
  }
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // The member's row first (@svc/db user-locks.ts): a sign-in under way either commits first, and its session is
    // revoked below, or finds the membership gone; never a session left behind that would work again if they rejoined.
    await lockUserForMembershipChange(tx, userId);
    await requireStillMayChange(tx, principal, userId, { scope: 'members:remove' });
    const { count } = await tx.membership.deleteMany({ where: { id: target.id, role: { not: 'owner' } } });
    if (count !== 1) throw notFound('Member');
    const teamMemberships = await tx.teamMember.deleteMany({ where: { userId } });
    const grants = await tx.accessGrant.deleteMany({ where: { userId } });
    await disableRoutesConfiguredBy(tx, principal, meta, userId, now);
    const invitationsRevoked = await revokeInvitationsSentBy(tx, userId);
    await tx.session.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
    const keys = await tx.apiKey.findMany({
      where: { userId, revokedAt: null },
      select: { id: true, name: true, displayPrefix: true },
    });
    await tx.apiKey.updateMany({
      where: { userId, revokedAt: null },
      data: { revokedAt: now, revokedReason: 'member_removed' },
    });
    await recordAs(tx, principal, meta, now, [
      {
        action: 'member.removed',
        target: { type: 'user', id: userId },
        metadata: {
          email: target.user.email,
          role: target.role,
          api_keys_revoked: keys.length,
          invitations_revoked: invitationsRevoked,
          team_memberships_removed: teamMemberships.count,
          grants_removed: grants.count,
        },
      },
      ...keys.map((key) => ({
        action: 'api_key.revoked' as const,
        target: { type: 'api_key', id: key.id },
        metadata: { name: key.name, prefix: key.displayPrefix, reason: 'member_removed', owner_user_id: userId },
      })),
    ]);
  }, RECHECKED_TRANSACTION);
  await invalidateCachedPrincipals(deps, { organizationIds: [principal.organizationId] });
}
