// Security notices: a mail to the account's own address when something that decides who can act as it has changed
// (its password, its second factor, a new API key made from a session), so that a person whose session or password
// was used by someone else learns it and knows what to do. Sent after the change has committed, without holding up
// the answer; a mail that cannot be sent is logged (the user's id, never the contents) and changes nothing. Sent
// by the API process itself: one that stops right after a change loses its notice (the change stands, and is audited).
import type { ApiKey } from '@svc/db';
import { oneLine } from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import type { RequestMeta } from '../audit/audit.context';

export type SecurityNotice =
  | { kind: 'password_changed' }
  | { kind: 'password_reset' }
  | { kind: '2fa_enabled' }
  | { kind: '2fa_disabled' }
  | {
      kind: 'api_key_created';
      key: { name: string; prefix: string; expiresAt: Date | null; scopeCount: number };
      organizationName: string;
      /** The last one mailed this hour (KEY_NOTICES_PER_HOUR): it says so. */
      lastThisHour?: boolean;
    };

/**
 * At most this many "new API key" notices a user per hour (a clock hour): one session may mint hundreds of keys a
 * minute, and each would be a mail to the owner (a flooded mailbox, the service's sending quota spent). The last one
 * says that more are not mailed one by one.
 */
export const KEY_NOTICES_PER_HOUR = 5;

export interface NoticeContext {
  name: string;
  at: Date;
  ip: string | null | undefined;
  publicBaseUrl: string;
}

/** The subject and text of a notice (pure: what the person reads). */
export function renderSecurityNotice(notice: SecurityNotice, context: NoticeContext): { subject: string; text: string } {
  const { subject, happened, ifNotYou } = wording(notice, context.publicBaseUrl);
  const from = context.ip ? ` from the address ${context.ip}` : '';
  const text =
    `Hello ${oneLine(context.name)},\n\n` +
    `${happened}\n\n` +
    `When: ${context.at.toISOString()}${from}.\n\n` +
    `If this was you, there is nothing to do. If it was not, ${ifNotYou}\n`;
  return { subject, text };
}

function wording(notice: SecurityNotice, base: string): { subject: string; happened: string; ifNotYou: string } {
  const reset = `reset your password now (${base}/forgot-password): that signs every session out`;
  const keys = `${base}/settings/api-keys`;
  switch (notice.kind) {
    case 'password_changed':
      return {
        subject: 'Your password was changed',
        happened: 'The password of your Security Assessment Service account was changed. Your other sessions were signed out.',
        ifNotYou: `${reset}, then review your API keys (${keys}).`,
      };
    case 'password_reset':
      return {
        subject: 'Your password was reset',
        happened: 'The password of your Security Assessment Service account was reset through the link mailed to this address. All your sessions were signed out.',
        ifNotYou: `someone can read this mailbox: secure it first, then ${reset}, and review your API keys (${keys}).`,
      };
    case '2fa_enabled':
      return {
        subject: 'Two-factor authentication was turned on',
        happened: 'Two-factor authentication was turned on for your Security Assessment Service account. Your other sessions were signed out.',
        ifNotYou: `someone who knows your password did this, and signing in (a password reset too) now asks for a code from their authenticator: contact your organization's owner and the service's support.`,
      };
    case '2fa_disabled':
      return {
        subject: 'Two-factor authentication was turned off',
        happened: 'Two-factor authentication was turned off for your Security Assessment Service account: signing in now needs the password only.',
        ifNotYou: `${reset}, turn two-factor authentication on again (${base}/profile), and review your API keys (${keys}).`,
      };
    case 'api_key_created': {
      const { key } = notice;
      const expires = key.expiresAt ? `expires ${key.expiresAt.toISOString()}` : 'never expires';
      return {
        subject: 'A new API key was created',
        happened:
          `An API key was created for your account in the organization ${oneLine(notice.organizationName)}: "${oneLine(key.name)}" ` +
          `(${key.prefix}…, ${key.scopeCount} scope${key.scopeCount === 1 ? '' : 's'}, ${expires}).`,
        ifNotYou:
          `revoke it now (${keys}), then ${reset}.` +
          (notice.lastThisHour ? ` More keys made within this hour are not mailed one by one: see them all at ${keys}.` : ''),
      };
    }
  }
}

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
