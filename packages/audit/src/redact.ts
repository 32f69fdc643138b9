// A last line of defence: audit metadata is written by the callers from public fields only, but anything that
// looks like a credential is dropped (by its key) or masked (by its value) before it reaches the table.

/** Keys whose values are credentials or derived from them (by how the key ends: `secret_expires_at` is fine). */
const SECRET_KEY = /(secret|token|password|passwd|passphrase|authorization|cookie|credentials?|hash|otp|^key|_key|^code|_enc)$/i;

/** Values that are credentials whatever their key: API keys, report share tokens, webhook secrets, bearer tokens and JWTs. */
const SECRET_VALUE = [/sk-svc-[A-Za-z0-9_-]{12,}/g, /rshare_[A-Za-z0-9_-]{12,}/g, /whsec_[A-Za-z0-9_+/=-]{8,}/g, /\bBearer\s+\S+/gi, /\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g];

export const REDACTED = '[redacted]';

function redactString(value: string): string {
  return SECRET_VALUE.reduce((text, pattern) => text.replace(pattern, REDACTED), value);
}

/** A copy of `value` with secret-named keys removed and secret-looking strings masked (depth-limited). */
export function redactMetadata(value: unknown, depth = 0): unknown {
  if (depth > 6) return REDACTED;
  if (typeof value === 'string') return redactString(value);
  if (Array.isArray(value)) return value.map((v) => redactMetadata(v, depth + 1));
  if (value instanceof Date) return value.toISOString();
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined || SECRET_KEY.test(k)) continue;
      out[k] = redactMetadata(v, depth + 1);
    }
    return out;
  }
  return value;
}
