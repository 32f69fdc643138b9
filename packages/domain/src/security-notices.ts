// Security notices: what the mail to an account says when something that decides who can act as it has changed (its
// password, its second factor, a new API key made from a session), how a notice is kept until it is sent (the
// `details` of a security_notices row: only what the wording needs, never a secret, never the mail's text), and when
// a notice that could not be sent is tried again. Pure: the API (which writes the notice in the change's transaction
// and sends it after commit) and the worker (whose sweep sends what the API did not) both render from here; the
// sending itself is packages/outbox/src/security-notices.ts.
import { oneLine } from './one-line';
import { retryDelayMs, type BackoffOptions } from './retry-policy';

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

// ---- kept until sent ----

/** The `details` of a stored notice (snake_case JSON): what the wording needs besides the account. */
export type SecurityNoticeDetails =
  | Record<string, never>
  | {
      key_name: string;
      key_prefix: string;
      key_expires_at: string | null;
      key_scope_count: number;
      organization_name: string;
      last_this_hour: boolean;
    };

export function securityNoticeDetails(notice: SecurityNotice): SecurityNoticeDetails {
  if (notice.kind !== 'api_key_created') return {};
  return {
    key_name: notice.key.name,
    key_prefix: notice.key.prefix,
    key_expires_at: notice.key.expiresAt?.toISOString() ?? null,
    key_scope_count: notice.key.scopeCount,
    organization_name: notice.organizationName,
    last_this_hour: notice.lastThisHour === true,
  };
}

const SIMPLE_KINDS: ReadonlySet<string> = new Set(['password_changed', 'password_reset', '2fa_enabled', '2fa_disabled']);

/** A stored notice back as a notice; undefined for a kind or details this version cannot render. */
export function securityNoticeFromStored(kind: string, details: unknown): SecurityNotice | undefined {
  if (SIMPLE_KINDS.has(kind)) return { kind } as SecurityNotice;
  if (kind !== 'api_key_created' || typeof details !== 'object' || details === null) return undefined;
  const d = details as Record<string, unknown>;
  const expiresAt = d.key_expires_at === null ? null : typeof d.key_expires_at === 'string' ? new Date(d.key_expires_at) : undefined;
  if (
    typeof d.key_name !== 'string' ||
    typeof d.key_prefix !== 'string' ||
    typeof d.key_scope_count !== 'number' ||
    typeof d.organization_name !== 'string' ||
    expiresAt === undefined ||
    (expiresAt !== null && Number.isNaN(expiresAt.getTime()))
  ) {
    return undefined;
  }
  return {
    kind,
    key: { name: d.key_name, prefix: d.key_prefix, expiresAt, scopeCount: d.key_scope_count },
    organizationName: d.organization_name,
    lastThisHour: d.last_this_hour === true,
  };
}

/** The API sends a notice itself right after the commit; the worker's sweep leaves it alone this long. */
export const SECURITY_NOTICE_SWEEP_DELAY_MS = 5_000;
/** A notice that could not be sent is tried again until it is this old, then given up. */
export const SECURITY_NOTICE_GIVE_UP_MS = 24 * 3600 * 1000;
/** Sent and given-up notices are purged this long after the change. */
export const SECURITY_NOTICE_RETENTION_MS = 30 * 24 * 3600 * 1000;
/**
 * The waits between attempts: 30 s, 2 min, 8 min, 32 min, then hourly (+-20 %), the webhook schedule with a shorter
 * cap: a mail server back after an outage gets the notices within the hour.
 */
export const SECURITY_NOTICE_BACKOFF: Readonly<BackoffOptions> = Object.freeze({ baseMs: 30_000, factor: 4, maxMs: 3600 * 1000, jitter: 0.2 });

/**
 * After failed attempt `attempts` (1-based) at `now` of a notice of a change at `createdAt`: when to try again, or
 * null to give up (it has been tried for SECURITY_NOTICE_GIVE_UP_MS). The last try is at that age, not later.
 */
export function securityNoticeRetryAt(createdAt: Date, attempts: number, now: Date, random?: () => number): Date | null {
  const giveUpAt = createdAt.getTime() + SECURITY_NOTICE_GIVE_UP_MS;
  if (now.getTime() >= giveUpAt) return null;
  const wait = retryDelayMs(attempts, { ...SECURITY_NOTICE_BACKOFF, ...(random && { random }) });
  return new Date(Math.min(now.getTime() + wait, giveUpAt));
}
