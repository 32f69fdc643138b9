// Accounts: a user owning a new organization (signup, operator CLI, OAuth signup) and e-mail verification.
import bcrypt from 'bcrypt';
import { isUniqueViolation, newId, type Tx } from '@svc/db';
import { mailErrorForLog } from '@svc/mail';
import type { AppDeps } from '../../app-deps';
import { badRequest, conflict, serviceUnavailable } from '../../http/errors';
import { randomToken, sha256Hex } from '../../lib/crypto';
import type { CoreDeps } from './login';

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
 * An e-mail already registered is a 409, except that a signup takes over an account still pending
 * (replacePendingSignup).
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
  const verificationToken = options.verified ? undefined : randomToken(32);
  if (existing) return replacePendingSignup(deps, existing.id, input, passwordHash, verificationToken!, now);
  const userId = newId('usr');
  const organizationId = newId('org');
  try {
    await deps.prisma.$transaction(async (tx) => {
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
      if (verificationToken) await createVerificationToken(tx, userId, verificationToken, now);
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw alreadyRegistered(); // lost a race with a concurrent signup
    throw err;
  }
  return { userId, organizationId, status: options.verified ? 'active' : 'pending', verificationToken };
}

const alreadyRegistered = () => conflict('An account with this e-mail address already exists.');

async function createVerificationToken(tx: Tx, userId: string, token: string, now: Date): Promise<void> {
  await tx.emailToken.create({
    data: { id: newId('etk'), userId, purpose: VERIFY_EMAIL_PURPOSE, tokenHash: sha256Hex(token), expiresAt: new Date(now.getTime() + VERIFY_EMAIL_TTL_MS) },
  });
}

/**
 * A signup with the address of an account still pending takes it over: the password, name and organization name
 * given now replace the pending ones, and a new verification link replaces the earlier ones. Nothing was proven
 * about a pending account (its owner never opened the mail, or never asked for it: anyone may sign up with any
 * address), and nothing can have used it (a pending account cannot sign in). Refusing the signup instead let anyone
 * lock an address out for good by signing up with it first (the link expires, a reset mails only active accounts),
 * and an owner who then opened that first mail activated the account with the stranger's password.
 */
async function replacePendingSignup(
  deps: CoreDeps,
  userId: string,
  input: NewOwnerInput,
  passwordHash: string | null,
  verificationToken: string,
  now: Date,
): Promise<NewOwnerAccount> {
  const organizationId = await deps.prisma.$transaction(async (tx) => {
    // Locked and read again: verified (or taken over by an invitation) since the lookup, it is no longer pending.
    const [row] = await tx.$queryRaw<Array<{ status: string }>>`SELECT status::text AS status FROM users WHERE id = ${userId} FOR NO KEY UPDATE`;
    if (row?.status !== 'pending') throw alreadyRegistered();
    const owned = await tx.membership.findFirst({ where: { userId, role: 'owner' }, select: { organizationId: true } });
    if (!owned) throw alreadyRegistered();
    await tx.user.update({ where: { id: userId }, data: { passwordHash, name: input.name } });
    await tx.organization.update({ where: { id: owned.organizationId }, data: { name: input.organization_name } });
    await tx.emailToken.updateMany({ where: { userId, purpose: VERIFY_EMAIL_PURPOSE, usedAt: null }, data: { usedAt: now } });
    await createVerificationToken(tx, userId, verificationToken, now);
    return owned.organizationId;
  });
  return { userId, organizationId, status: 'pending', verificationToken };
}

export async function signup(deps: AppDeps, input: NewOwnerInput) {
  const account = await createOwnerAccount(deps, input, { verified: false });
  const link = `${deps.config.publicBaseUrl}/verify-email?token=${encodeURIComponent(account.verificationToken!)}`;
  try {
    await deps.mailer.send({
      to: input.email,
      subject: 'Confirm your e-mail address',
      text:
        `Hello ${input.name},\n\n` +
        `confirm your e-mail address for the Security Assessment Service by opening this link within 24 hours:\n\n` +
        `${link}\n\nIf you did not sign up, ignore this message and do not open the link: it would activate an account with a password someone else chose. Signing up yourself replaces it.\n`,
    });
  } catch (err) {
    // Without the mail the account could never be activated: undo it so the person can simply sign up again.
    deps.logger.error('Could not send the verification e-mail; signup undone', { error: mailErrorForLog(err, input.email) });
    await deps.prisma.organization.delete({ where: { id: account.organizationId } }).catch(() => undefined);
    await deps.prisma.user.delete({ where: { id: account.userId } }).catch(() => undefined);
    throw serviceUnavailable('the mail server');
  }
  return { user_id: account.userId, organization_id: account.organizationId, status: account.status };
}

export async function verifyEmail(deps: AppDeps, token: string) {
  const invalid = () => badRequest('Invalid, expired or already used verification token.');
  const now = deps.clock.now();
  await deps.prisma.$transaction(async (tx) => {
    const row = await tx.emailToken.findUnique({ where: { tokenHash: sha256Hex(token) } });
    if (!row || row.purpose !== VERIFY_EMAIL_PURPOSE || row.usedAt || row.expiresAt <= now) throw invalid();
    // The user's row first, as a signup taking the pending account over locks it (then spends its links): the other
    // order deadlocks against it.
    await tx.$queryRaw`SELECT id FROM users WHERE id = ${row.userId} FOR NO KEY UPDATE`;
    // Claimed with a condition, so two concurrent uses of one token cannot both succeed.
    const claimed = await tx.emailToken.updateMany({ where: { id: row.id, usedAt: null }, data: { usedAt: now } });
    if (claimed.count !== 1) throw invalid();
    await tx.user.updateMany({ where: { id: row.userId, status: 'pending' }, data: { status: 'active', emailVerifiedAt: now } });
  });
  return { status: 'active' as const };
}
