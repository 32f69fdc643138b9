// E-mail invitations. The token travels only in the e-mailed link; the database keeps its SHA-256. Accepting
// proves control of the address: a new address becomes an active user, an existing user proves their password.
import bcrypt from 'bcrypt';
import { roleBundle, roleRank, type Role } from '@svc/scopes';
import { isUniqueViolation, scopedTo, type Invitation, type Tx, type User } from '@svc/db';
import { oneLine } from '@svc/domain';
import { mailErrorForLog } from '@svc/mail';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { HttpError, badRequest, conflict, forbidden, mailNotSent, notFound, unauthorized } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { consumeOrThrow, type RateLimiters } from '../../http/rate-limit';
import { emailLimiterKey, recordLoginFailure } from '../auth/login';
import { confirmSensitiveChange } from '../auth/reauthentication';
import { password as passwordRules } from '../../http/validate';
import { randomToken, sha256Hex } from '../../lib/crypto';
import { newId } from '@svc/db';
import { recordAs, recordInOrganizations, userActor, type Acting, type RequestMeta } from '../audit/audit.context';
import { lockOwnRole, RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import type { InTurn } from '../../http/organization-turns';

export const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

function statusOf(inv: Invitation, now: Date): 'pending' | 'accepted' | 'expired' {
  if (inv.acceptedAt) return 'accepted';
  return inv.expiresAt <= now ? 'expired' : 'pending';
}

export function presentInvitation(inv: Invitation, now: Date) {
  return {
    id: inv.id,
    email: inv.email,
    role: inv.role,
    status: statusOf(inv, now),
    invited_by_id: inv.invitedById,
    expires_at: inv.expiresAt.toISOString(),
    accepted_at: inv.acceptedAt?.toISOString() ?? null,
    created_at: inv.createdAt.toISOString(),
  };
}

const emailFilter = (address: string) => ({ equals: address, mode: 'insensitive' as const });

/** What the audit log says of an invitation: its address and role, never its token (nor the token's hash). */
function invitationEvent(inv: Invitation, action: 'invitation.created' | 'invitation.revoked', extra: Record<string, unknown> = {}) {
  return { action, target: { type: 'invitation', id: inv.id }, metadata: { email: inv.email, role: inv.role, ...extra } };
}

/**
 * Deletes the invitation while nobody has accepted it, recording `invitation.revoked` (with why) in the same
 * transaction; false when it was accepted or revoked meanwhile (nothing is recorded then).
 */
async function deletePendingInvitation(
  deps: AppDeps,
  { principal, meta }: Acting,
  inv: Invitation,
  reason: 'user' | 'mail_failed',
): Promise<boolean> {
  const now = deps.clock.now();
  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // A revocation someone asked for, against their role as committed (a demoted inviter's own failed mail is not).
    if (reason === 'user') await requireStillHolds(tx, principal, 'members:invite', 'Revoking invitations');
    const { count } = await tx.invitation.deleteMany({ where: { id: inv.id, acceptedAt: null } });
    if (count === 1) await recordAs(tx, principal, meta, now, invitationEvent(inv, 'invitation.revoked', { reason }));
    return count === 1;
  }, RECHECKED_TRANSACTION);
}

/**
 * The checks above, against the inviter's role as committed now (lockOwnRole): demoted or removed while the request
 * ran (its password check takes a while), the inviter's invitation would outlive the change that revokes theirs
 * (members.service.ts revokeInvitationsSentBy runs in the demotion's transaction and sees only committed ones).
 */
async function requireStillMayInvite(tx: Pick<Tx, '$queryRaw'>, principal: Principal, role: Role): Promise<void> {
  const current = await lockOwnRole(tx, principal);
  if (!current || !roleBundle(current).has('members:invite') || roleRank(role) > roleRank(current)) {
    throw forbidden(`Inviting with the role ${role} needs a role you no longer hold${current ? ` (yours is now ${current})` : ''}.`);
  }
}

export async function createInvitation(
  deps: AppDeps,
  limiters: RateLimiters,
  { principal, meta }: Acting,
  input: { email: string; role: Role; current_password?: string },
) {
  if (input.role === 'owner') {
    throw badRequest('Nobody can be invited as owner: invite them with another role, then transfer ownership.');
  }
  if (roleRank(input.role) > roleRank(principal.role)) {
    throw forbidden(`You cannot invite with a role (${input.role}) above your own (${principal.role}).`);
  }
  const db = scopedTo(deps.prisma, principal);
  const now = deps.clock.now();
  const existingMember = await db.membership.findFirst({ where: { user: { email: emailFilter(input.email) } } });
  if (existingMember) throw conflict('This e-mail address already belongs to a member of the organization.');
  const pending = await db.invitation.findFirst({
    where: { email: emailFilter(input.email), acceptedAt: null, expiresAt: { gt: now } },
  });
  if (pending) throw conflict('An invitation for this e-mail address is already pending; revoke it to send a new one.');
  // An invitation makes an account of its own in the organization, one a password reset of the inviter's does not end.
  await confirmSensitiveChange(deps, limiters, principal, input.current_password, 'invitation_create', meta);

  const token = randomToken(32);
  const [invitation, org] = await Promise.all([
    db.$transaction(async (tx) => {
      await requireStillMayInvite(tx, principal, input.role);
      const created = await tx.invitation.create({
        data: {
          id: newId('inv'),
          organizationId: principal.organizationId,
          email: input.email,
          role: input.role,
          tokenHash: sha256Hex(token),
          invitedById: principal.userId,
          expiresAt: new Date(now.getTime() + INVITATION_TTL_MS),
        },
      });
      await recordAs(tx, principal, meta, now, invitationEvent(created, 'invitation.created'));
      return created;
    }, RECHECKED_TRANSACTION),
    deps.prisma.organization.findUniqueOrThrow({ where: { id: principal.organizationId }, select: { name: true } }),
  ]);
  const link = `${deps.config.publicBaseUrl}/accept-invite?token=${encodeURIComponent(token)}`;
  // A name stored before names were one line must write no line of its own in a mail to an outside address.
  const orgName = oneLine(org.name);
  try {
    await deps.mailer.send({
      to: input.email,
      subject: `You are invited to join ${orgName}`,
      text:
        `You have been invited to join the organization "${orgName}" as ${input.role}.\n\n` +
        `Accept the invitation: ${link}\n\nThe link expires on ${invitation.expiresAt.toISOString()}.\n`,
    });
  } catch (err) {
    // An invitation nobody received is useless and would block a retry as "already pending": it goes, and the
    // audit log says why rather than keeping an `invitation.created` that nothing followed.
    await deletePendingInvitation(deps, { principal, meta }, invitation, 'mail_failed').catch((cause) =>
      deps.logger.error('Revoking an undelivered invitation failed', { invitation_id: invitation.id, error: String(cause) }),
    );
    // The mail server's refusal, without the address it may quote; the client may retry (503, as a report grant's).
    deps.logger.warn('Mailing an invitation failed; the invitation is revoked', { invitation_id: invitation.id, error: mailErrorForLog(err, input.email) });
    throw mailNotSent(err);
  }
  return presentInvitation(invitation, now);
}

export async function listInvitations(deps: AppDeps, principal: Principal, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).invitation.findMany({ ...args, where: args.where });
  const now = deps.clock.now();
  return toPage(rows, query, (inv) => presentInvitation(inv, now));
}

export async function revokeInvitation(deps: AppDeps, acting: Acting, id: string): Promise<void> {
  const inv = await scopedTo(deps.prisma, acting.principal).invitation.findFirst({ where: { id } });
  if (!inv) throw notFound('Invitation');
  if (inv.acceptedAt) throw conflict('The invitation has already been accepted; remove the member instead.');
  // Accepted or revoked since it was read: only the request that deleted it says so in the audit log.
  if (!(await deletePendingInvitation(deps, acting, inv, 'user'))) throw conflict('The invitation was accepted or revoked meanwhile.');
}

const INVALID_TOKEN = 'The invitation link is invalid, expired or already used.';

export async function acceptInvitation(
  deps: AppDeps,
  limiters: RateLimiters,
  input: { token: string; name?: string; password?: string },
  meta: RequestMeta,
  turnOf: (organizationId: string) => InTurn = () => (work) => work(),
) {
  const now = deps.clock.now();
  // Unscoped: the token is the only thing the invitee has; it names the organization.
  const inv = await deps.prisma.invitation.findUnique({ where: { tokenHash: sha256Hex(input.token) } });
  if (!inv || inv.acceptedAt || inv.expiresAt <= now) throw badRequest(INVALID_TOKEN);

  const user = await deps.prisma.user.findFirst({ where: { email: emailFilter(inv.email) } });
  let newUser: NewInvitedUser | undefined;
  let replacementPasswordHash: string | undefined;
  if (user) {
    const member = await scopedTo(deps.prisma, inv).membership.findFirst({ where: { userId: user.id } });
    if (member) throw conflict('You are already a member of this organization.');
    if (user.status === 'pending') {
      // Never verified: the mailed invitation proves the address, the pending account's password proves nothing
      // (anyone may have signed up with the address first). The password given now becomes the account's.
      if (input.password === undefined) throw badRequest('Choose a password (`password`) to activate your account.');
      replacementPasswordHash = await hashNewPassword(deps, input.password);
    } else {
      if (input.password === undefined) throw badRequest('An account with this e-mail exists: send its password to accept.');
      // A password check like the login's, so counted with the login's per-e-mail attempts (not a second place to guess).
      // A wrong one is recorded like a failed sign-in, in the account's own organizations (not the inviting one).
      await consumeOrThrow(limiters.login, emailLimiterKey(user.email));
      if (!user.passwordHash || !(await bcrypt.compare(input.password, user.passwordHash))) {
        await recordLoginFailure(deps, user, meta, user.passwordHash ? 'invalid_password' : 'no_password', 'invitation_accept');
        throw unauthorized('Wrong password for the existing account.');
      }
    }
  } else {
    if (input.password === undefined) throw badRequest('Choose a password (`password`) to create your account.');
    newUser = { passwordHash: await hashNewPassword(deps, input.password), name: input.name ?? inv.email.split('@')[0] };
  }

  return joinInvitedOrganization(deps, inv, user ? { existing: user, replacementPasswordHash } : { create: newUser! }, meta, turnOf(inv.organizationId));
}

/** The hash of a password chosen now, or 400 when the signup's rules refuse it. */
async function hashNewPassword(deps: AppDeps, password: string): Promise<string> {
  const { error } = passwordRules().validate(password);
  if (error) throw badRequest(`Invalid body: ${error.details[0].message.replace(/"/g, "'")}.`);
  return bcrypt.hash(password, deps.config.bcryptRounds);
}

/** A user created by accepting an invitation: null passwordHash for one who signs in through an OAuth provider. */
export interface NewInvitedUser {
  name: string;
  passwordHash: string | null;
}

/**
 * Accepts `inv` for someone who has proven control of its e-mail address (the mailed link, or a provider that
 * verified the address): claims the invitation and, in the same transaction, makes the existing user (activated
 * if still pending) or a new active user a member of the organization with the invited role, and records
 * `invitation.accepted` in that organization with the user as actor (there is no principal yet). In RECHECKED_TRANSACTION:
 * the claim waits for whatever holds the invitation's row, its organization's deletion (the cascade) for as long as it runs,
 * keeping a connection: `inTurn`, the request's turn of the inviting organization (http/organization-turns.ts inTurnOf),
 * so that the holders of its tokens take no more of the pool than its members' writes.
 */
export async function joinInvitedOrganization(
  deps: Pick<AppDeps, 'prisma' | 'clock'>,
  inv: Invitation,
  account: { existing: User; replacementPasswordHash?: string } | { create: NewInvitedUser },
  meta: RequestMeta,
  inTurn: InTurn = (work) => work(),
) {
  const now = deps.clock.now();
  const user = 'existing' in account ? account.existing : undefined;
  const replacementPasswordHash = 'existing' in account ? account.replacementPasswordHash : undefined;
  try {
    // Scoped to the invitation's organization (users are global: they pass through).
    return await inTurn(() => scopedTo(deps.prisma, inv).$transaction(async (tx) => {
      if (user) {
        // The existing account as committed, its row locked until the membership commits (raw SQL: users are global).
        // A GDPR erasure of the account takes that row before it counts the account's memberships (apps/worker
        // erasure.ts): it either waits and then finds this membership, and the account stays, or committed first,
        // and the address is no longer the one whose password was checked: nothing joins then.
        // FOR NO KEY UPDATE, the lock the activation below takes: two accepts of one pending account at once, each
        // share-locking the row and then updating it, would deadlock.
        const [row] = await tx.$queryRaw<Array<{ email: string; status: string }>>`SELECT email, status::text AS status FROM users WHERE id = ${user.id} FOR NO KEY UPDATE`;
        if (!row || row.email !== user.email) throw conflict('The account changed while the invitation was accepted; try again.');
        // A password replaces only a pending account's: one verified since it was read keeps its own.
        if (replacementPasswordHash !== undefined && row.status !== 'pending') {
          throw conflict('The account changed while the invitation was accepted; try again.');
        }
      }
      // Claim the invitation first: of two concurrent accepts, only one gets it.
      const claimed = await tx.invitation.updateMany({
        where: { id: inv.id, acceptedAt: null, expiresAt: { gt: now } },
        data: { acceptedAt: now },
      });
      if (claimed.count !== 1) throw badRequest(INVALID_TOKEN);
      let userId: string;
      if (user) {
        userId = user.id;
        // The e-mailed link proves the address: a user still pending verification becomes active.
        if (user.status !== 'active') {
          await tx.user.update({
            where: { id: user.id },
            data: {
              status: 'active',
              emailVerifiedAt: user.emailVerifiedAt ?? now,
              ...(replacementPasswordHash !== undefined && { passwordHash: replacementPasswordHash }),
            },
          });
        }
      } else {
        const { name, passwordHash } = (account as { create: NewInvitedUser }).create;
        const created = await tx.user.create({
          data: { id: newId('usr'), email: inv.email, name, passwordHash, status: 'active', emailVerifiedAt: now },
        });
        userId = created.id;
      }
      await tx.membership.create({
        // At `now`, the instant of its invitation.accepted entry: a GDPR erasure's follow-up tells what a person
        // invited back did since from what was recorded before (apps/worker erasure.ts scrubReferences).
        data: { id: newId('mem'), organizationId: inv.organizationId, userId, role: inv.role, createdAt: now },
      });
      await recordInOrganizations(tx, [inv.organizationId], await userActor(tx, userId), meta, now, {
        action: 'invitation.accepted',
        target: { type: 'user', id: userId },
        metadata: { invitation_id: inv.id, role: inv.role, new_user: !user },
      });
      const org = await tx.organization.findUniqueOrThrow({ where: { id: inv.organizationId }, select: { id: true, name: true } });
      return { organization: { id: org.id, name: org.name }, user_id: userId, email: inv.email, role: inv.role, new_user: !user };
    }, RECHECKED_TRANSACTION));
  } catch (err) {
    if (err instanceof HttpError) throw err;
    // A concurrent signup with this address, or a concurrent accept of another invitation to this organization.
    if (isUniqueViolation(err)) throw conflict('The account or membership was created concurrently; sign in and retry.');
    throw err;
  }
}
