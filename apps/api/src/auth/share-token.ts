// Report share tokens: `rshare_` + 32 random bytes (base64url, 256 bits). A token is the whole credential of a
// published report link or of an e-mailed grant, so like an API key only an HMAC of it (keyed with the server
// pepper) is stored and looked up. The recognisable prefix lets logs and audit metadata mask a token wherever it
// appears (an access-log path, a pasted link).
import { randomBytes } from 'node:crypto';
import { hmacHex } from '../lib/crypto';

export const SHARE_TOKEN_PREFIX = 'rshare_';
const SHARE_TOKEN_PATTERN = /^rshare_[A-Za-z0-9_-]{43}$/;
const SHARE_TOKEN_ANYWHERE = /rshare_[A-Za-z0-9_-]+/g;

export function generateShareToken(): string {
  return `${SHARE_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** Format only: a value that cannot be a token is refused before any lookup. */
export function looksLikeShareToken(value: string): boolean {
  return SHARE_TOKEN_PATTERN.test(value);
}

export function hashShareToken(token: string, pepper: string): string {
  return hmacHex(pepper, token);
}

/** The text with every share token replaced (request paths in logs). */
export function maskShareTokens(text: string): string {
  return text.replace(SHARE_TOKEN_ANYWHERE, `${SHARE_TOKEN_PREFIX}[redacted]`);
}
