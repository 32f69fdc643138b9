// Security notices: a mail to the account's own address when something that decides who can act as it has changed
// (its password, its second factor, a new API key made from a session), so that a person whose session or password
// was used by someone else learns it and knows what to do. Kept until sent: the notice is written in the change's
// own transaction (recordSecurityNotice, it commits with the change or not at all), and the API sends it right
// after the commit without holding up the answer (sendSecurityNoticeNow). A mail server that refuses or is down, or
// an API process that stops right after the change, delays the notice, it does not lose it: the worker's sweep sends
// it, retrying for 24 h (@svc/outbox security-notices.ts). The wording is @svc/domain's (security-notices.ts).
import { recordSecurityNotice as recordNotice, sendSecurityNotice } from '@svc/outbox';
import type { Tx } from '@svc/db';
import type { SecurityNotice } from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import type { RequestMeta } from '../audit/audit.context';

/**
 * At most this many "new API key" notices a user per hour (a clock hour): one session may mint hundreds of keys a
 * minute, and each would be a mail to the owner (a flooded mailbox, the service's sending quota spent). The last one
 * says that more are not mailed one by one; those beyond it are not written at all.
 */
export const KEY_NOTICES_PER_HOUR = 5;

/** Writes the notice in the change's transaction; send it with sendSecurityNoticeNow once that has committed. */
export function recordSecurityNotice(tx: Pick<Tx, 'securityNotice'>, userId: string, notice: SecurityNotice, meta: RequestMeta, at: Date): Promise<string> {
  return recordNotice(tx, { userId, notice, ip: meta.ip, at });
}

/**
 * Sends a committed notice now; never throws, never holds up the caller. Whatever fails is logged (the user's id,
 * never the address or the contents) and left to the worker's sweep.
 */
export function sendSecurityNoticeNow(
  deps: Pick<AppDeps, 'mailer' | 'logger' | 'clock' | 'config' | 'prisma' | 'afterAnswer'>,
  noticeId: string,
  userId: string,
): void {
  // A failure is a database error: no address in it (a mail server's refusal is logged by the sender, without it).
  deps.afterAnswer.run('send a security notice', () => sendSecurityNotice(deps, noticeId), { fields: { user_id: userId } });
}

/**
 * Whether a "new API key" notice is written for a key the user is about to make from a session (never its value;
 * keys minted by keys, a pipeline's short-lived ones, get none: that key was trusted with minting already), and
 * whether it is the last one this hour. Counted before the key's transaction, in Redis.
 */
export async function keyNoticeAllowance(
  deps: Pick<AppDeps, 'clock' | 'config' | 'redis' | 'logger'>,
  userId: string,
): Promise<{ lastThisHour: boolean } | null> {
  const count = await keyNoticesThisHour(deps, userId);
  if (count > KEY_NOTICES_PER_HOUR) {
    deps.logger.info('Security notice not sent: enough were mailed this hour', { notice: 'api_key_created', user_id: userId });
    return null;
  }
  return { lastThisHour: count === KEY_NOTICES_PER_HOUR };
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
