// Changing one's own password: with a session (an API key is not its user) and the current password (a stolen session
// alone must not lock the owner out). The account's other sessions end, a sign-in started with the old password
// cannot finish (login.ts, two-factor-login.ts), and the change is audited in each of the user's organizations.
// API keys stay: they are credentials of their own (docs/api.md).
import bcrypt from 'bcrypt';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, forbidden, unauthorized } from '../../http/errors';
import type { RateLimiters } from '../../http/rate-limit';
import { recordInUserOrganizations, type RequestMeta } from '../audit/audit.context';
import { spendResetLinks } from './password-reset';
import { checkCurrentPassword } from './reauthentication';
import { recordSecurityNotice, sendSecurityNoticeNow } from './security-notices';
import { keepOnlyCallingSession } from './sessions';

export async function changePassword(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  input: { current_password: string; new_password: string },
  meta: RequestMeta,
) {
  const sessionId = principal.kind === 'session' ? principal.sessionId : undefined;
  if (!sessionId) throw forbidden('The password can only be changed with a session, not an API key.');
  const user = await deps.prisma.user.findUnique({ where: { id: principal.userId } });
  if (!user) throw unauthorized();
  if (!user.passwordHash) throw conflict('This account has no password: it signs in with GitHub or Google.');
  // Counted per session (guessed here at the login's pace at most); a wrong one is audited.
  await checkCurrentPassword(deps, limiters, { ...user, passwordHash: user.passwordHash }, sessionId, input.current_password, 'password_change', meta);
  const passwordHash = await bcrypt.hash(input.new_password, deps.config.bcryptRounds);
  const now = deps.clock.now();
  const noticeId = await deps.prisma.$transaction(async (tx) => {
    const changed = await tx.user.updateMany({ where: { id: user.id, passwordHash: user.passwordHash }, data: { passwordHash } });
    if (changed.count !== 1) throw conflict('The password was changed meanwhile: sign in again with the new one.');
    await spendResetLinks(tx, user.id, now);
    // The calling session may have ended since it was authenticated, two bcrypt rounds ago (2FA turned on from
    // another session); otherwise the others end. The entry says so in each organization of the user, not how many.
    await keepOnlyCallingSession(tx, user.id, sessionId, now);
    await recordInUserOrganizations(tx, user.id, meta, now, {
      action: 'auth.password_changed',
      target: { type: 'user', id: user.id },
      metadata: { other_sessions_revoked: true },
    });
    // The account is told, whatever happens after the commit (security-notices.ts).
    return recordSecurityNotice(tx, user.id, { kind: 'password_changed' }, meta, now);
  });
  sendSecurityNoticeNow(deps, noticeId, user.id);
  return {
    answer: { password_changed: true as const, other_sessions_revoked: true as const },
    signedIn: { email: user.email, passwordHash },
  };
}
