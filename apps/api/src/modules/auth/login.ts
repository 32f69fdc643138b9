// Password login and what follows any passed first factor (a partial token or a session), and logout.
// Sessions themselves are issued and revoked by sessions.ts; the second factor is two-factor-login.ts.
import bcrypt from 'bcrypt';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { PARTIAL_AUDIENCE, passwordFingerprint, signToken } from '../../auth/tokens';
import { badRequest, forbidden, unauthorized } from '../../http/errors';
import { clientAddressKey, consumeOrThrow, type RateLimiters } from '../../http/rate-limit';
import { randomToken, sha256Hex } from '../../lib/crypto';
import type { Tx } from '@svc/db';
import { recordAs, recordInOrganizations, recordInUserOrganizations, type RequestMeta } from '../audit/audit.context';
import { deviceLimiterKey, deviceStillHolds, knownDeviceOf } from './login-devices';
import { issueSession, lockedCredentials, revokeSession, type IssuedSession } from './sessions';
import type { ReauthenticatedOperation } from './reauthentication';

const INVALID_CREDENTIALS = 'Invalid e-mail or password.';

export type CoreDeps = Pick<AppDeps, 'prisma' | 'config' | 'clock'>;

// Compared against when the e-mail is unknown (or has no password), so that answer costs one bcrypt
// comparison at the configured cost, like a wrong password does.
const dummyHashes = new Map<number, Promise<string>>();
export function dummyPasswordHash(rounds: number): Promise<string> {
  let hash = dummyHashes.get(rounds);
  if (!hash) {
    hash = bcrypt.hash(randomToken(24), rounds);
    dummyHashes.set(rounds, hash);
  }
  return hash;
}

export type LoginOutcome =
  | { kind: 'session'; session: IssuedSession }
  | { kind: 'two_factor'; partialToken: string; expiresAt: Date };

/** A password sign-in's outcome: a session names the password it was issued under (for the login_device cookie). */
export type PasswordLoginOutcome =
  | { kind: 'session'; session: IssuedSession; passwordHash: string }
  | { kind: 'two_factor'; partialToken: string; expiresAt: Date };

export async function membershipForLogin(db: Pick<Tx, 'membership'>, userId: string, organizationId: string | undefined) {
  // Unscoped: signing in chooses the organization (the one asked for, or the user's first).
  const membership = organizationId
    ? await db.membership.findUnique({ where: { organizationId_userId: { organizationId, userId } } })
    : await db.membership.findFirst({ where: { userId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
  if (!membership) {
    throw forbidden(organizationId ? 'You are not a member of that organization.' : 'Your account belongs to no organization.');
  }
  return membership;
}

/**
 * A failed sign-in of a known user, recorded in each organization the user belongs to (an unknown e-mail is not
 * recorded: the log would fill with other people's addresses).
 */
export async function recordLoginFailure(
  deps: CoreDeps,
  user: { id: string; email: string },
  meta: RequestMeta,
  reason: 'invalid_password' | 'no_password' | 'email_not_verified' | 'invalid_totp_code' | 'invalid_current_password' | 'missing_current_password',
  /** A password checked outside sign-in: a signed-in user's asked for again (reauthentication.ts), or an invitation accepted as an existing account. */
  operation?: ReauthenticatedOperation | 'invitation_accept',
): Promise<void> {
  await recordInUserOrganizations(deps.prisma, user.id, meta, deps.clock.now(), {
    action: 'auth.login_failed',
    target: { type: 'user', id: user.id },
    metadata: { reason, ...(operation && { operation }) },
  });
}

/**
 * The key of an e-mail in the per-e-mail limiters (hashed: no addresses in Redis keys): sign-ins from browsers not
 * known for it, an invitation's password check, reset requests.
 */
export function emailLimiterKey(email: string): string {
  return `email:${sha256Hex(email)}`;
}

export async function login(
  deps: AppDeps,
  limiters: RateLimiters,
  input: { email: string; password: string; organization_id?: string },
  meta: RequestMeta,
  /** The `login_device` cookie the request brought, if any (login-devices.ts). */
  deviceCookie?: unknown,
): Promise<PasswordLoginOutcome> {
  // Counted per client address (an IPv6 client by its /64), and per e-mail (hashed: no addresses in Redis keys) or,
  // from a browser that signed in with this e-mail before, per that browser, before any work.
  await consumeOrThrow(limiters.login, clientAddressKey(meta.ip));
  const device = knownDeviceOf(deps, input.email, deviceCookie);
  await consumeOrThrow(limiters.login, device ? deviceLimiterKey(device.id) : emailLimiterKey(input.email));

  const user = await deps.prisma.user.findUnique({ where: { email: input.email } });
  // A cookie earned with another password than the account's (changed since) counts as none: with the e-mail's too.
  if (device && !deviceStillHolds(deps, device, user)) await consumeOrThrow(limiters.login, emailLimiterKey(input.email));
  const hash = user?.passwordHash ?? (await dummyPasswordHash(deps.config.bcryptRounds));
  const passwordOk = await bcrypt.compare(input.password, hash);
  if (!user || !user.passwordHash || !passwordOk) {
    if (user) {
      // Not awaited: a known e-mail must not answer more slowly than an unknown one (no account enumeration).
      const reason = user.passwordHash ? 'invalid_password' : 'no_password';
      deps.afterAnswer.run('record a failed login', () => recordLoginFailure(deps, user, meta, reason), { fields: { user_id: user.id } });
    }
    throw unauthorized(INVALID_CREDENTIALS);
  }

  if (user.status !== 'active') {
    await recordLoginFailure(deps, user, meta, 'email_not_verified');
    throw forbidden('E-mail address not verified: open the link in the verification e-mail first.', { code: 'EMAIL_NOT_VERIFIED' });
  }
  const passwordHash = user.passwordHash;
  const outcome = await completeFirstFactor(deps, user, input.organization_id, { method: 'password', meta }, { passwordHash });
  return outcome.kind === 'session' ? { ...outcome, passwordHash } : outcome;
}

/** How a sign-in happened, for the audit log: the first factor used and the request it came with. */
export interface SignInAudit {
  /** `password`, or the OAuth provider (`oauth_github`, `oauth_google`). */
  method: string;
  meta?: RequestMeta;
}

/**
 * The session of a passed sign-in and its `auth.login` entry, in the caller's transaction after lockedCredentials
 * took the user's row FOR SHARE: the organization is chosen again after that lock. A GDPR erasure takes that row
 * before it removes the person from an organization (apps/worker erasure.ts), so a sign-in either commits first (the
 * erasure then revokes its session and scrubs its entry with the person's others) or sees the membership gone; never
 * a session and an entry holding the client's address in an organization the person has left. The entry is labelled
 * with the e-mail the locked row holds (`email`).
 */
export async function issueSignInSession(
  deps: CoreDeps,
  tx: Tx,
  user: { id: string; email: string },
  organizationId: string | undefined,
  audit: { meta?: RequestMeta; metadata: Record<string, unknown> },
): Promise<IssuedSession> {
  const membership = await membershipForLogin(tx, user.id, organizationId);
  const session = await issueSession(deps, user.id, membership.organizationId, tx);
  await recordInOrganizations(tx, [membership.organizationId], { type: 'user', id: user.id, label: user.email }, audit.meta ?? {}, deps.clock.now(), {
    action: 'auth.login',
    target: { type: 'session', id: session.sessionId },
    metadata: audit.metadata,
  });
  return session;
}

/** The password a sign-in was checked against: a change of password meanwhile ends the sign-in. */
export interface PasswordFactor {
  passwordHash: string;
}

/**
 * What follows a passed first factor (a password, or a sign-in at an OAuth provider): a partial token when the
 * user has TOTP on, otherwise a session, in the organization asked for or else the user's oldest membership.
 */
export async function completeFirstFactor(
  deps: CoreDeps,
  user: { id: string; totpEnabled: boolean },
  organizationId?: string,
  audit: SignInAudit = { method: 'unspecified' },
  password?: PasswordFactor,
): Promise<LoginOutcome> {
  const membership = await membershipForLogin(deps.prisma, user.id, organizationId);

  if (!user.totpEnabled) {
    // Written with the user's row share-locked and its 2FA flag read again: turning 2FA on (which updates that row,
    // then ends the other sessions) either committed first, and this sign-in needs the second factor too, or waits
    // for this session, and then ends it. With the flag read earlier only, a sign-in under way when 2FA was turned
    // on got a session that outlived it. The password is read again the same way: a change of password (which ends
    // the other sessions) either committed first, and this sign-in with the old one fails, or ends this session.
    const session = await deps.prisma.$transaction(async (tx) => {
      const row = await lockedCredentials(tx, user.id);
      if (!row || (password && row.password_hash !== password.passwordHash)) throw unauthorized(INVALID_CREDENTIALS);
      if (row.totp_enabled) return null;
      return issueSignInSession(deps, tx, { id: user.id, email: row.email }, organizationId, { meta: audit.meta, metadata: { method: audit.method } });
    });
    if (session) return { kind: 'session', session };
  }
  const pwf = password ? passwordFingerprint(password.passwordHash, deps.config.jwtSecret) : undefined;
  const { token, expiresAt } = signToken(
    { sub: user.id, org: membership.organizationId, jti: randomToken(16), pwf },
    PARTIAL_AUDIENCE,
    deps.config.partialTokenTtlSeconds,
    deps.config.jwtSecret,
    deps.clock.now(),
  );
  return { kind: 'two_factor', partialToken: token, expiresAt };
}

/** Ends the session of the request; recorded once, whoever revokes it first. */
export async function logout(deps: AppDeps, principal: Principal, meta: RequestMeta): Promise<void> {
  if (principal.kind !== 'session' || !principal.sessionId) {
    throw badRequest('API keys are not logged out: revoke them with DELETE /api/v1/api-keys/{id}.');
  }
  const sessionId = principal.sessionId;
  const now = deps.clock.now();
  await deps.prisma.$transaction(async (tx) => {
    if (await revokeSession(tx, sessionId, now)) {
      await recordAs(tx, principal, meta, now, { action: 'auth.logout', target: { type: 'session', id: sessionId } });
    }
  });
}
