// Proving again who one is before a change a stolen session cookie alone must not make: turning 2FA on (which would
// lock the owner out with the thief's authenticator), turning it off (a downgrade, and its wrong codes would count
// against the owner's 2FA sign-in) and changing the password. An account with a password types it
// (counted with the sign-ins of its e-mail; a wrong or missing one is audited like a failed sign-in). An account
// without one (made by a GitHub or Google sign-in) has nothing to type: its session must come from a recent sign-in.
import bcrypt from 'bcrypt';
import { badRequest, forbidden, unauthorized } from '../../http/errors';
import { consumeOrThrow, type RateLimiters } from '../../http/rate-limit';
import type { RequestMeta } from '../audit/audit.context';
import { emailLimiterKey, recordLoginFailure, type CoreDeps } from './login';

/**
 * How long after its sign-in a session of an account without a password may still set up, turn on or turn off 2FA (docs/api.md). Long
 * enough to scan a QR code and type a code; short enough that an old session (a cookie left behind, or stolen) cannot.
 */
export const RECENT_SIGN_IN_WINDOW_MS = 10 * 60 * 1000;

/** The `code` of the 403 that asks an account without a password to sign in again. */
export const REAUTHENTICATION_REQUIRED = 'REAUTHENTICATION_REQUIRED';

/** What the re-authentication was for, in the audit entry of a failure. */
export type ReauthenticatedOperation = 'password_change' | '2fa_enable' | '2fa_disable';

/**
 * The user's current password, checked as sign-in checks it: counted with the sign-ins of the same e-mail (so it is
 * guessed here at the login's pace at most), a wrong or missing one recorded as a failed sign-in in each of the
 * user's organizations (without the password) and answered 400.
 */
export async function checkCurrentPassword(
  deps: CoreDeps,
  limiters: RateLimiters,
  user: { id: string; email: string; passwordHash: string },
  currentPassword: string | undefined,
  operation: ReauthenticatedOperation,
  meta: RequestMeta,
): Promise<void> {
  await consumeOrThrow(limiters.login, emailLimiterKey(user.email));
  if (currentPassword === undefined) {
    await recordLoginFailure(deps, user, meta, 'missing_current_password', operation);
    throw badRequest('"current_password" is required: confirm this change with your current password.');
  }
  if (!(await bcrypt.compare(currentPassword, user.passwordHash))) {
    await recordLoginFailure(deps, user, meta, 'invalid_current_password', operation);
    throw badRequest('The current password is not correct.');
  }
}

/** The calling session must have been signed in within RECENT_SIGN_IN_WINDOW_MS, else 403 REAUTHENTICATION_REQUIRED. */
export async function requireRecentSignIn(deps: CoreDeps, sessionId: string): Promise<void> {
  // Unscoped: the session id is the caller's own credential. Its row is written at sign-in (sessions.ts issueSession,
  // created_at from the app's clock) and no other route issues one, so a stolen session cannot renew its own age.
  const session = await deps.prisma.session.findUnique({ where: { id: sessionId }, select: { createdAt: true } });
  if (!session) throw unauthorized('Invalid or expired session.');
  if (deps.clock.now().getTime() - session.createdAt.getTime() > RECENT_SIGN_IN_WINDOW_MS) {
    throw forbidden(
      `This account has no password to confirm this change with: sign in again (with GitHub or Google), then retry within ${
        RECENT_SIGN_IN_WINDOW_MS / 60_000
      } minutes.`,
      { code: REAUTHENTICATION_REQUIRED },
    );
  }
}

/** The current password for an account that has one, else a recent sign-in of the calling session. */
export async function reauthenticate(
  deps: CoreDeps,
  limiters: RateLimiters,
  user: { id: string; email: string; passwordHash: string | null },
  sessionId: string,
  currentPassword: string | undefined,
  operation: ReauthenticatedOperation,
  meta: RequestMeta,
): Promise<void> {
  if (user.passwordHash !== null) {
    await checkCurrentPassword(deps, limiters, { ...user, passwordHash: user.passwordHash }, currentPassword, operation, meta);
  } else {
    await requireRecentSignIn(deps, sessionId);
  }
}
