import { randomBytes } from 'node:crypto';
import { memoizedUnseal, seal, unseal } from './sealed';

const key = randomBytes(32);

it('seal and unseal round-trip; another key or a tampered value is refused', () => {
  const sealed = seal('whsec_abc', key);
  expect(unseal(sealed, key)).toBe('whsec_abc');
  expect(() => unseal(sealed, randomBytes(32))).toThrow();
  expect(() => unseal(`${sealed.slice(0, -2)}AA`, key)).toThrow();
});

it('memoizedUnseal opens what unseal opens, keeps at most maxEntries, and refuses what unseal refuses', () => {
  const open = memoizedUnseal(key, 3);
  const values = Array.from({ length: 10 }, (_, i) => `secret-${i}`);
  const sealed = values.map((v) => seal(v, key));
  for (let round = 0; round < 2; round += 1) {
    sealed.forEach((s, i) => expect(open(s)).toBe(values[i]));
  }
  // A rotated secret is a new sealed text, so a new entry: never the old plaintext.
  const rotated = seal('secret-rotated', key);
  expect(open(rotated)).toBe('secret-rotated');
  expect(() => open(seal('x', randomBytes(32)))).toThrow();
});
