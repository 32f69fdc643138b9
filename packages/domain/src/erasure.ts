// GDPR erasure: the request's life cycle, the pseudonym that replaces a person, the rule deciding when a name is
// searched in free text, and the patterns that find the person's name and e-mail in stored text. Pure: the
// worker's erasure job (apps/worker/src/erasure) runs them against the columns of the personal-data inventory
// (./personal-data-inventory).

/**
 * previewing -> awaiting_confirmation -(confirm)-> erasing -> completed; previewing | awaiting_confirmation ->
 * cancelled; previewing | erasing -> failed -(retry)-> previewing (never confirmed) or erasing (confirmed: resumes
 * where it stopped).
 */
export const ERASURE_STATUSES = ['previewing', 'awaiting_confirmation', 'erasing', 'completed', 'failed', 'cancelled'] as const;
export type ErasureStatus = (typeof ERASURE_STATUSES)[number];
/** A person has at most one request in these states (completed: already erased). */
export const BLOCKING_ERASURE_STATUSES: readonly ErasureStatus[] = ['previewing', 'awaiting_confirmation', 'erasing', 'failed', 'completed'];

/** Nothing was changed yet: the request can be cancelled. Once erasing, it finishes (or fails and is retried). */
export const canCancelErasure = (status: string): boolean => status === 'previewing' || status === 'awaiting_confirmation';
export const canRetryErasure = (status: string): boolean => status === 'failed';
export const canConfirmErasure = (status: string): boolean => status === 'awaiting_confirmation';
/** Where a retried request goes back to: a confirmed request resumes erasing, an unconfirmed one is previewed again. */
export const retriedErasureStatus = (confirmed: boolean): ErasureStatus => (confirmed ? 'erasing' : 'previewing');

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

/** Fewest letters (all words together) of a name searched in free text. */
export const MIN_SEARCHED_NAME_LETTERS = 5;
// A word of a name: letters (any script, with their combining marks), inner apostrophes or hyphens, an optional
// final period (an initial). No digit, no symbol, no inner period: "$2b", "northwind.example", "a1b2" are not words.
const NAME_WORD = /^\p{L}[\p{L}\p{M}'’-]*\.?$/u;

/**
 * The name as searched in free text, or null when it is not searched (only the exact e-mail is, then). A name is
 * searched when it is a full name: at least two words, each made of letters only (see NAME_WORD), at least two
 * of them with two letters or more, and at least MIN_SEARCHED_NAME_LETTERS letters in all. One word ("Northwind")
 * is an ordinary word of other text; anything with digits or symbols ("$2b", "northwind.example", hex) can be
 * the prefix of a hash, a number or a domain. Matches are case-insensitive whole words, and only in the
 * requesting organization's rows.
 */
export function searchableName(name: string): string | null {
  const words = name.trim().split(/\s+/).filter(Boolean);
  if (words.length < 2 || !words.every((w) => NAME_WORD.test(w))) return null;
  const letters = words.map((w) => w.replace(/[^\p{L}]/gu, '').length);
  if (letters.filter((n) => n >= 2).length < 2) return null;
  if (letters.reduce((a, b) => a + b, 0) < MIN_SEARCHED_NAME_LETTERS) return null;
  return words.join(' ');
}

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
// In JSON text a line break or tab inside a string is written `\n`, `\t`...: its letter is no part of the word after it.
const JSON_ESCAPE_BEFORE = '(?<=\\\\[bfnrt])';
const jsonBefore = (before: string) => `(?:${before}|${JSON_ESCAPE_BEFORE})`;

export interface TextReplacement {
  what: 'email' | 'name';
  /** PostgreSQL regex (case-insensitive use) for plain text columns. */
  pattern: string;
  /** The same for JSON text, where the literal appears JSON-escaped. */
  jsonPattern: string;
  replacement: string;
}

/** The free-text replacements of one erasure, e-mail first (an address may contain the name). */
export function erasureReplacements(person: { name: string | null; email: string }, pseudonym: Pseudonym): TextReplacement[] {
  const out: TextReplacement[] = [];
  const email = person.email.trim();
  if (email) {
    out.push({
      what: 'email',
      pattern: EMAIL_BEFORE + escapePgRegex(email) + EMAIL_AFTER,
      jsonPattern: jsonBefore(EMAIL_BEFORE) + escapePgRegex(jsonEscaped(email)) + EMAIL_AFTER,
      replacement: pseudonym.email,
    });
  }
  const name = person.name === null ? null : searchableName(person.name);
  if (name) {
    const words = name.split(' ');
    out.push({
      what: 'name',
      pattern: NAME_BEFORE + words.map(escapePgRegex).join('[[:space:]]+') + NAME_AFTER,
      jsonPattern: jsonBefore(NAME_BEFORE) + words.map((w) => escapePgRegex(jsonEscaped(w))).join('[[:space:]]+') + NAME_AFTER,
      replacement: pseudonym.name,
    });
  }
  return out;
}

/** E-mail addresses are compared case-insensitively, without surrounding spaces. */
export const normalizedEmail = (email: string): string => email.trim().toLowerCase();

/** Whether an address is an erased account's pseudonym (PSEUDONYM_EMAIL_DOMAIN): never mailed, never a person to find. */
export const isErasedAddress = (email: string): boolean => normalizedEmail(email).endsWith(`@${PSEUDONYM_EMAIL_DOMAIN}`);

/** What stands for a match in a preview sample: the sample never shows the person's name or e-mail. */
export const PREVIEW_MASK = { email: '[e-mail]', name: '[name]' } as const;
const EXCERPT_CONTEXT = 40;

/**
 * A short excerpt of masked text around its first mask, e.g. "...assigned to [name] after the..." (the text
 * around it is the organization's own record, shown to its owner or admin).
 */
export function previewExcerpt(masked: string): string {
  const positions = [masked.indexOf(PREVIEW_MASK.email), masked.indexOf(PREVIEW_MASK.name)].filter((i) => i >= 0);
  const at = positions.length ? Math.min(...positions) : 0;
  const start = Math.max(0, at - EXCERPT_CONTEXT);
  const end = Math.min(masked.length, at + EXCERPT_CONTEXT + 8);
  return `${start > 0 ? '…' : ''}${masked.slice(start, end)}${end < masked.length ? '…' : ''}`;
}

/** A preview without its excerpts: they quote the organization's text, kept only until the owner or admin decides. */
export function previewWithoutSamples<T>(preview: T): T {
  if (!preview || typeof preview !== 'object' || !Array.isArray((preview as { columns?: unknown }).columns)) return preview;
  const p = preview as unknown as { columns: Array<Record<string, unknown>> };
  return { ...p, columns: p.columns.map((c) => ({ ...c, samples: [] })) } as unknown as T;
}
