// Issuing and revoking session JWTs. Each session is a row keyed by the token's jti.
import type { Response } from 'express';
import type { Tx } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import { CSRF_COOKIE, SESSION_COOKIE, csrfTokenFor } from '../../auth/csrf';
import { SESSION_AUDIENCE, signToken } from '../../auth/tokens';
import { newId } from '@svc/db';
import { unauthorized } from '../../http/errors';

export interface IssuedSession {
  token: string;
  expiresAt: Date;
  csrfToken: string;
  sessionId: string;
}

export async function issueSession(
  deps: Pick<AppDeps, 'prisma' | 'config' | 'clock'>,
  userId: string,
  organizationId: string,
  db: Pick<Tx, 'session'> = deps.prisma,
): Promise<IssuedSession> {
  const sessionId = newId('ses');
  const now = deps.clock.now();
  const { token, expiresAt } = signToken(
    { sub: userId, org: organizationId, jti: sessionId },
    SESSION_AUDIENCE,
    deps.config.sessionTtlSeconds,
    deps.config.jwtSecret,
    now,
  );
  // Unscoped: a session is issued before there is a principal (sign-in), for the organization sign-in chose.
  // Sessions are issued by sign-ins only: created_at is when its user last proved who they are (reauthentication.ts),
  // on the app's clock, like the expiry and the checks against it.
  await db.session.create({ data: { id: sessionId, userId, organizationId, expiresAt, createdAt: now } });
  return { token, expiresAt, sessionId, csrfToken: csrfTokenFor(sessionId, deps.config.jwtSecret) };
}

/** Revokes a live session (in the caller's transaction); false when it was already revoked. */
export async function revokeSession(db: Pick<Tx, 'session'>, sessionId: string, now: Date): Promise<boolean> {
  // Unscoped: the session id is the caller's own credential (logout), which names its organization.
  const { count } = await db.session.updateMany({ where: { id: sessionId, revokedAt: null }, data: { revokedAt: now } });
  return count === 1;
}

/**
 * Ends the user's other sessions, keeping the calling one, in the transaction of a change of credentials (a
 * password, 2FA turned on). The caller has updated the user's row first, so a change of credentials from another
 * session that committed meanwhile has ended this one too, and shows here: then nothing changes (401). Read, not
 * locked: a row lock here could deadlock with a member's removal, which ends several of the user's sessions in its
 * own order.
 */
export async function keepOnlyCallingSession(db: Pick<Tx, 'session'>, userId: string, sessionId: string, now: Date): Promise<void> {
  // Unscoped: the session id is the caller's own credential, which names its organization.
  const live = await db.session.count({ where: { id: sessionId, revokedAt: null, expiresAt: { gt: now } } });
  if (live !== 1) throw unauthorized('Invalid or expired session.');
  await db.session.updateMany({ where: { userId, revokedAt: null, id: { not: sessionId } }, data: { revokedAt: now } });
}

/**
 * Ends every session of the user, in every organization, in the caller's transaction (a password reset, where there
 * is no calling session to keep).
 */
export async function revokeAllSessions(db: Pick<Tx, 'session'>, userId: string, now: Date): Promise<void> {
  // Unscoped: the user's own credentials, whichever organization each session was opened in.
  await db.session.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
}

/** The user's credentials as committed, the row share-locked until the transaction ends (a sign-in completing). */
export async function lockedCredentials(
  db: Pick<Tx, '$queryRaw'>,
  userId: string,
): Promise<{ email: string; totp_enabled: boolean; password_hash: string | null } | undefined> {
  const [row] = await db.$queryRaw<Array<{ email: string; totp_enabled: boolean; password_hash: string | null }>>`
    SELECT email, totp_enabled, password_hash FROM users WHERE id = ${userId} FOR SHARE`;
  return row;
}

/** The session travels in an httpOnly, Secure, SameSite=Strict cookie; the CSRF token in a readable one. */
export function setSessionCookies(res: Response, session: IssuedSession, secure: boolean): void {
  const common = { secure, sameSite: 'strict' as const, path: '/', expires: session.expiresAt };
  res.cookie(SESSION_COOKIE, session.token, { ...common, httpOnly: true });
  res.cookie(CSRF_COOKIE, session.csrfToken, { ...common, httpOnly: false });
}

export function clearSessionCookies(res: Response, secure: boolean): void {
  res.clearCookie(SESSION_COOKIE, { path: '/', secure, sameSite: 'strict', httpOnly: true });
  res.clearCookie(CSRF_COOKIE, { path: '/', secure, sameSite: 'strict' });
}

// The dashboard's OAuth sign-in of an account with TOTP on: the callback cannot hand the partial token to the page
// as JSON (it is a top-level navigation), and a token in the URL would land in history and logs. It travels in an
// httpOnly, SameSite=Strict cookie sent only to POST /auth/login/2fa, living no longer than the token itself, and
// cleared by the exchange that spends it. Script on the page never sees it.
export const PARTIAL_COOKIE = 'partial_token';

/** The 2FA exchange route as the browser sees its path (PUBLIC_BASE_URL may carry a path prefix). */
export function partialCookiePath(publicBaseUrl: string): string {
  return new URL(`${publicBaseUrl}/api/v1/auth/login/2fa`).pathname;
}

function partialCookieOptions(publicBaseUrl: string, secure: boolean) {
  return { httpOnly: true, secure, sameSite: 'strict' as const, path: partialCookiePath(publicBaseUrl) };
}

export function setPartialTokenCookie(res: Response, token: string, opts: { publicBaseUrl: string; secure: boolean; ttlSeconds: number }): void {
  res.cookie(PARTIAL_COOKIE, token, { ...partialCookieOptions(opts.publicBaseUrl, opts.secure), maxAge: opts.ttlSeconds * 1000 });
}

export function clearPartialTokenCookie(res: Response, opts: { publicBaseUrl: string; secure: boolean }): void {
  res.clearCookie(PARTIAL_COOKIE, partialCookieOptions(opts.publicBaseUrl, opts.secure));
}

export function sessionResponse(session: IssuedSession) {
  return { token: session.token, expires_at: session.expiresAt.toISOString(), csrf_token: session.csrfToken };
}
