// Proving again who one is before a change a stolen session cookie alone must not make: turning 2FA on (which would
// lock the owner out with the thief's authenticator), turning it off (a downgrade, and its wrong codes would count
// against the owner's 2FA sign-in) and changing the password. An account with a password types it
// (counted per session; a wrong or missing one is audited like a failed sign-in). An account
// without one (made by a GitHub or Google sign-in) has nothing to type: its session must come from a recent sign-in.
// The changes that would let a stolen session stay in or take over (an API key, an invitation, a raised role, the
// organization's deletion or ownership, where its signed webhooks go, a disabled one turned back on, their secret,
// where its notification targets send: a chat URL or a recipient new to the target, a disabled one turned back on;
// a report published to a URL or shared with an e-mail address; where its findings are exported as issues (a tracker
// made or pointed elsewhere); a GitHub or Slack connected) need the password from a session that did not just sign
// in (confirmSensitiveChange): "sudo mode", like GitHub's.
import bcrypt from 'bcrypt';
import type { Request } from 'express';
import { principalOf, type Principal } from '../../auth/principal';
import { HttpError, forbidden, unauthorized } from '../../http/errors';
import { consumeOrThrow, type RateLimiters } from '../../http/rate-limit';
import { requestMeta, type RequestMeta } from '../audit/audit.context';
import { recordLoginFailure, type CoreDeps } from './login';

/**
 * How long after its sign-in a session counts as a recent one (docs/api.md): an account without a password may still
 * set up, turn on or turn off 2FA, and any session makes a sudo-mode change without the password. Long enough to scan
 * a QR code and type a code; short enough that an old session (a cookie left behind, or stolen) cannot.
 */
export const RECENT_SIGN_IN_WINDOW_MS = 10 * 60 * 1000;

/** The `code` of the 403 that asks for the current password (sudo mode) or, without one, a new sign-in. */
export const REAUTHENTICATION_REQUIRED = 'REAUTHENTICATION_REQUIRED';

/** What the re-authentication was for, in the audit entry of a failure. */
export type ReauthenticatedOperation =
  | 'password_change'
  | '2fa_enable'
  | '2fa_disable'
  | 'api_key_create'
  | 'organization_delete'
  | 'ownership_transfer'
  | 'invitation_create'
  | 'role_raise'
  | 'webhook_create'
  | 'webhook_url_change'
  | 'webhook_reenable'
  | 'webhook_secret_rotate'
  | 'notification_target_create'
  | 'notification_target_destination_change'
  | 'notification_target_reenable'
  | 'report_publish'
  | 'report_share'
  | 'issue_target_create'
  | 'issue_target_destination_change'
  | 'integration_create';

/** The `code` of the 400 a wrong or missing current password gets (a client retries with the right one). */
export const INVALID_CURRENT_PASSWORD = 'INVALID_CURRENT_PASSWORD';

/**
 * The codes of the answers that ask the caller to prove again who they are. Under an Idempotency-Key such an
 * answer is not stored: the same request sent again with the password (same key) must run, not replay the refusal.
 */
export const REAUTHENTICATION_CODES: readonly string[] = [REAUTHENTICATION_REQUIRED, INVALID_CURRENT_PASSWORD];

/**
 * The key a session's password confirmations are counted under in the login limiter: per session, at the login
 * limit's pace. Not with the e-mail's sign-ins: a flood of those (from anyone) would block the owner's
 * confirmations, and the owner's typos here would block their sign-ins. A session is had only by signing in, so a
 * stolen one guesses at that pace for the rest of its life, no faster.
 */
export function sessionLimiterKey(sessionId: string): string {
  return `session:${sessionId}`;
}

/**
 * The user's current password, checked as sign-in checks it: counted (per session, sessionLimiterKey), a wrong or
 * missing one recorded as a failed sign-in in each of the user's organizations (without the password) and answered 400.
 */
export async function checkCurrentPassword(
  deps: CoreDeps,
  limiters: RateLimiters,
  user: { id: string; email: string; passwordHash: string },
  sessionId: string,
  currentPassword: string | undefined,
  operation: ReauthenticatedOperation,
  meta: RequestMeta,
): Promise<void> {
  await consumeOrThrow(limiters.login, sessionLimiterKey(sessionId));
  if (currentPassword === undefined) {
    await recordLoginFailure(deps, user, meta, 'missing_current_password', operation);
    throw new HttpError(400, '"current_password" is required: confirm this change with your current password.', {
      code: INVALID_CURRENT_PASSWORD,
    });
  }
  if (!(await bcrypt.compare(currentPassword, user.passwordHash))) {
    await recordLoginFailure(deps, user, meta, 'invalid_current_password', operation);
    throw new HttpError(400, 'The current password is not correct.', { code: INVALID_CURRENT_PASSWORD });
  }
}

/** How far ahead of the app's clock a session's sign-in time may be and still count (clocks of instances differ). */
export const MAX_SIGN_IN_CLOCK_SKEW_MS = 60_000;

/**
 * A request body without its `current_password`: what an Idempotency-Key remembers of the request (no password in a
 * stored hash) and what a service that stores or audits its input is given.
 */
export function withoutCurrentPassword<T>(body: T): T {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || !('current_password' in body)) return body;
  const { current_password: _password, ...rest } = body as Record<string, unknown>;
  return rest as T;
}

/** Whether the session was signed in within RECENT_SIGN_IN_WINDOW_MS. */
async function signedInRecently(deps: CoreDeps, sessionId: string): Promise<boolean> {
  // Unscoped: the session id is the caller's own credential. Its row is written at sign-in (sessions.ts issueSession,
  // created_at from the app's clock) and no other route issues one, so a stolen session cannot renew its own age.
  const session = await deps.prisma.session.findUnique({ where: { id: sessionId }, select: { createdAt: true } });
  if (!session) throw unauthorized('Invalid or expired session.');
  // A sign-in time ahead of the clock (an instance whose clock ran ahead, a clock set back) is not a recent sign-in:
  // only the skew between instances is allowed, else such a session would count as just signed in for the whole skew.
  const age = deps.clock.now().getTime() - session.createdAt.getTime();
  return age >= -MAX_SIGN_IN_CLOCK_SKEW_MS && age <= RECENT_SIGN_IN_WINDOW_MS;
}

const windowMinutes = RECENT_SIGN_IN_WINDOW_MS / 60_000;

/** The calling session must have been signed in within RECENT_SIGN_IN_WINDOW_MS, else 403 REAUTHENTICATION_REQUIRED. */
export async function requireRecentSignIn(deps: CoreDeps, sessionId: string): Promise<void> {
  if (await signedInRecently(deps, sessionId)) return;
  throw forbidden(
    `This account has no password to confirm this change with: sign in again (with GitHub or Google), then retry within ${windowMinutes} minutes.`,
    { code: REAUTHENTICATION_REQUIRED },
  );
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
    await checkCurrentPassword(deps, limiters, { ...user, passwordHash: user.passwordHash }, sessionId, currentPassword, operation, meta);
  } else {
    await requireRecentSignIn(deps, sessionId);
  }
}

/**
 * A change a stolen session cookie alone must not make, however old it is: minting an API key (a credential that
 * outlives a password reset and every session), inviting someone (an account of one's own in the organization) or
 * raising a member's role, deleting the organization, handing its ownership over, and where the organization's
 * signed webhooks go (a subscription made, its URL changed, a disabled one turned back on) or the secret they are
 * signed with (rotated), where its notification targets send (a target made, a new chat URL or recipient, a
 * disabled one turned back on), a report handed outside (published to a URL, shared with an e-mail address), where
 * its findings are exported as issues (a tracker made, its URL, repository or project changed) and a GitHub or Slack
 * connected to it. A session signed in within RECENT_SIGN_IN_WINDOW_MS makes it as it is; an older one sends `current_password` (checked like
 * sign-in's: counted per session, a wrong one audited), else 403 REAUTHENTICATION_REQUIRED. An account without a password signs
 * in again. An API key is not asked: it was minted for what it does, and has no password to send.
 */
export async function confirmSensitiveChange(
  deps: CoreDeps,
  limiters: RateLimiters,
  principal: Principal,
  currentPassword: string | undefined,
  operation: ReauthenticatedOperation,
  meta: RequestMeta,
): Promise<void> {
  if (principal.kind !== 'session') return;
  const user = await deps.prisma.user.findUnique({
    where: { id: principal.userId },
    select: { id: true, email: true, passwordHash: true },
  });
  if (!user) throw unauthorized();
  if (currentPassword !== undefined && user.passwordHash !== null) {
    await checkCurrentPassword(deps, limiters, { ...user, passwordHash: user.passwordHash }, principal.sessionId!, currentPassword, operation, meta);
    return;
  }
  if (await signedInRecently(deps, principal.sessionId!)) return;
  throw forbidden(
    user.passwordHash !== null
      ? `Confirm this with your password: send it as "current_password" (a session signed in more than ${windowMinutes} minutes ago cannot do this alone).`
      : `Sign in again (with GitHub or Google), then retry within ${windowMinutes} minutes: a session signed in longer ago cannot do this alone.`,
    { code: REAUTHENTICATION_REQUIRED },
  );
}

/** A sensitive change's confirmation bound to one request, for a service that decides itself whether it is needed. */
export type ConfirmSensitiveChange = (operation: ReauthenticatedOperation) => Promise<void>;

export function sensitiveChangeConfirmer(
  deps: CoreDeps,
  limiters: RateLimiters,
  principal: Principal,
  currentPassword: string | undefined,
  meta: RequestMeta,
): ConfirmSensitiveChange {
  return (operation) => confirmSensitiveChange(deps, limiters, principal, currentPassword, operation, meta);
}

/** The confirmation of a sudo-mode route's request: its principal, its origin and the `current_password` of its body. */
export function requestConfirmer(deps: CoreDeps, limiters: RateLimiters, req: Request): ConfirmSensitiveChange {
  const currentPassword = (req.body as { current_password?: string } | undefined)?.current_password;
  return sensitiveChangeConfirmer(deps, limiters, principalOf(req), currentPassword, requestMeta(req));
}
