// A mail send's error, fit for a log. Mail servers quote the recipient in their refusals ("550 5.1.1
// <ada@example.com>: Recipient address rejected"), as it went over SMTP (an international domain punycoded) or in
// their own casing, and transports may name it elsewhere (the outbox folder's path): every address is taken out.
import { domainToASCII, domainToUnicode } from 'node:url';

/** What a recipient of the send becomes in the logged text. */
const RECIPIENT_IN_LOG = '<recipient>';
/** What any other address becomes. */
const ADDRESS_IN_LOG = '<address>';

/** What ends an address outside quotes: a space, or a delimiter around addresses in prose or headers. */
const DELIMITERS = String.raw`\s<>()[\]{}"',;:`;
const ATOM = `[^${DELIMITERS}]`;
/** An address: a local part (or a quoted one) @ a domain (or a bracketed address literal). */
const ADDRESS = new RegExp(String.raw`(?:"[^"\r\n]*"|${ATOM}+)@(?:\[[^\]\s]*\]|${ATOM}+)`, 'gu');

/**
 * The message of `err` (a thrown value that is not an Error: its string) with each of `recipients` replaced by
 * `<recipient>`, in any case and with its domain punycoded or not, and every other address by `<address>`.
 */
export function mailErrorForLog(err: unknown, recipients: string | readonly string[] = []): string {
  let text = err instanceof Error ? err.message : String(err);
  for (const spelling of spellings(typeof recipients === 'string' ? [recipients] : recipients)) {
    text = text.replace(standingAlone(spelling), RECIPIENT_IN_LOG);
  }
  return text.replace(ADDRESS, ADDRESS_IN_LOG);
}

/** Each recipient as stored, with its domain in ASCII (punycode) and in Unicode; longest first. */
function spellings(recipients: readonly string[]): string[] {
  const all = new Set<string>();
  for (const recipient of recipients) {
    const at = recipient.lastIndexOf('@');
    if (at <= 0) continue;
    const [local, domain] = [recipient.slice(0, at), recipient.slice(at + 1)];
    for (const spelled of [domain, domainToASCII(domain), domainToUnicode(domain)]) {
      if (spelled) all.add(`${local}@${spelled}`.toLowerCase());
    }
  }
  return [...all].sort((a, b) => b.length - a.length);
}

/**
 * `spelling` in any case, but not as part of a longer address ("ada@example.com" is no recipient in
 * "grace-ada@example.com.test"): before it a delimiter, a path's slash or nothing; after it no more of a domain.
 */
function standingAlone(spelling: string): RegExp {
  const escaped = spelling.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(String.raw`(?<![^${DELIMITERS}/\\=])${escaped}(?!\.?[^${DELIMITERS}.])`, 'giu');
}

/**
 * True when the mail server refused the recipients' addresses for good: every recipient answered at RCPT TO with an
 * SMTP 5xx whose enhanced status says the address is bad (5.1.x: no such mailbox, bad domain...). Sending the same
 * mail again will not help, unlike a server out of reach or a 4xx (try later). A refusal of the service itself is
 * not one (MAIL FROM or DATA refused, 5.7.x relay access denied: the service's mail setup, to be fixed by its
 * operator, and every address would get it).
 */
export function isRecipientRefused(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, command, response } = err as { code?: unknown; command?: unknown; response?: unknown };
  return code === 'EENVELOPE' && command === 'RCPT TO' && typeof response === 'string' && /^5\d\d[ -]5\.1\.\d{1,3}\b/.test(response);
}
