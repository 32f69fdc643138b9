// Two-factor management (sessions only: an API key, which bypasses 2FA, must not be able to change it).
import { seal, unseal, type Tx } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { badRequest, conflict, forbidden, unauthorized } from '../../http/errors';
import { reserveGuess, type RateLimiters } from '../../http/rate-limit';
import { recordInUserOrganizations, type RequestMeta } from '../audit/audit.context';
import type { CoreDeps } from './login';
import { reauthenticate, requireRecentSignIn } from './reauthentication';
import { recordSecurityNotice, sendSecurityNoticeNow } from './security-notices';
import { keepOnlyCallingSession } from './sessions';
import { acceptTotpCode, generateTotpSecret, INVALID_TOTP_CODE, otpauthUrl } from './totp';

function requireSession(principal: Principal): void {
  if (principal.kind !== 'session') throw forbidden('Two-factor settings can only be changed with a session, not an API key.');
}

async function currentUser(deps: CoreDeps, principal: Principal) {
  const user = await deps.prisma.user.findUnique({ where: { id: principal.userId } });
  if (!user) throw unauthorized();
  return user;
}

/**
 * A code checked outside the sign-in (the 2FA management routes, a password reset): wrong codes count per user, in
 * the same count as the second sign-in step's, with the same limit as per partial token; a wrong code is 400.
 */
export async function checkUserTotpCode(
  deps: AppDeps,
  limiters: RateLimiters,
  userId: string,
  secret: string,
  code: string,
  lastStep: bigint | null,
): Promise<number> {
  const guess = await reserveGuess(limiters.totpFailures, [`user:${userId}`]);
  const step = acceptTotpCode(secret, code, deps.clock.now(), lastStep);
  if (step === undefined) throw badRequest(INVALID_TOTP_CODE);
  await guess.refund();
  return step;
}

/** A user's second factor guards every organization they belong to: the change is recorded in each. */
async function recordTwoFactorChange(
  tx: Tx,
  principal: Principal,
  meta: RequestMeta,
  at: Date,
  action: 'auth.2fa_enabled' | 'auth.2fa_disabled',
  metadata?: Record<string, unknown>,
): Promise<void> {
  await recordInUserOrganizations(tx, principal.userId, meta, at, { action, target: { type: 'user', id: principal.userId }, ...(metadata && { metadata }) });
}

// Setup asks for no password: it only replaces the pending secret, which turns nothing on. A stolen session gets a
// secret of its own that is of no use without the enable step, which asks for the password; the owner's own setup
// under way is at worst replaced (the owner's enable then fails on the code), and the owner still ends the stolen
// session by changing the password. An account without a password has no such way out: turning 2FA on from a new
// sign-in is the only change that ends its other sessions. So its setup, like its enable, needs a recent sign-in,
// else a stolen older session could keep replacing the secret the owner is turning on, and stay.
export async function setupTwoFactor(deps: AppDeps, principal: Principal) {
  requireSession(principal);
  const user = await currentUser(deps, principal);
  if (user.totpEnabled) throw conflict('Two-factor authentication is already enabled; disable it first.');
  if (user.passwordHash === null) await requireRecentSignIn(deps, principal.sessionId!);
  const secret = generateTotpSecret();
  // Only the pending secret changes: 2FA is not on until a code proves the authenticator has it.
  await deps.prisma.user.update({ where: { id: user.id }, data: { totpPendingEnc: seal(secret, deps.config.encryptionKey) } });
  return { secret, otpauth_url: otpauthUrl(secret, user.email) };
}

/**
 * Turning 2FA on ends the account's other sessions, and the owner cannot sign in without the authenticator used here:
 * with a stolen session alone it would lock the owner out. So the caller proves who they are again first: the
 * current password, or for an account without one a session from a recent sign-in (reauthentication.ts).
 */
export async function enableTwoFactor(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  input: { code: string; current_password?: string },
  meta: RequestMeta,
) {
  requireSession(principal);
  const user = await currentUser(deps, principal);
  if (user.totpEnabled) throw conflict('Two-factor authentication is already enabled.');
  if (!user.totpPendingEnc) throw conflict('No two-factor setup in progress: call POST /api/v1/auth/2fa/setup first.');
  await reauthenticate(deps, limiters, user, principal.sessionId!, input.current_password, '2fa_enable', meta);
  const secret = unseal(user.totpPendingEnc, deps.config.encryptionKey);
  // A fresh secret has no used codes yet; the step accepted here becomes the first used one.
  const step = await checkUserTotpCode(deps, limiters, user.id, secret, input.code, null);
  const noticeId = await deps.prisma.$transaction(async (tx) => {
    // The password checked above is still the account's (or it still has none).
    const updated = await tx.user.updateMany({
      where: { id: user.id, totpEnabled: false, totpPendingEnc: user.totpPendingEnc, passwordHash: user.passwordHash },
      data: { totpSecretEnc: user.totpPendingEnc, totpPendingEnc: null, totpEnabled: true, totpLastStep: BigInt(step) },
    });
    if (updated.count !== 1) throw conflict('Two-factor settings changed concurrently; try again.');
    const now = deps.clock.now();
    // The account's other sessions end: one opened with a stolen password before 2FA was on must not outlive it
    // (unless the calling session itself ended meanwhile, by a change of password: then nothing changes). API keys
    // stay (they bypass 2FA by design; docs/api.md). The entry is written in each of the user's organizations: it
    // says that other sessions ended, not how many (a count would show one organization the sessions of another).
    await keepOnlyCallingSession(tx, user.id, principal.sessionId!, now);
    await recordTwoFactorChange(tx, principal, meta, now, 'auth.2fa_enabled', { other_sessions_revoked: true });
    return recordSecurityNotice(tx, user.id, { kind: '2fa_enabled' }, meta, now);
  });
  sendSecurityNoticeNow(deps, noticeId, user.id);
  return { two_factor_enabled: true };
}

/**
 * Turning 2FA off is a downgrade, and its wrong codes count with the owner's 2FA sign-in's: a stolen session alone
 * could spend them every window and keep the owner from signing in to change the password (which ends that session).
 * So the caller proves who they are again (reauthentication.ts) before the code is even looked at.
 */
export async function disableTwoFactor(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  input: { code: string; current_password?: string },
  meta: RequestMeta,
) {
  requireSession(principal);
  const user = await currentUser(deps, principal);
  if (!user.totpEnabled || !user.totpSecretEnc) throw conflict('Two-factor authentication is not enabled.');
  await reauthenticate(deps, limiters, user, principal.sessionId!, input.current_password, '2fa_disable', meta);
  const secret = unseal(user.totpSecretEnc, deps.config.encryptionKey);
  const step = await checkUserTotpCode(deps, limiters, user.id, secret, input.code, user.totpLastStep);
  const noticeId = await deps.prisma.$transaction(async (tx) => {
    // Only if the password checked above is still the account's: a change of password meanwhile (from another
    // session, ending this one) wins over a downgrade confirmed with the old one.
    const updated = await tx.user.updateMany({
      where: { id: user.id, totpEnabled: true, passwordHash: user.passwordHash, OR: [{ totpLastStep: null }, { totpLastStep: { lt: BigInt(step) } }] },
      data: { totpEnabled: false, totpSecretEnc: null, totpPendingEnc: null, totpLastStep: BigInt(step) },
    });
    if (updated.count !== 1) {
      const current = await tx.user.findUnique({ where: { id: user.id }, select: { passwordHash: true } });
      if (current?.passwordHash !== user.passwordHash) throw conflict('The password was changed meanwhile: sign in again with the new one.');
      throw badRequest(INVALID_TOTP_CODE); // the same code was just used concurrently
    }
    const now = deps.clock.now();
    await recordTwoFactorChange(tx, principal, meta, now, 'auth.2fa_disabled');
    return recordSecurityNotice(tx, user.id, { kind: '2fa_disabled' }, meta, now);
  });
  sendSecurityNoticeNow(deps, noticeId, user.id);
  return { two_factor_enabled: false };
}
