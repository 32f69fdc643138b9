// The person an erasure request is about, kept sealed in the request while it is open (the job needs the name and
// e-mail to find them, and to resume after a crash once the account row is already erased), and the key that
// finds open requests for an e-mail address without storing the address itself.
import { createHmac } from 'node:crypto';
import { seal, unseal } from './sealed';

export interface ErasureSubject {
  userId: string | null;
  /** The account's display name; null for a person known by e-mail only. */
  name: string | null;
  email: string;
}

export const sealErasureSubject = (subject: ErasureSubject, key: Buffer): string => seal(JSON.stringify(subject), key);
export const openErasureSubject = (sealed: string, key: Buffer): ErasureSubject => JSON.parse(unseal(sealed, key)) as ErasureSubject;

/** HMAC of the normalized address under the encryption key: equal for equal addresses, no address in the row. */
export function erasureEmailKey(normalizedEmail: string, key: Buffer): string {
  return createHmac('sha256', key).update(`erasure-email:${normalizedEmail}`).digest('hex');
}
