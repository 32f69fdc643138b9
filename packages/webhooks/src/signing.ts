// SPEC "Signing": signature = lowercase hex HMAC-SHA256 of `<t>.<raw body>` keyed with the signing secret;
// header `t=<unix>,v1=<hex>[,v1=<hex>]` (new secret first during the 72 h rotation window), no spaces,
// because common receivers (the `stripe` package among them) split on `,` and `=` without trimming.
// Opt-in per subscription, the Standard Webhooks scheme (https://www.standardwebhooks.com): `webhook-signature:
// v1,<base64>` over `<id>.<timestamp>.<body>`, keyed with the base64-decoded bytes after `whsec_`.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SIGNING_SECRET_PREFIX = 'whsec_';
export const SIGNATURE_SCHEME = 'v1';
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** How a subscription's deliveries are signed: SPEC's X-Service-Signature only, or Standard Webhooks as well. */
export const SIGNATURE_SCHEMES = ['service', 'standard_webhooks'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

export function isSignatureScheme(value: unknown): value is SignatureScheme {
  return typeof value === 'string' && (SIGNATURE_SCHEMES as readonly string[]).includes(value);
}

/**
 * `whsec_` + 32 random bytes in standard base64 with padding: the form the Standard Webhooks libraries decode (their
 * key is those 32 bytes), while SPEC's scheme keys its HMAC with the whole string as before. Secrets made before
 * standard_webhooks existed are base64url (docs/webhooks.md "Verifying a signature").
 */
export function generateSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBytes(32).toString('base64');
}

function checkTimestamp(timestamp: number): void {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new RangeError(`Signature timestamp must be a non-negative integer of Unix seconds, got ${timestamp}`);
  }
}

function checkSecret(secret: string): void {
  if (typeof secret !== 'string' || secret.length === 0) {
    throw new TypeError('Signing secret must be a non-empty string');
  }
}

function toBytes(body: Buffer | Uint8Array | string): Buffer {
  if (typeof body === 'string') {
    return Buffer.from(body, 'utf8');
  }
  if (body instanceof Uint8Array) {
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  }
  throw new TypeError('Body must be a Buffer, Uint8Array or string (the raw bytes)');
}

/** Lowercase hex HMAC-SHA256 of `<timestamp>.<body>`; a string body is taken as UTF-8. */
export function signPayload(body: Buffer | Uint8Array | string, timestamp: number, secret: string): string {
  checkTimestamp(timestamp);
  checkSecret(secret);
  return createHmac('sha256', secret).update(`${timestamp}.`, 'utf8').update(toBytes(body)).digest('hex');
}

/**
 * The X-Service-Signature value: `t=<timestamp>,v1=<hex>` with one `v1` per secret, in the order given
 * (put the new secret first). Duplicate secrets are signed once.
 */
export function buildSignatureHeader(
  body: Buffer | Uint8Array | string,
  timestamp: number,
  secrets: readonly string[],
): string {
  checkTimestamp(timestamp);
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new TypeError('At least one signing secret is required');
  }
  const unique = [...new Set(secrets)];
  const parts = [`t=${timestamp}`, ...unique.map((secret) => `${SIGNATURE_SCHEME}=${signPayload(body, timestamp, secret)}`)];
  return parts.join(',');
}

export type SignatureFailureReason =
  | 'malformed_header'
  | 'no_signature'
  | 'timestamp_out_of_tolerance'
  | 'signature_mismatch';

export type VerifySignatureResult = { ok: true; timestamp: number } | { ok: false; reason: SignatureFailureReason };

export interface VerifySignatureOptions {
  /** Largest accepted |now - t| in seconds; 300 by default (SPEC). */
  toleranceSeconds?: number;
  /** Current time in epoch milliseconds; Date.now() by default. */
  now?: number;
}

export interface ParsedSignatureHeader {
  timestamp: number;
  signatures: string[];
}

/**
 * Parses `t=<unix>,v1=<hex>[,v1=<hex>...]`. Parts are trimmed; unknown schemes (v0, ...) are ignored.
 * Returns a failure reason when `t` is missing, repeated or not a whole number, or when no `v1` is present.
 */
export function parseSignatureHeader(
  header: unknown,
): { ok: true; value: ParsedSignatureHeader } | { ok: false; reason: 'malformed_header' | 'no_signature' } {
  if (typeof header !== 'string' || header.trim() === '') {
    return { ok: false, reason: 'malformed_header' };
  }
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const rawPart of header.split(',')) {
    const part = rawPart.trim();
    const eq = part.indexOf('=');
    if (eq <= 0) {
      continue;
    }
    const key = part.slice(0, eq);
    const value = part.slice(eq + 1);
    if (key === 't') {
      if (timestamp !== undefined || !/^\d{1,15}$/.test(value)) {
        return { ok: false, reason: 'malformed_header' };
      }
      timestamp = Number(value);
    } else if (key === SIGNATURE_SCHEME && value.length > 0) {
      signatures.push(value);
    }
  }
  if (timestamp === undefined) {
    return { ok: false, reason: 'malformed_header' };
  }
  if (signatures.length === 0) {
    return { ok: false, reason: 'no_signature' };
  }
  return { ok: true, value: { timestamp, signatures } };
}

function constantTimeEqualHex(candidate: string, expected: string): boolean {
  const a = Buffer.from(candidate, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  if (a.length !== b.length) {
    // Compare against itself so a wrong length costs about the same time; the answer is still false.
    timingSafeEqual(b, b);
    return false;
  }
  return timingSafeEqual(a, b);
}

/**
 * Receiver-side check of SPEC Signing step 4: parse `t=` and every `v1=` (fail if either is missing), reject when
 * |now - t| exceeds the tolerance, accept when any `v1` equals the HMAC of `<t>.<rawBody>` under any of the given
 * secrets (constant-time comparison). Pass the raw request bytes, never re-serialised JSON.
 */
export function verifySignature(
  rawBody: Buffer | Uint8Array | string,
  signatureHeader: string | null | undefined,
  secretOrSecrets: string | readonly string[],
  options: VerifySignatureOptions = {},
): VerifySignatureResult {
  const secrets = typeof secretOrSecrets === 'string' ? [secretOrSecrets] : [...secretOrSecrets];
  if (secrets.length === 0) {
    throw new TypeError('At least one signing secret is required');
  }
  secrets.forEach(checkSecret);
  const toleranceSeconds = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (!(toleranceSeconds >= 0)) {
    throw new RangeError('toleranceSeconds must be >= 0');
  }
  const now = options.now ?? Date.now();

  const parsed = parseSignatureHeader(signatureHeader);
  if (!parsed.ok) {
    return parsed;
  }
  const { timestamp, signatures } = parsed.value;
  if (Math.abs(now - timestamp * 1000) > toleranceSeconds * 1000) {
    return { ok: false, reason: 'timestamp_out_of_tolerance' };
  }
  let matched = false;
  for (const secret of secrets) {
    const expected = signPayload(rawBody, timestamp, secret);
    for (const candidate of signatures) {
      // No early exit: every pair is compared, so timing does not reveal which one matched.
      if (constantTimeEqualHex(candidate, expected)) {
        matched = true;
      }
    }
  }
  return matched ? { ok: true, timestamp } : { ok: false, reason: 'signature_mismatch' };
}

/** Boolean form of verifySignature. */
export function isValidSignature(
  rawBody: Buffer | Uint8Array | string,
  signatureHeader: string | null | undefined,
  secretOrSecrets: string | readonly string[],
  options: VerifySignatureOptions = {},
): boolean {
  return verifySignature(rawBody, signatureHeader, secretOrSecrets, options).ok;
}

const STANDARD_SIGNATURE_VERSION = 'v1';
const BASE64_ANY = /^[A-Za-z0-9+/_-]+={0,2}$/;

/**
 * The HMAC key of the Standard Webhooks scheme: the bytes the text after `whsec_` encodes. Standard base64 (what
 * generateSigningSecret makes) and base64url (older secrets) are both read, so every stored secret can sign.
 */
export function standardWebhooksKey(secret: string): Buffer {
  checkSecret(secret);
  const encoded = secret.startsWith(SIGNING_SECRET_PREFIX) ? secret.slice(SIGNING_SECRET_PREFIX.length) : secret;
  if (!BASE64_ANY.test(encoded)) {
    throw new TypeError('A Standard Webhooks secret is whsec_ followed by base64');
  }
  const key = Buffer.from(encoded, 'base64');
  if (key.length === 0) throw new TypeError('A Standard Webhooks secret must encode at least one byte');
  return key;
}

/**
 * The same secret as the Standard Webhooks libraries read it: `whsec_` + standard base64 with padding. A secret made
 * that way comes back unchanged; an older base64url one comes back re-encoded (same key bytes).
 */
export function standardWebhooksSecret(secret: string): string {
  return SIGNING_SECRET_PREFIX + standardWebhooksKey(secret).toString('base64');
}

function checkMessageId(id: string): void {
  // Signed and sent as a header value: printable ASCII only.
  if (typeof id !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(id)) {
    throw new TypeError('webhook-id must be 1 to 255 printable ASCII characters');
  }
}

/** Base64 HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed with the secret's decoded bytes (Standard Webhooks). */
export function signStandardWebhook(id: string, timestamp: number, body: Buffer | Uint8Array | string, secret: string): string {
  checkMessageId(id);
  checkTimestamp(timestamp);
  return createHmac('sha256', standardWebhooksKey(secret))
    .update(`${id}.${timestamp}.`, 'utf8')
    .update(toBytes(body))
    .digest('base64');
}

/**
 * The `webhook-signature` value: `v1,<base64>` per secret, space-separated, in the order given (new secret first
 * during a rotation). Secrets with the same key bytes are signed once.
 */
export function buildStandardWebhookSignature(
  id: string,
  timestamp: number,
  body: Buffer | Uint8Array | string,
  secrets: readonly string[],
): string {
  if (!Array.isArray(secrets) || secrets.length === 0) {
    throw new TypeError('At least one signing secret is required');
  }
  const signatures = secrets.map((secret) => `${STANDARD_SIGNATURE_VERSION},${signStandardWebhook(id, timestamp, body, secret)}`);
  return [...new Set(signatures)].join(' ');
}

/** The three Standard Webhooks headers of one request. */
export function standardWebhookHeaders(
  id: string,
  timestamp: number,
  body: Buffer | Uint8Array | string,
  secrets: readonly string[],
): { 'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string } {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': buildStandardWebhookSignature(id, timestamp, body, secrets),
  };
}
