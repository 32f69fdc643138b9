// Small string helpers shared by the renderers: truncation that never splits a character.

/** The longest prefix of `text` whose UTF-8 encoding is at most `maxBytes` bytes; never splits a code point. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (!Number.isInteger(maxBytes) || maxBytes < 0) {
    throw new RangeError('maxBytes must be a non-negative integer');
  }
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) {
    return text;
  }
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > maxBytes) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end);
}

/** The longest prefix of `text` of at most `maxUnits` UTF-16 code units (Java/JS length); never splits a surrogate pair. */
export function truncateChars(text: string, maxUnits: number): string {
  if (!Number.isInteger(maxUnits) || maxUnits < 0) {
    throw new RangeError('maxUnits must be a non-negative integer');
  }
  if (text.length <= maxUnits) {
    return text;
  }
  let end = maxUnits;
  const last = text.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) {
    end -= 1; // do not keep a high surrogate without its low half
  }
  return text.slice(0, end);
}
