// TOTP (RFC 6238) for two-factor login. speakeasy computes and checks the codes; this module pins the
// settings that speakeasy gets wrong by default (DESIGN.md, Library pitfalls):
// - the secret is always base32 (speakeasy defaults to 'ascii');
// - an empty or malformed secret is refused outright (it would make codes trivially guessable);
// - a window of one step either side, time taken from the injected clock;
// - replay protection: the caller passes the last accepted step and any code at or below it is refused
//   (speakeasy has no replay tracking; RFC 6238 section 5.2).
import { randomBytes } from 'node:crypto';
import speakeasy from 'speakeasy';

export const TOTP_STEP_SECONDS = 30;
export const TOTP_WINDOW = 1;
export const TOTP_DIGITS = 6;
const SECRET_BYTES = 20; // 160 bits, the RFC 4226 recommendation for HMAC-SHA1
const ISSUER = 'Security Assessment Service';
const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const BASE32_SECRET = /^[A-Z2-7]{16,}$/;
const CODE = new RegExp(`^\\d{${TOTP_DIGITS}}$`);

/** RFC 4648 base32 without padding, the form authenticator apps and `oathtool -b` expect. */
export function base32Encode(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const byte of bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32_ALPHABET[(buffer << (5 - bits)) & 31];
  return out;
}

export function generateTotpSecret(): string {
  return base32Encode(randomBytes(SECRET_BYTES));
}

/** Key Uri Format (otpauth://totp/Issuer:account?secret=...&issuer=...), as authenticator apps read it. */
export function otpauthUrl(secret: string, accountName: string): string {
  const label = `${encodeURIComponent(ISSUER)}:${encodeURIComponent(accountName)}`;
  const params = [
    ['secret', secret],
    ['issuer', ISSUER],
    ['algorithm', 'SHA1'],
    ['digits', String(TOTP_DIGITS)],
    ['period', String(TOTP_STEP_SECONDS)],
  ];
  return `otpauth://totp/${label}?${params.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')}`;
}

/** The time step a time falls in. */
export function totpStepAt(now: Date): number {
  return Math.floor(now.getTime() / 1000 / TOTP_STEP_SECONDS);
}

/**
 * Checks a code against the secret at `now` (+-1 step) and returns the time step it belongs to, or undefined
 * when it matches no step of the window or only a step at or below `lastAcceptedStep` (a replay).
 */
export function acceptTotpCode(
  secret: string,
  code: string,
  now: Date,
  lastAcceptedStep: bigint | number | null | undefined,
): number | undefined {
  if (!BASE32_SECRET.test(secret)) throw new Error('Refusing to check a TOTP code against an empty or malformed secret');
  if (!CODE.test(code)) return undefined;
  const time = Math.floor(now.getTime() / 1000);
  const match = speakeasy.totp.verifyDelta({
    secret,
    encoding: 'base32',
    token: code,
    time,
    step: TOTP_STEP_SECONDS,
    window: TOTP_WINDOW,
    digits: TOTP_DIGITS,
    algorithm: 'sha1',
  });
  if (!match) return undefined;
  const step = totpStepAt(now) + match.delta;
  if (lastAcceptedStep !== null && lastAcceptedStep !== undefined && step <= Number(lastAcceptedStep)) return undefined;
  return step;
}

export const INVALID_TOTP_CODE = 'Invalid two-factor code.';
