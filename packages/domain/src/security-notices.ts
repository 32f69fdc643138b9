// Security notices: what the mail to an account says when something that decides who can act as it has changed (its
// password, its second factor, a new API key made from a session). Pure, so that every sender renders the same mail
// (the API sends it: apps/api/src/modules/auth/security-notices.ts).
import { oneLine } from './one-line';

export type SecurityNotice =
  | { kind: 'password_changed' }
  | { kind: 'password_reset' }
  | { kind: '2fa_enabled' }
  | { kind: '2fa_disabled' }
  | {
      kind: 'api_key_created';
      key: { name: string; prefix: string; expiresAt: Date | null; scopeCount: number };
      organizationName: string;
      /** The last one mailed this hour (the API's KEY_NOTICES_PER_HOUR): it says so. */
      lastThisHour?: boolean;
    };

export type SecurityNoticeKind = SecurityNotice['kind'];

export interface NoticeContext {
  /** The account's name as it is when the mail is sent. */
  name: string;
  /** When the change happened. */
  at: Date;
  ip: string | null | undefined;
  publicBaseUrl: string;
}

/** The subject and text of a notice (what the person reads). */
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
