import { newId } from './ids';

const FORMAT = /^whdel_[0-9a-hjkmnp-tv-z]{26}$/;

it('makes `<prefix>_<26 Crockford base32 chars>` ids, all distinct across many refills of the random pool', () => {
  const ids = Array.from({ length: 5000 }, () => newId('whdel'));
  for (const id of ids) expect(id).toMatch(FORMAT);
  expect(new Set(ids).size).toBe(ids.length);
  // 80 random bits: every character position takes many values (a stuck pool would repeat one).
  const lastChars = new Set(ids.map((id) => id.slice(-1)));
  expect(lastChars.size).toBe(32);
});

it('sorts by creation time (the millisecond timestamp leads)', () => {
  const earlier = newId('fnd', Date.UTC(2026, 0, 1));
  const later = newId('fnd', Date.UTC(2026, 0, 1) + 1);
  expect(earlier < later).toBe(true);
  expect(earlier.slice(4, 14)).not.toBe(later.slice(4, 14));
});
