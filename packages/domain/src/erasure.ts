// GDPR erasure: the request's life cycle, the pseudonym that replaces a person, and the patterns that find the
// person's name and e-mail in stored text. Pure: the worker's erasure job (apps/worker/src/erasure) runs them
// against the database.

export const ERASURE_STATUSES = ['pending', 'completed', 'failed', 'cancelled'] as const;
export type ErasureStatus = (typeof ERASURE_STATUSES)[number];

/** Only a pending request can be cancelled; only a failed one retried (back to pending). */
export const canCancelErasure = (status: string): boolean => status === 'pending';
export const canRetryErasure = (status: string): boolean => status === 'failed';

/** The domain of pseudonymous addresses: `.invalid` is reserved (RFC 2606), so no mail can ever reach one. */
export const PSEUDONYM_EMAIL_DOMAIN = 'erased.invalid';

export interface Pseudonym {
  name: string;
  email: string;
}

/** The pseudonym of one request, from its id: stable across retries, unique per request, no trace of the person. */
export function pseudonymFor(requestId: string): Pseudonym {
  const tag = requestId.slice(requestId.indexOf('_') + 1).slice(-10);
  return { name: `Erased person ${tag}`, email: `erased-${tag}@${PSEUDONYM_EMAIL_DOMAIN}` };
}

/** Shorter names are not searched for in free text (they would match inside ordinary words); exact fields still go. */
export const MIN_SEARCHED_NAME_LENGTH = 3;

/** Escapes a literal for a PostgreSQL advanced regular expression. */
export function escapePgRegex(literal: string): string {
  return literal.replace(/[\\^$.|?*+()[\]{}]/g, (c) => `\\${c}`);
}

/** How a string appears inside JSON text (quotes, backslashes and control characters escaped). */
export function jsonEscaped(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

// Word boundaries: a match must not continue a longer word or address on either side.
const NAME_BEFORE = '(?<![[:alnum:]_])';
const NAME_AFTER = '(?![[:alnum:]_])';
const EMAIL_BEFORE = '(?<![[:alnum:]_.+-])';
const EMAIL_AFTER = '(?![[:alnum:]_-])(?!\\.[[:alnum:]])';

export interface TextReplacement {
  /** PostgreSQL regex (case-insensitive use) for plain text columns. */
  pattern: string;
  /** The same for JSON text, where the literal appears JSON-escaped. */
  jsonPattern: string;
  replacement: string;
}

/** The replacements of one erasure, e-mail first (an address may contain the name). */
export function erasureReplacements(person: { name: string; email: string }, pseudonym: Pseudonym): TextReplacement[] {
  const out: TextReplacement[] = [];
  const email = person.email.trim();
  if (email) {
    out.push({
      pattern: EMAIL_BEFORE + escapePgRegex(email) + EMAIL_AFTER,
      jsonPattern: EMAIL_BEFORE + escapePgRegex(jsonEscaped(email)) + EMAIL_AFTER,
      replacement: pseudonym.email,
    });
  }
  const name = person.name.trim();
  if (name.length >= MIN_SEARCHED_NAME_LENGTH) {
    out.push({
      pattern: NAME_BEFORE + escapePgRegex(name) + NAME_AFTER,
      jsonPattern: NAME_BEFORE + escapePgRegex(jsonEscaped(name)) + NAME_AFTER,
      replacement: pseudonym.name,
    });
  }
  return out;
}
