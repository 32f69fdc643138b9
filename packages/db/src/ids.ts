// Public identifiers: `<prefix>_<26 chars>`, a 48-bit millisecond timestamp and 80 random bits in Crockford
// base32 (lowercase). They sort by creation time, which makes them usable as pagination cursors.
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export type IdPrefix =
  | 'org' | 'usr' | 'mem' | 'inv' | 'etk' | 'ses' | 'team' | 'prj' | 'asm' | 'grant' | 'key'
  | 'whsub' | 'event' | 'whdel' | 'whatt' | 'ntgt' | 'iexp' | 'iexj'
  | 'fnd' | 'rpt' | 'fxv' | 'prr' | 'use' | 'lim' | 'oid' | 'aud'
  | 'rsh' | 'src' | 'era' | 'int' | 'tint' | 'psc' | 'ntc';

function encodeTime(ms: number): string {
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[ms % 32] + out;
    ms = Math.floor(ms / 32);
  }
  return out;
}

// Random bytes are drawn 4 KiB at a time: one call to the CSPRNG per 256 ids instead of one per id (the publish
// path makes several ids per request).
const randomPool = Buffer.alloc(4096);
let randomOffset = randomPool.length;

function encodeRandom(): string {
  if (randomOffset + 16 > randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  let out = '';
  for (let i = randomOffset; i < randomOffset + 16; i++) out += ALPHABET[randomPool[i] % 32];
  randomOffset += 16;
  return out;
}

export function newId(prefix: IdPrefix, now: number = Date.now()): string {
  return `${prefix}_${encodeTime(now)}${encodeRandom()}`;
}

