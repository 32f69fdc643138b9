// Security notices: a mail to the account's own address when something that decides who can act as it has changed
// (its password, its second factor, a new API key made from a session), so that a person whose session or password
// was used by someone else learns it and knows what to do. Sent after the change has committed, without holding up
// the answer; a mail that cannot be sent is logged (the user's id, never the contents) and changes nothing. Sent
// by the API process itself: one that stops right after a change loses its notice (the change stands, and is audited).
// The wording is @svc/domain's (security-notices.ts).
import type { ApiKey } from '@svc/db';
import { renderSecurityNotice, type SecurityNotice } from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import type { RequestMeta } from '../audit/audit.context';

/**
 * At most this many "new API key" notices a user per hour (a clock hour): one session may mint hundreds of keys a
 * minute, and each would be a mail to the owner (a flooded mailbox, the service's sending quota spent). The last one
 * says that more are not mailed one by one.
 */
export const KEY_NOTICES_PER_HOUR = 5;

/** Mails the notice to the user once the change has committed; never throws, never holds up the caller. */
export function sendSecurityNotice(
  deps: Pick<AppDeps, 'mailer' | 'logger' | 'clock' | 'config'>,
  user: { id: string; email: string; name: string },
  notice: SecurityNotice,
  meta: RequestMeta,
): void {
  const { subject, text } = renderSecurityNotice(notice, {
    name: user.name,
    at: deps.clock.now(),
    ip: meta.ip,
    publicBaseUrl: deps.config.publicBaseUrl,
  });
  deps.mailer.send({ to: user.email, subject, text }).catch((err: unknown) => {
    // A mail server's refusal may quote the recipient: the address is taken out of what is logged.
    const message = err instanceof Error ? err.message : String(err);
    deps.logger.error('Could not send a security notice', {
      notice: notice.kind,
      user_id: user.id,
      error: message.split(user.email).join('<recipient>'),
    });
  });
}

/**
 * The key's owner is told by mail of a key made from a session (the dashboard's way, and a stolen session's): never
 * its value. Keys minted by keys (a pipeline's short-lived ones) are not: that key was trusted with minting already.
 */
export async function noticeKeyCreated(
  deps: Pick<AppDeps, 'mailer' | 'logger' | 'clock' | 'config' | 'prisma' | 'redis'>,
  principal: { userId: string; organizationId: string },
  key: ApiKey,
  meta: RequestMeta,
): Promise<void> {
  const count = await keyNoticesThisHour(deps, principal.userId);
  if (count > KEY_NOTICES_PER_HOUR) {
    deps.logger.info('Security notice not sent: enough were mailed this hour', { notice: 'api_key_created', user_id: principal.userId });
    return;
  }
  const [user, organization] = await Promise.all([
    deps.prisma.user.findUnique({ where: { id: principal.userId }, select: { id: true, email: true, name: true } }),
    deps.prisma.organization.findUnique({ where: { id: principal.organizationId }, select: { name: true } }),
  ]);
  if (!user || !organization) return;
  sendSecurityNotice(
    deps,
    user,
    {
      kind: 'api_key_created',
      key: { name: key.name, prefix: key.displayPrefix, expiresAt: key.expiresAt, scopeCount: key.scopes.length },
      organizationName: organization.name,
      lastThisHour: count === KEY_NOTICES_PER_HOUR,
    },
    meta,
  );
}

/**
 * This one's number among the user's "new API key" notices of the clock hour (1 for the first). Redis unavailable:
 * 1, the notice is sent (a warning lost is worse than one mail too many).
 */
async function keyNoticesThisHour(deps: Pick<AppDeps, 'clock' | 'config' | 'redis'>, userId: string): Promise<number> {
  const hour = Math.floor(deps.clock.now().getTime() / 3_600_000);
  const counter = `${deps.config.redisPrefix}:security-notices:api_key_created:${userId}:${hour}`;
  try {
    const results = await deps.redis.multi().incr(counter).expire(counter, 2 * 3600).exec();
    const count = results?.[0]?.[1];
    return typeof count === 'number' ? count : 1;
  } catch {
    return 1;
  }
}
