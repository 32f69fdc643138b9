// The second step of a login with TOTP on: a partial token and a code exchanged, once, for a session.
import type { AppDeps } from '../../app-deps';
import { PARTIAL_AUDIENCE, passwordFingerprint, verifyToken, type TokenClaims } from '../../auth/tokens';
import { unauthorized } from '../../http/errors';
import { reserveGuess, type RateLimiters } from '../../http/rate-limit';
import { unseal } from '@svc/db';
import type { RequestMeta } from '../audit/audit.context';
import { issueSignInSession, recordLoginFailure, type CoreDeps } from './login';
import { lockedCredentials, type IssuedSession } from './sessions';
import { acceptTotpCode, INVALID_TOTP_CODE } from './totp';

const INVALID_PARTIAL_TOKEN = 'Invalid or expired partial token: log in again.';

/** Stores the accepted step only if it is newer than the stored one: a concurrent replay loses. */
async function recordAcceptedStep(deps: CoreDeps, userId: string, step: number): Promise<boolean> {
  const updated = await deps.prisma.user.updateMany({
    where: { id: userId, OR: [{ totpLastStep: null }, { totpLastStep: { lt: BigInt(step) } }] },
    data: { totpLastStep: BigInt(step) },
  });
  return updated.count === 1;
}

/** A partial token earned with a password (login.ts) is good only while that password is the account's. */
function passwordStillHolds(deps: CoreDeps, claims: TokenClaims, passwordHash: string | null): boolean {
  return claims.pwf === undefined || claims.pwf === passwordFingerprint(passwordHash, deps.config.jwtSecret);
}

/** The partial token's user, still able to finish this sign-in, and the step its code is good for (undefined: a wrong code). */
async function checkSecondFactor(deps: CoreDeps, claims: TokenClaims, code: string, now: Date) {
  const user = await deps.prisma.user.findUnique({ where: { id: claims.sub } });
  if (!user || user.status !== 'active' || !user.totpEnabled || !user.totpSecretEnc) throw unauthorized(INVALID_PARTIAL_TOKEN);
  if (!passwordStillHolds(deps, claims, user.passwordHash)) throw unauthorized(INVALID_PARTIAL_TOKEN);
  const secret = unseal(user.totpSecretEnc, deps.config.encryptionKey);
  return { user, step: acceptTotpCode(secret, code, now, user.totpLastStep) };
}

export async function loginWithSecondFactor(
  deps: AppDeps,
  limiters: RateLimiters,
  input: { partial_token: string; code: string },
  meta: RequestMeta,
): Promise<{ session: IssuedSession; signedIn: { email: string; passwordHash: string | null } }> {
  const now = deps.clock.now();
  const ttl = deps.config.partialTokenTtlSeconds;
  const claims = verifyToken(input.partial_token, PARTIAL_AUDIENCE, ttl, deps.config.jwtSecret, now);
  if (!claims) throw unauthorized(INVALID_PARTIAL_TOKEN);
  const usedKey = `${deps.config.redisPrefix}:partial-used:${claims.jti}`;
  if (await deps.redis.exists(usedKey)) throw unauthorized(INVALID_PARTIAL_TOKEN);

  // After TOTP_MAX_FAILURES wrong codes the partial token is locked (429) for the rest of its life. Wrong codes also
  // count per user, over every partial token (and the 2FA management routes, the same secret): with the password,
  // a fresh partial token is one login away, so a per-token count alone let guessing go on at the login limit's pace.
  // The guess's point is taken before the code is checked (reserveGuess): a burst gets no more guesses than the limit.
  const guess = await reserveGuess(limiters.totpFailures, [`user:${claims.sub}`, `partial:${claims.jti}`]);
  const checked = await checkSecondFactor(deps, claims, input.code, now).catch(async (err: unknown) => {
    await guess.refund();
    throw err;
  });
  if (checked.step === undefined) {
    await recordLoginFailure(deps, checked.user, meta, 'invalid_totp_code');
    throw unauthorized(INVALID_TOTP_CODE);
  }
  await guess.refund();
  const { user, step } = checked;

  // Single use: the first exchange claims the token's jti for as long as the token could live.
  const claimed = await deps.redis.set(usedKey, '1', 'EX', ttl, 'NX');
  if (claimed !== 'OK') throw unauthorized(INVALID_PARTIAL_TOKEN);
  if (!(await recordAcceptedStep(deps, user.id, step))) throw unauthorized(INVALID_TOTP_CODE);

  // Issued with the user's row share-locked and the password read again: a change of password either committed
  // first, and the token is refused, or waits for this session and then ends it. The organization is read under
  // that lock too (issueSignInSession).
  const { session, passwordHash } = await deps.prisma.$transaction(async (tx) => {
    const row = await lockedCredentials(tx, user.id);
    if (!row || !passwordStillHolds(deps, claims, row.password_hash)) throw unauthorized(INVALID_PARTIAL_TOKEN);
    const issued = await issueSignInSession(deps, tx, { id: user.id, email: row.email }, claims.org, { meta, metadata: { second_factor: 'totp' } });
    return { session: issued, passwordHash: row.password_hash };
  });
  // The password the session was issued under: the login_device cookie vouches while it is the account's.
  return { session, signedIn: { email: user.email, passwordHash } };
}
