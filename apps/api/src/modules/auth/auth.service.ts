// Accounts and sign-in: signup with e-mail verification, password login (with TOTP second factor), 2FA
// management, the caller's own profile. Sessions themselves are issued and revoked by sessions.ts.
import bcrypt from 'bcrypt';
import { isUniqueViolation, type Tx } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { PARTIAL_AUDIENCE, signToken, verifyToken } from '../../auth/tokens';
import { HttpError, badRequest, conflict, forbidden, unauthorized } from '../../http/errors';
import { consumeOrThrow, throwIfExhausted, type RateLimiters } from '../../http/rate-limit';
import { randomToken, sha256Hex } from '../../lib/crypto';
import { seal, unseal } from '@svc/db';
import { newId } from '@svc/db';
import { recordAs, recordInOrganizations, recordInUserOrganizations, userActor, type RequestMeta } from '../audit/audit.context';
import { issueSession, revokeSession, type IssuedSession } from './sessions';
import { acceptTotpCode, generateTotpSecret, otpauthUrl } from './totp';

export const VERIFY_EMAIL_PURPOSE = 'verify_email';
export const VERIFY_EMAIL_TTL_MS = 24 * 3600 * 1000;

const INVALID_CREDENTIALS = 'Invalid e-mail or password.';
const INVALID_PARTIAL_TOKEN = 'Invalid or expired partial token: log in again.';
const INVALID_TOTP_CODE = 'Invalid two-factor code.';

type CoreDeps = Pick<AppDeps, 'prisma' | 'config' | 'clock'>;

// ---------------------------------------------------------------------------------------------------------
// Accounts

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
 * An e-mail already registered is a 409.
 */
export async function createOwnerAccount(
  deps: CoreDeps,
  input: NewOwnerInput,
  options: { verified: boolean },
): Promise<NewOwnerAccount> {
  const alreadyRegistered = () => conflict('An account with this e-mail address already exists.');
  if (await deps.prisma.user.findUnique({ where: { email: input.email }, select: { id: true } })) throw alreadyRegistered();

  const passwordHash = input.password === undefined ? null : await bcrypt.hash(input.password, deps.config.bcryptRounds);
  const now = deps.clock.now();
  const userId = newId('usr');
  const organizationId = newId('org');
  const verificationToken = options.verified ? undefined : randomToken(32);
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
        `${link}\n\nIf you did not sign up, ignore this message.\n`,
    });
  } catch (err) {
    // Without the mail the account could never be activated: undo it so the person can simply sign up again.
    deps.logger.error('Could not send the verification e-mail; signup undone', { error: String(err) });
    await deps.prisma.organization.delete({ where: { id: account.organizationId } }).catch(() => undefined);
    await deps.prisma.user.delete({ where: { id: account.userId } }).catch(() => undefined);
    throw new HttpError(500, 'Could not send the verification e-mail; please try again later.');
  }
  return { user_id: account.userId, organization_id: account.organizationId, status: account.status };
}

export async function verifyEmail(deps: AppDeps, token: string) {
  const invalid = () => badRequest('Invalid, expired or already used verification token.');
  const now = deps.clock.now();
  await deps.prisma.$transaction(async (tx) => {
    const row = await tx.emailToken.findUnique({ where: { tokenHash: sha256Hex(token) } });
    if (!row || row.purpose !== VERIFY_EMAIL_PURPOSE || row.usedAt || row.expiresAt <= now) throw invalid();
    // Claimed with a condition, so two concurrent uses of one token cannot both succeed.
    const claimed = await tx.emailToken.updateMany({ where: { id: row.id, usedAt: null }, data: { usedAt: now } });
    if (claimed.count !== 1) throw invalid();
    await tx.user.updateMany({ where: { id: row.userId, status: 'pending' }, data: { status: 'active', emailVerifiedAt: now } });
  });
  return { status: 'active' as const };
}

// ---------------------------------------------------------------------------------------------------------
// Login

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

async function membershipForLogin(deps: CoreDeps, userId: string, organizationId: string | undefined) {
  const membership = organizationId
    ? await deps.prisma.membership.findUnique({ where: { organizationId_userId: { organizationId, userId } } })
    : await deps.prisma.membership.findFirst({ where: { userId }, orderBy: [{ createdAt: 'asc' }, { id: 'asc' }] });
  if (!membership) {
    throw forbidden(organizationId ? 'You are not a member of that organization.' : 'Your account belongs to no organization.');
  }
  return membership;
}

/**
 * A failed sign-in of a known user, recorded in each organization the user belongs to (an unknown e-mail is not
 * recorded: the log would fill with other people's addresses).
 */
async function recordLoginFailure(
  deps: CoreDeps,
  user: { id: string; email: string },
  meta: RequestMeta,
  reason: 'invalid_password' | 'no_password' | 'email_not_verified' | 'invalid_totp_code',
): Promise<void> {
  await recordInUserOrganizations(deps.prisma, { type: 'user', id: user.id, label: user.email }, meta, deps.clock.now(), {
    action: 'auth.login_failed',
    target: { type: 'user', id: user.id },
    metadata: { reason },
  });
}

export async function login(
  deps: AppDeps,
  limiters: RateLimiters,
  input: { email: string; password: string; organization_id?: string },
  meta: RequestMeta,
): Promise<LoginOutcome> {
  // Counted per client address and per e-mail (hashed: no addresses in Redis keys), before any work.
  await consumeOrThrow(limiters.login, `ip:${meta.ip ?? 'unknown'}`);
  await consumeOrThrow(limiters.login, `email:${sha256Hex(input.email)}`);

  const user = await deps.prisma.user.findUnique({ where: { email: input.email } });
  const hash = user?.passwordHash ?? (await dummyPasswordHash(deps.config.bcryptRounds));
  const passwordOk = await bcrypt.compare(input.password, hash);
  if (!user || !user.passwordHash || !passwordOk) {
    if (user) {
      // Not awaited: a known e-mail must not answer more slowly than an unknown one (no account enumeration).
      recordLoginFailure(deps, user, meta, user.passwordHash ? 'invalid_password' : 'no_password').catch((err: unknown) =>
        deps.logger.error('Could not record a failed login', { user_id: user.id, error: String(err) }),
      );
    }
    throw unauthorized(INVALID_CREDENTIALS);
  }

  if (user.status !== 'active') {
    await recordLoginFailure(deps, user, meta, 'email_not_verified');
    throw forbidden('E-mail address not verified: open the link in the verification e-mail first.', { code: 'EMAIL_NOT_VERIFIED' });
  }
  return completeFirstFactor(deps, user, input.organization_id, { method: 'password', meta });
}

/** How a sign-in happened, for the audit log: the first factor used and the request it came with. */
export interface SignInAudit {
  /** `password`, or the OAuth provider (`oauth_github`, `oauth_google`). */
  method: string;
  meta?: RequestMeta;
}

async function recordLogin(
  deps: CoreDeps,
  userId: string,
  session: IssuedSession,
  organizationId: string,
  meta: RequestMeta | undefined,
  metadata: Record<string, unknown>,
): Promise<void> {
  await recordInOrganizations(deps.prisma, [organizationId], await userActor(deps.prisma, userId), meta ?? {}, deps.clock.now(), {
    action: 'auth.login',
    target: { type: 'session', id: session.sessionId },
    metadata,
  });
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
): Promise<LoginOutcome> {
  const membership = await membershipForLogin(deps, user.id, organizationId);

  if (user.totpEnabled) {
    const { token, expiresAt } = signToken(
      { sub: user.id, org: membership.organizationId, jti: randomToken(16) },
      PARTIAL_AUDIENCE,
      deps.config.partialTokenTtlSeconds,
      deps.config.jwtSecret,
      deps.clock.now(),
    );
    return { kind: 'two_factor', partialToken: token, expiresAt };
  }
  const session = await issueSession(deps, user.id, membership.organizationId);
  await recordLogin(deps, user.id, session, membership.organizationId, audit.meta, { method: audit.method });
  return { kind: 'session', session };
}

/** Stores the accepted step only if it is newer than the stored one: a concurrent replay loses. */
async function recordAcceptedStep(deps: CoreDeps, userId: string, step: number): Promise<boolean> {
  const updated = await deps.prisma.user.updateMany({
    where: { id: userId, OR: [{ totpLastStep: null }, { totpLastStep: { lt: BigInt(step) } }] },
    data: { totpLastStep: BigInt(step) },
  });
  return updated.count === 1;
}

export async function loginWithSecondFactor(
  deps: AppDeps,
  limiters: RateLimiters,
  input: { partial_token: string; code: string },
  meta: RequestMeta,
): Promise<IssuedSession> {
  const now = deps.clock.now();
  const ttl = deps.config.partialTokenTtlSeconds;
  const claims = verifyToken(input.partial_token, PARTIAL_AUDIENCE, ttl, deps.config.jwtSecret, now);
  if (!claims) throw unauthorized(INVALID_PARTIAL_TOKEN);
  const usedKey = `${deps.config.redisPrefix}:partial-used:${claims.jti}`;
  if (await deps.redis.exists(usedKey)) throw unauthorized(INVALID_PARTIAL_TOKEN);

  // After TOTP_MAX_FAILURES wrong codes the partial token is locked (429) for the rest of its life.
  const failuresKey = `partial:${claims.jti}`;
  await throwIfExhausted(limiters.totpFailures, failuresKey);

  const user = await deps.prisma.user.findUnique({ where: { id: claims.sub } });
  if (!user || user.status !== 'active' || !user.totpEnabled || !user.totpSecretEnc) throw unauthorized(INVALID_PARTIAL_TOKEN);
  const secret = unseal(user.totpSecretEnc, deps.config.encryptionKey);
  const step = acceptTotpCode(secret, input.code, now, user.totpLastStep);
  if (step === undefined) {
    await recordLoginFailure(deps, user, meta, 'invalid_totp_code');
    await consumeOrThrow(limiters.totpFailures, failuresKey);
    throw unauthorized(INVALID_TOTP_CODE);
  }

  // Single use: the first exchange claims the token's jti for as long as the token could live.
  const claimed = await deps.redis.set(usedKey, '1', 'EX', ttl, 'NX');
  if (claimed !== 'OK') throw unauthorized(INVALID_PARTIAL_TOKEN);
  if (!(await recordAcceptedStep(deps, user.id, step))) throw unauthorized(INVALID_TOTP_CODE);

  const membership = await membershipForLogin(deps, user.id, claims.org);
  const session = await issueSession(deps, user.id, membership.organizationId);
  await recordLogin(deps, user.id, session, membership.organizationId, meta, { second_factor: 'totp' });
  return session;
}

// ---------------------------------------------------------------------------------------------------------
// Two-factor management (sessions only: an API key, which bypasses 2FA, must not be able to change it)

function requireSession(principal: Principal): void {
  if (principal.kind !== 'session') throw forbidden('Two-factor settings can only be changed with a session, not an API key.');
}

async function currentUser(deps: CoreDeps, principal: Principal) {
  const user = await deps.prisma.user.findUnique({ where: { id: principal.userId } });
  if (!user) throw unauthorized();
  return user;
}

/** Wrong codes at the 2FA management routes count per user, with the same limit as per partial token. */
async function checkManagementCode(
  deps: AppDeps,
  limiters: RateLimiters,
  userId: string,
  secret: string,
  code: string,
  lastStep: bigint | null,
): Promise<number> {
  const failuresKey = `user:${userId}`;
  await throwIfExhausted(limiters.totpFailures, failuresKey);
  const step = acceptTotpCode(secret, code, deps.clock.now(), lastStep);
  if (step === undefined) {
    await consumeOrThrow(limiters.totpFailures, failuresKey);
    throw badRequest(INVALID_TOTP_CODE);
  }
  return step;
}

/** A user's second factor guards every organization they belong to: the change is recorded in each. */
async function recordTwoFactorChange(
  tx: Tx,
  principal: Principal,
  meta: RequestMeta,
  at: Date,
  action: 'auth.2fa_enabled' | 'auth.2fa_disabled',
): Promise<void> {
  const actor = await userActor(tx, principal.userId);
  await recordInUserOrganizations(tx, actor, meta, at, { action, target: { type: 'user', id: principal.userId } });
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

export async function setupTwoFactor(deps: AppDeps, principal: Principal) {
  requireSession(principal);
  const user = await currentUser(deps, principal);
  if (user.totpEnabled) throw conflict('Two-factor authentication is already enabled; disable it first.');
  const secret = generateTotpSecret();
  // Only the pending secret changes: 2FA is not on until a code proves the authenticator has it.
  await deps.prisma.user.update({ where: { id: user.id }, data: { totpPendingEnc: seal(secret, deps.config.encryptionKey) } });
  return { secret, otpauth_url: otpauthUrl(secret, user.email) };
}

export async function enableTwoFactor(deps: AppDeps, limiters: RateLimiters, principal: Principal, code: string, meta: RequestMeta) {
  requireSession(principal);
  const user = await currentUser(deps, principal);
  if (user.totpEnabled) throw conflict('Two-factor authentication is already enabled.');
  if (!user.totpPendingEnc) throw conflict('No two-factor setup in progress: call POST /api/v1/auth/2fa/setup first.');
  const secret = unseal(user.totpPendingEnc, deps.config.encryptionKey);
  // A fresh secret has no used codes yet; the step accepted here becomes the first used one.
  const step = await checkManagementCode(deps, limiters, user.id, secret, code, null);
  await deps.prisma.$transaction(async (tx) => {
    const updated = await tx.user.updateMany({
      where: { id: user.id, totpEnabled: false, totpPendingEnc: user.totpPendingEnc },
      data: { totpSecretEnc: user.totpPendingEnc, totpPendingEnc: null, totpEnabled: true, totpLastStep: BigInt(step) },
    });
    if (updated.count !== 1) throw conflict('Two-factor settings changed concurrently; try again.');
    await recordTwoFactorChange(tx, principal, meta, deps.clock.now(), 'auth.2fa_enabled');
  });
  return { two_factor_enabled: true };
}

export async function disableTwoFactor(deps: AppDeps, limiters: RateLimiters, principal: Principal, code: string, meta: RequestMeta) {
  requireSession(principal);
  const user = await currentUser(deps, principal);
  if (!user.totpEnabled || !user.totpSecretEnc) throw conflict('Two-factor authentication is not enabled.');
  const secret = unseal(user.totpSecretEnc, deps.config.encryptionKey);
  const step = await checkManagementCode(deps, limiters, user.id, secret, code, user.totpLastStep);
  await deps.prisma.$transaction(async (tx) => {
    const updated = await tx.user.updateMany({
      where: { id: user.id, totpEnabled: true, OR: [{ totpLastStep: null }, { totpLastStep: { lt: BigInt(step) } }] },
      data: { totpEnabled: false, totpSecretEnc: null, totpPendingEnc: null, totpLastStep: BigInt(step) },
    });
    if (updated.count !== 1) throw badRequest(INVALID_TOTP_CODE); // the same code was just used concurrently
    await recordTwoFactorChange(tx, principal, meta, deps.clock.now(), 'auth.2fa_disabled');
  });
  return { two_factor_enabled: false };
}

// ---------------------------------------------------------------------------------------------------------
// The caller

export async function describePrincipal(deps: AppDeps, principal: Principal) {
  const [user, organization] = await Promise.all([
    deps.prisma.user.findUnique({ where: { id: principal.userId } }),
    deps.prisma.organization.findUnique({ where: { id: principal.organizationId } }),
  ]);
  if (!user || !organization) throw unauthorized();
  return {
    user: { id: user.id, email: user.email, name: user.name, two_factor_enabled: user.totpEnabled },
    organization: { id: organization.id, name: organization.name },
    role: principal.role,
    credential:
      principal.kind === 'api_key'
        ? { type: 'api_key' as const, key_prefix: principal.apiKeyPrefix }
        : { type: 'session' as const },
    scopes: [...principal.scopes].sort(),
  };
}
