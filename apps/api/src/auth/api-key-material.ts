// API key values: `sk-svc-` + 32 random bytes (base64url) + a 6-character base62 CRC32 checksum, as GitHub's
// tokens do, so secret scanners recognise a real key offline and a mistyped key is refused before any lookup.
// Only an HMAC of the value (keyed with a server pepper) is stored; lookups are by that hash.
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { hmacHex } from '../lib/crypto';

export const API_KEY_PREFIX = 'sk-svc-';
const BODY_LENGTH = 43; // base64url of 32 bytes
const CHECKSUM_LENGTH = 6;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[A-Za-z0-9_-]{${BODY_LENGTH}}[0-9A-Za-z]{${CHECKSUM_LENGTH}}$`);

function base62(value: number, width: number): string {
  let out = '';
  while (value > 0) {
    out = BASE62[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out.padStart(width, '0');
}

function checksumOf(body: string): string {
  return base62(crc32(body), CHECKSUM_LENGTH);
}

export function generateApiKeyValue(): string {
  const body = randomBytes(32).toString('base64url');
  return `${API_KEY_PREFIX}${body}${checksumOf(body)}`;
}

export function looksLikeApiKey(credential: string): boolean {
  return credential.startsWith(API_KEY_PREFIX);
}

/** Format and checksum only: no secret is involved, so this runs before any database lookup. */
export function hasValidChecksum(value: string): boolean {
  if (!KEY_PATTERN.test(value)) return false;
  const body = value.slice(API_KEY_PREFIX.length, API_KEY_PREFIX.length + BODY_LENGTH);
  return checksumOf(body) === value.slice(-CHECKSUM_LENGTH);
}

export function hashApiKey(value: string, pepper: string): string {
  return hmacHex(pepper, value);
}

/** What may be shown of a key after creation: the prefix and the first four characters of its body. */
export function displayPrefix(value: string): string {
  return value.slice(0, API_KEY_PREFIX.length + 4);
}
