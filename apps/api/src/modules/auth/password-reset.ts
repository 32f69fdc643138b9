// Resetting a forgotten password by e-mail: a request mails a single-use link (only the token's sha256 is stored, it
// lives 30 minutes, and only the newest one works); the confirmation sets the new password, with a current TOTP code
// when the account has 2FA on, ends every session of the account, and is audited in each of its organizations.
//
// What a request answers says nothing about the account (docs/api.md): the same 202 for an unknown e-mail, a pending
// account and an active one, after the same work on the request path (two rate-limit counts and one lookup, no
// bcrypt, no mail). The token and the mail are made after the answer. Only an active account gets a mail (a pending
// one verifies its address first; an account without a password, GitHub or Google sign-in, may set one this way), and
// not an erased one (GDPR: its address is the pseudonym, and the address it had is no longer the account's).
// A request of a known account is audited in each of its organizations after the answer, with what became of the
// mail; an unknown e-mail is not (the log would fill with other people's addresses), nor a request refused by the
// rate limits (a flood would fill it).
// The link carries the token in the URL fragment (/reset-password#token=...): a browser never sends the fragment to
// the server (no access log holds it) nor in a Referer.
import bcrypt from 'bcrypt';
import { newId, unseal, type Tx } from '@svc/db';
import { isErasedAddress } from '@svc/domain';
import { oneLine } from '@svc/domain';
import { mailErrorForLog } from '@svc/mail';
import type { AppDeps } from '../../app-deps';
import { badRequest, conflict, HttpError } from '../../http/errors';
import { clientAddressKey, consumeOrThrow, type RateLimiters } from '../../http/rate-limit';
import { randomToken, sha256Hex } from '../../lib/crypto';
import { recordInUserOrganizations, type RequestMeta } from '../audit/audit.context';
import { emailLimiterKey } from './login';
import { recordSecurityNotice, sendSecurityNoticeNow } from './security-notices';
import { revokeAllSessions } from './sessions';
import { INVALID_TOTP_CODE } from './totp';
import { checkUserTotpCode } from './two-factor';

export const RESET_PASSWORD_PURPOSE = 'reset_password';

/**
 * Spends every reset link of the user not used yet: once the password is set again (a reset, a change), a link asked
 * for before it, perhaps by someone who read the mail, must not set another one.
 */
export async function spendResetLinks(tx: Tx, userId: string, now: Date): Promise<void> {
  await tx.emailToken.updateMany({ where: { userId, purpose: RESET_PASSWORD_PURPOSE, usedAt: null }, data: { usedAt: now } });
}
export const RESET_PASSWORD_TTL_MS = 30 * 60 * 1000;

const INVALID_RESET_TOKEN = 'Invalid, expired or already used password-reset link: ask for a new one.';

/** The user's row locked for an update of its credentials (reset tokens are always written after it: one lock order). */
export async function lockUser(
  tx: Pick<Tx, '$queryRaw'>,
  userId: string,
): Promise<{ status: string; email: string; passwordHash: string | null } | undefined> {
  const [row] = await tx.$queryRaw<Array<{ status: string; email: string; passwordHash: string | null }>>`
    SELECT status::text AS status, email, password_hash AS "passwordHash" FROM users WHERE id = ${userId} FOR NO KEY UPDATE`;
  return row;
}

/** Whether the account gets a reset link: an active one, not erased (an erased account is still active, its address the pseudonym). */
function getsResetMail(user: { status: string; email: string }): boolean {
  return user.status === 'active' && !isErasedAddress(user.email);
}

/** The link of the reset mail: the dashboard page, the token in the fragment. */
export function resetPasswordLink(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl}/reset-password#token=${encodeURIComponent(token)}`;
}

export async function requestPasswordReset(deps: AppDeps, limiters: RateLimiters, email: string, meta: RequestMeta) {
  // Counted before anything is looked up, the same for every e-mail: a 429 tells nothing about the account either.
  await consumeOrThrow(limiters.passwordResetPerAddress, clientAddressKey(meta.ip));
  await consumeOrThrow(limiters.passwordResetPerEmail, emailLimiterKey(email));
  const user = await deps.prisma.user.findUnique({ where: { email }, select: { id: true, email: true, name: true, status: true } });
  // An erased account gets nothing, and belongs to no organization to record it in.
  if (user && !isErasedAddress(user.email)) {
    const at = deps.clock.now();
    // Not awaited: a known account must not answer more slowly than an unknown one, nor fail where it would not
    // (a mail server that is down, an audit write held up). A failure is logged, never the token or the address.
    deps.afterAnswer.run('record a password-reset request', () => followUpResetRequest(deps, user, meta, at), { fields: { user_id: user.id } });
  }
  return { accepted: true as const };
}

/** What became of a known account's reset request, as its audit entry says. */
type ResetMailOutcome = 'sent' | 'not_sent_pending_verification' | 'not_sent_account_changed' | 'failed';

/** The mail (to an active account), then the audit entry saying how it went, dated at the request. */
async function followUpResetRequest(
  deps: AppDeps,
  user: { id: string; email: string; name: string; status: string },
  meta: RequestMeta,
  at: Date,
): Promise<void> {
  const mail = getsResetMail(user) ? await mailOutcome(deps, user) : 'not_sent_pending_verification';
  // The actor's label read now: an erasure committed meanwhile shows its pseudonym, not the address the person had.
  await recordInUserOrganizations(deps.prisma, user.id, meta, at, {
    action: 'auth.password_reset_requested',
    target: { type: 'user', id: user.id },
    metadata: { mail },
  });
}

async function mailOutcome(deps: AppDeps, user: { id: string; email: string; name: string }): Promise<ResetMailOutcome> {
  try {
    return (await mailResetLink(deps, user)) ? 'sent' : 'not_sent_account_changed';
  } catch (err) {
    deps.logger.error('Could not send a password-reset e-mail', { user_id: user.id, error: mailErrorForLog(err, user.email) });
    return 'failed';
  }
}

/**
 * Stores a new reset token of the user (the earlier unused ones end) and mails its link. False when the account
 * changed since the lookup (erased meanwhile): no token, no mail.
 */
async function mailResetLink(deps: AppDeps, user: { id: string; email: string; name: string }): Promise<boolean> {
  const token = randomToken(32);
  const now = deps.clock.now();
  const issued = await deps.prisma.$transaction(async (tx) => {
    // Locked: two requests at once leave one live token, the later one's. Read again under the lock, and the mail
    // goes only to the address read then: an erasure committed since the lookup (the address now the pseudonym,
    // the tokens deleted) gets no token, and the address the person had no link to set a password on what is left.
    const locked = await lockUser(tx, user.id);
    if (!locked || !getsResetMail(locked) || locked.email !== user.email) return false;
    await spendResetLinks(tx, user.id, now);
    await tx.emailToken.create({
      data: {
        id: newId('etk'),
        userId: user.id,
        purpose: RESET_PASSWORD_PURPOSE,
        tokenHash: sha256Hex(token),
        expiresAt: new Date(now.getTime() + RESET_PASSWORD_TTL_MS),
      },
    });
    return true;
  });
  if (!issued) return false;
  await deps.mailer.send({
    to: user.email,
    subject: 'Reset your password',
    text:
      `Hello ${oneLine(user.name)},\n\n` +
      `someone (hopefully you) asked to reset the password of your Security Assessment Service account. ` +
      `Open this link within 30 minutes to choose a new password:\n\n${resetPasswordLink(deps.config.publicBaseUrl, token)}\n\n` +
      `Only the newest link works, once. All your sessions are signed out when the password is reset; API keys stay.\n` +
      `If you did not ask for this, ignore this message: your password stays as it is.\n`,
  });
  return true;
}

export async function confirmPasswordReset(
  deps: AppDeps,
  limiters: RateLimiters,
  input: { token: string; new_password: string; code?: string },
  meta: RequestMeta,
) {
  const invalid = () => badRequest(INVALID_RESET_TOKEN);
  const now = deps.clock.now();
  const row = await deps.prisma.emailToken.findUnique({ where: { tokenHash: sha256Hex(input.token) } });
  if (!row || row.purpose !== RESET_PASSWORD_PURPOSE || row.usedAt || row.expiresAt <= now) throw invalid();
  const user = await deps.prisma.user.findUnique({ where: { id: row.userId } });
  if (!user || user.status !== 'active') throw invalid();

  // The link alone must not get past the second factor: with 2FA on, a current code too (counted with the user's
  // other wrong codes; a code at or below the last accepted step is refused, and the accepted step is stored).
  let step: number | undefined;
  if (user.totpEnabled) {
    if (!input.code) {
      throw new HttpError(400, 'This account has two-factor authentication on: send "code", a current code from the authenticator app.', {
        code: 'TOTP_REQUIRED',
      });
    }
    if (!user.totpSecretEnc) throw badRequest(INVALID_TOTP_CODE);
    const secret = unseal(user.totpSecretEnc, deps.config.encryptionKey);
    step = await checkUserTotpCode(deps, limiters, user.id, secret, input.code, user.totpLastStep);
  }

  const passwordHash = await bcrypt.hash(input.new_password, deps.config.bcryptRounds);
  const noticeId = await deps.prisma.$transaction(async (tx) => {
    // The user's row first (the order every change of credentials takes), then the token: of two confirmations at
    // once, the second waits here, then finds the token used (the same 400 as an unknown one) and changes nothing.
    await lockUser(tx, user.id);
    const claimed = await tx.emailToken.updateMany({
      where: { id: row.id, purpose: RESET_PASSWORD_PURPOSE, usedAt: null, expiresAt: { gt: now } },
      data: { usedAt: now },
    });
    if (claimed.count !== 1) throw invalid();
    // Only if the 2FA state checked above still holds (and the code's step is still newer than the last used one).
    const changed = await tx.user.updateMany({
      where: {
        id: user.id,
        status: 'active',
        totpEnabled: user.totpEnabled,
        totpSecretEnc: user.totpSecretEnc,
        ...(step !== undefined && { OR: [{ totpLastStep: null }, { totpLastStep: { lt: BigInt(step) } }] }),
      },
      data: { passwordHash, ...(step !== undefined && { totpLastStep: BigInt(step) }) },
    });
    if (changed.count !== 1) {
      throw conflict('The account changed while the reset ran (two-factor authentication, or a code used meanwhile): nothing was changed, try again.');
    }
    // The link is spent; so are any others of the user. Every session ends (there is no calling one to keep): a
    // session opened with the forgotten, perhaps stolen, password must not outlive it. A sign-in under way with the
    // old password is refused (login.ts reads the password again under the row's lock; a partial token names the
    // password it was earned with). API keys stay, as at a change of password (docs/api.md).
    await spendResetLinks(tx, user.id, now);
    await revokeAllSessions(tx, user.id, now);
    await recordInUserOrganizations(tx, user.id, meta, now, {
      action: 'auth.password_reset',
      target: { type: 'user', id: user.id },
      metadata: { sessions_revoked: true, ...(step !== undefined && { second_factor: 'totp' }) },
    });
    return recordSecurityNotice(tx, user.id, { kind: 'password_reset' }, meta, now);
  });
  sendSecurityNoticeNow(deps, noticeId, user.id);
  return { password_reset: true as const, sessions_revoked: true as const };
}
