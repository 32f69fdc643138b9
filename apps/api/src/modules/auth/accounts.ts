// Accounts: a user owning a new organization (signup, operator CLI, OAuth signup) and e-mail verification.
import bcrypt from 'bcrypt';
import { isUniqueViolation, newId, type Tx } from '@svc/db';
import { mailErrorForLog } from '@svc/mail';
import type { AppDeps } from '../../app-deps';
import { badRequest, conflict, mailNotSent } from '../../http/errors';
import { clientAddressKey, reserveGuess, type RateLimiters } from '../../http/rate-limit';
import { randomToken, sha256Hex } from '../../lib/crypto';
import type { RequestMeta } from '../audit/audit.context';
import type { CoreDeps } from './login';
import { lockUser } from './password-reset';

export const VERIFY_EMAIL_PURPOSE = 'verify_email';
export const VERIFY_EMAIL_TTL_MS = 24 * 3600 * 1000;

export interface NewOwnerInput {
  email: string;
  /** Absent for accounts that sign in only through an OAuth provider (no password hash is stored). */
  password?: string;
  name: string;
  organization_name: string;
}

export interface NewOwnerAccount {
  userId: string;
  organizationId: string;
  status: 'pending' | 'active';
  /** The raw e-mail verification token (pending accounts only); only its sha256 is stored. */
  verificationToken?: string;
}

/**
 * Creates a user who owns a new organization, in one transaction. Signup creates it `pending` with a
 * verification token; the operator CLI and OAuth signup (the provider verified the e-mail) create it `active`.
 * An e-mail already registered is a 409, except that a signup replaces an account still pending whose links have
 * all expired (removeAbandonedSignup).
 */
export async function createOwnerAccount(
  deps: CoreDeps,
  input: NewOwnerInput,
  options: { verified: boolean },
): Promise<NewOwnerAccount> {
  const existing = await deps.prisma.user.findUnique({ where: { email: input.email }, select: { id: true, status: true } });
  if (existing && (options.verified || existing.status !== 'pending')) throw alreadyRegistered();

  const passwordHash = input.password === undefined ? null : await bcrypt.hash(input.password, deps.config.bcryptRounds);
  const now = deps.clock.now();
  const userId = newId('usr');
  const organizationId = newId('org');
  const verificationToken = options.verified ? undefined : randomToken(32);
  try {
    await deps.prisma.$transaction(async (tx) => {
      if (existing) await removeAbandonedSignup(tx, existing.id, now);
      await tx.user.create({
        data: {
          id: userId,
          email: input.email,
          name: input.name,
          passwordHash,
          status: options.verified ? 'active' : 'pending',
          emailVerifiedAt: options.verified ? now : null,
        },
      });
      await tx.organization.create({ data: { id: organizationId, name: input.organization_name } });
      // Unscoped: the organization is being created here, with its owner.
      await tx.membership.create({ data: { id: newId('mem'), organizationId, userId, role: 'owner' } });
      if (verificationToken) {
        await tx.emailToken.create({
          data: {
            id: newId('etk'),
            userId,
            purpose: VERIFY_EMAIL_PURPOSE,
            tokenHash: sha256Hex(verificationToken),
            expiresAt: new Date(now.getTime() + VERIFY_EMAIL_TTL_MS),
          },
        });
      }
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw alreadyRegistered(); // lost a race with a concurrent signup
    throw err;
  }
  return { userId, organizationId, status: options.verified ? 'active' : 'pending', verificationToken };
}

const alreadyRegistered = () => conflict('An account with this e-mail address already exists.');

const invalidVerificationLink = () => badRequest('Invalid, expired or already used verification token.');

/** A verification link that can still be used: of that purpose, unused, not expired. */
function usableVerificationLink(row: { purpose: string; usedAt: Date | null; expiresAt: Date }, now: Date): boolean {
  return row.purpose === VERIFY_EMAIL_PURPOSE && !row.usedAt && row.expiresAt > now;
}

/** A pending account's row locked for its deletion (FOR UPDATE): what a verification or invitation waits on. */
async function lockForDeletion(tx: Pick<Tx, '$queryRaw'>, userId: string): Promise<{ status: string; email: string } | undefined> {
  const [row] = await tx.$queryRaw<Array<{ status: string; email: string }>>`
    SELECT status::text AS status, email FROM users WHERE id = ${userId} FOR UPDATE`;
  return row;
}

/**
 * Removes an account left pending whose verification links have all expired, with the organization its signup
 * made, so that a signup with its address can start afresh (new ids, nothing carried over). Refusing that signup
 * let anyone who signed up first with an address lock it out for good: a reset mails only active accounts, and an
 * invitation asked for the stranger's password. While a link is live the signup stays a 409: replacing the account
 * then would let a stranger put their own password under the link its owner is about to open. Nothing can have used
 * a pending account (it cannot sign in); it is locked and read again (verified meanwhile: 409).
 */
async function removeAbandonedSignup(tx: Tx, userId: string, now: Date): Promise<void> {
  const row = await lockForDeletion(tx, userId);
  if (row?.status !== 'pending') throw alreadyRegistered();
  const liveLinks = await tx.emailToken.count({ where: { userId, purpose: VERIFY_EMAIL_PURPOSE, usedAt: null, expiresAt: { gt: now } } });
  if (liveLinks > 0) throw conflict('An account with this e-mail address already exists. If it was never confirmed, signing up again is possible once its link has expired (24 hours after it was sent).');
  await deletePendingAccount(tx, userId);
}

/** A pending account (its row locked, read as pending) and the organization its signup made. */
async function deletePendingAccount(tx: Tx, userId: string): Promise<string[]> {
  const owned = await tx.membership.findMany({ where: { userId, role: 'owner' }, select: { organizationId: true } });
  // Only an organization of the signup alone: nobody else can be in it, but that is checked, not assumed.
  const alone = await tx.organization.findMany({ where: { id: { in: owned.map((m) => m.organizationId) }, memberships: { every: { userId } } }, select: { id: true } });
  await tx.organization.deleteMany({ where: { id: { in: alone.map((o) => o.id) } } });
  await tx.user.delete({ where: { id: userId } });
  return alone.map((o) => o.id);
}

/**
 * How long after "I did not sign up" a password signup with the address is refused: long enough that whoever keeps
 * signing up with someone else's address gets them no mail more often than an unopened link's 24 hours would.
 */
export const DECLINED_SIGNUP_HOLD_SECONDS = 24 * 3600;

/** The Redis key that holds an address declined (hashed: no addresses in Redis keys). */
export function declinedSignupKey(deps: Pick<AppDeps, 'config'>, email: string): string {
  return `${deps.config.redisPrefix}:signup-declined:${sha256Hex(email)}`;
}

/**
 * 409 for a password signup with an address its holder declined a signup for. GitHub, Google and invitations prove
 * the address, so they are not held. Redis unreachable: the signup goes on (logged), as the request limit does.
 */
async function refuseDeclinedAddress(deps: AppDeps, email: string): Promise<void> {
  let ttl: number;
  try {
    ttl = await deps.redis.ttl(declinedSignupKey(deps, email));
  } catch (err) {
    deps.logger.warn('Could not read whether the address declined a signup; signing up', { error: (err as Error).message });
    return;
  }
  if (ttl <= 0) return;
  const hours = Math.ceil(ttl / 3600);
  throw conflict(
    `The holder of this e-mail address removed a signup made with it ("I did not sign up"): signing up with it is possible again in ${hours} hour${hours === 1 ? '' : 's'}. ` +
      'Signing in with GitHub or Google, or accepting an invitation, proves the address and works now.',
  );
}

export async function signup(deps: AppDeps, input: NewOwnerInput) {
  await refuseDeclinedAddress(deps, input.email);
  const account = await createOwnerAccount(deps, input, { verified: false });
  const link = `${deps.config.publicBaseUrl}/verify-email?token=${encodeURIComponent(account.verificationToken!)}`;
  try {
    await deps.mailer.send({
      to: input.email,
      subject: 'Confirm your e-mail address',
      text:
        `Hello ${input.name},\n\n` +
        `confirm your e-mail address for the Security Assessment Service: open this link within 24 hours and enter the password you chose when you signed up:\n\n` +
        `${link}\n\nIf you did not sign up, someone else gave your address: open the link and choose "I did not sign up" to remove that account, ` +
        `or ignore this message. Never type a password someone else gave you there: without the password chosen at signup the link activates nothing.\n`,
    });
  } catch (err) {
    // Without the mail the account could never be activated: undo it so the person can simply sign up again.
    deps.logger.error('Could not send the verification e-mail; signup undone', { error: mailErrorForLog(err, input.email) });
    // Only while still pending: activated meanwhile (an invitation accepted while the mail server hung), it stays.
    const removed = await deps.prisma.user.deleteMany({ where: { id: account.userId, status: 'pending' } }).catch(() => ({ count: 0 }));
    if (removed.count === 1) await deps.prisma.organization.deleteMany({ where: { id: account.organizationId, memberships: { none: {} } } }).catch(() => undefined);
    throw mailNotSent(err);
  }
  return { user_id: account.userId, organization_id: account.organizationId, status: account.status };
}

/** The key of a verification link in the login limiter (its token's hash, as stored: no token in Redis). */
function verificationLimiterKey(tokenHash: string): string {
  return `verify:${tokenHash}`;
}

/**
 * Activates a pending account: the link proves the address, the password chosen at signup proves that whoever opens
 * it is the person who signed up. Without the password, anyone who signed up with someone else's address would get
 * an account that holder activates by opening the mail, with a password the stranger knows. A wrong password leaves
 * the link unused. An account activated meanwhile (an invitation, a provider sign-in) just spends the link.
 */
export async function verifyEmail(deps: AppDeps, limiters: RateLimiters, input: { token: string; password: string }, meta: RequestMeta) {
  const now = deps.clock.now();
  const tokenHash = sha256Hex(input.token);

  // bcrypt before the transaction, so no row lock waits for it; the hash it checked is compared again under the lock.
  const link = await deps.prisma.emailToken.findUnique({ where: { tokenHash }, include: { user: { select: { status: true, passwordHash: true } } } });
  if (!link || !usableVerificationLink(link, now)) throw invalidVerificationLink();
  const checkedHash = link.user.passwordHash;
  if (link.user.status === 'pending') {
    // A guess at the signup password, counted like a sign-in's (per client address) and per link, before bcrypt: the
    // link stays usable after a wrong one, so without a count it would take guesses (and bcrypt time) without end.
    const guess = await reserveGuess(limiters.login, [clientAddressKey(meta.ip), verificationLimiterKey(tokenHash)]);
    if (!(checkedHash && (await bcrypt.compare(input.password, checkedHash)))) {
      throw badRequest('The password is not the one chosen at signup. The link stays valid until it expires.');
    }
    await guess.refund();
  }

  await deps.prisma.$transaction(async (tx) => {
    const row = await tx.emailToken.findUnique({ where: { tokenHash } });
    if (!row || !usableVerificationLink(row, now)) throw invalidVerificationLink();
    // The user's row first, as a signup taking the pending account over locks it (then spends its links): the other
    // order deadlocks against it.
    const user = await lockUser(tx, row.userId);
    if (!user) throw invalidVerificationLink();
    if (user.status === 'pending' && user.passwordHash !== checkedHash) {
      throw conflict('The account changed while it was being verified; open the link again.');
    }
    // Claimed with a condition, so two concurrent uses of one token cannot both succeed.
    const claimed = await tx.emailToken.updateMany({ where: { id: row.id, usedAt: null }, data: { usedAt: now } });
    if (claimed.count !== 1) throw invalidVerificationLink();
    await tx.user.updateMany({ where: { id: row.userId, status: 'pending' }, data: { status: 'active', emailVerifiedAt: now } });
  });
  return { status: 'active' as const };
}

/**
 * "I did not sign up": the holder of the address, proven by the link, removes a signup someone made with it (the
 * account, still pending, and the organization it made), and password signups with the address are refused for
 * DECLINED_SIGNUP_HOLD_SECONDS (whoever made it would otherwise sign up again at once, and mail the holder again).
 * Spent or expired links, and accounts already active, are refused (400): only a signup nobody verified.
 */
export async function declineSignup(deps: AppDeps, token: string) {
  const now = deps.clock.now();
  let removed: { user_id: string; organization_ids: string[] } | undefined;
  await deps.prisma.$transaction(async (tx) => {
    const row = await tx.emailToken.findUnique({ where: { tokenHash: sha256Hex(token) } });
    if (!row || !usableVerificationLink(row, now)) throw invalidVerificationLink();
    // A verification or invitation waits on this lock, then finds the account (and link) gone.
    const user = await lockForDeletion(tx, row.userId);
    if (user?.status !== 'pending') throw invalidVerificationLink();
    // Held before the account goes (Redis unreachable: 503, nothing removed), else whoever made it signs up again at once.
    await deps.redis.set(declinedSignupKey(deps, user.email), '1', 'EX', DECLINED_SIGNUP_HOLD_SECONDS);
    const organizations = await deletePendingAccount(tx, row.userId);
    removed = { user_id: row.userId, organization_ids: organizations };
  });
  // No audit entry: the organization it would go in is gone with the account. The operator's log keeps the fact.
  deps.logger.info('A pending signup was removed by the holder of its address ("I did not sign up")', removed);
  return { signup_removed: true as const };
}
