// Text someone else chose (a key's, a subscription's or an organization's name, a receiver's error) placed on one
// line of a mail: it must write no line of its own ("If this was you...", a link) and not reorder what follows it.

/** Line breaks, other control characters and bidirectional controls become a space; runs of spaces become one. */
export function oneLine(value: string): string {
  return value
    .replace(/[\p{Cc}\p{Zl}\p{Zp}\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, ' ')
    .replace(/ {2,}/g, ' ')
    .trim();
}
