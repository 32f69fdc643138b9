// Public identifiers: `<prefix>_<26 chars>`, a 48-bit millisecond timestamp and 80 random bits in Crockford
// base32 (lowercase). They sort by creation time, which makes them usable as pagination cursors.
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export type IdPrefix =
  | 'org' | 'usr' | 'mem' | 'inv' | 'etk' | 'ses' | 'team' | 'prj' | 'asm' | 'grant' | 'key'
  | 'whsub' | 'event' | 'whdel' | 'whatt'
  | 'fnd' | 'rpt' | 'fxv' | 'prr' | 'use' | 'lim' | 'oid' | 'aud';

function encodeTime(ms: number): string {
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

function encodeRandom(): string {
  const bytes = randomBytes(16);
  let out = '';
  for (let i = 0; i < 16; i++) out += ALPHABET[bytes[i] % 32];
  return out;
}

export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  return `${prefix}_${encodeTime(now)}${encodeRandom()}`;
}

