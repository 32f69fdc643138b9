// Secrets at rest (TOTP secrets, webhook signing secrets, receiver credentials) are sealed with AES-256-GCM
// under ENCRYPTION_KEY. Format: v1.<iv b64url>.<tag b64url>.<ciphertext b64url>
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export function seal(plaintext: string, key: Buffer): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
}

export function unseal(sealed: string, key: Buffer): string {
  const [version, iv, tag, ciphertext] = sealed.split('.');
  if (version !== 'v1' || !iv || !tag || ciphertext === undefined) throw new Error('Unrecognised sealed value');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
}


/**
 * unseal with a bounded memo of recent results, for a hot path that opens the same few secrets again and again (the
 * worker signs every attempt with its subscription's secret). Keyed by the sealed text: a rotated secret is a new
 * entry. The plaintexts live in this process's memory only, as they do while each attempt is signed.
 */
export function memoizedUnseal(key: Buffer, maxEntries = 1000): (sealed: string) => string {
  const opened = new Map<string, string>();
  return (sealed) => {
    const hit = opened.get(sealed);
    if (hit !== undefined) return hit;
    const plaintext = unseal(sealed, key);
    if (opened.size >= maxEntries) opened.delete(opened.keys().next().value as string);
    opened.set(sealed, plaintext);
    return plaintext;
  };
}
