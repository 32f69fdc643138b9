import {
  ArchiveRefusal,
  RATIO_FLOOR_BYTES,
  checkArchiveEntries,
  normalizedEntryPath,
  unsafeEntryName,
  type ZipEntryFacts,
} from './source-archive';

const limits = { maxEntries: 10, maxUncompressedBytes: 10 * RATIO_FLOOR_BYTES, maxRatio: 100 };
const file = (name: string, size = 10, compressed = size, unixMode = 0o100644): ZipEntryFacts => ({
  name,
  uncompressedSize: size,
  compressedSize: compressed,
  unixMode,
});
const refusal = (entries: ZipEntryFacts[], count = entries.length) => {
  try {
    checkArchiveEntries(count, entries, limits);
  } catch (err) {
    expect(err).toBeInstanceOf(ArchiveRefusal);
    return (err as Error).message;
  }
  throw new Error('accepted');
};

describe('unsafeEntryName', () => {
  it.each([
    ['../x', /escapes/],
    ['a/../../x', /escapes/],
    ['a/..', /escapes/],
    ['/etc/passwd', /absolute/],
    ['C:/x', /drive letter/],
    ['c:x', /drive letter/],
    ['a\\b', /backslash/],
    ['..\\x', /backslash/],
    ['a\0b', /NUL/],
    ['', /empty/],
  ])('refuses %j', (name, reason) => {
    expect(unsafeEntryName(name)).toMatch(reason);
  });

  it.each(['a', 'src/a.ts', './a', 'a..b/c', '...', 'dir/', 'x/.hidden'])('accepts %j', (name) => {
    expect(unsafeEntryName(name)).toBeNull();
  });
});

describe('normalizedEntryPath', () => {
  it('drops ./ segments and repeated slashes', () => {
    expect(normalizedEntryPath('./src//a.ts')).toBe('src/a.ts');
    expect(normalizedEntryPath('src/./a.ts')).toBe('src/a.ts');
  });
});

describe('checkArchiveEntries', () => {
  it('returns the files with their index and stored path, skipping folders', () => {
    expect(checkArchiveEntries(3, [file('src/'), file('./src/a.ts', 5), file('b', 7)], limits)).toEqual([
      { index: 1, path: 'src/a.ts', size: 5 },
      { index: 2, path: 'b', size: 7 },
    ]);
  });

  it('refuses more entries than the cap, by the central directory count', () => {
    expect(refusal([], 11)).toMatch(/11 entries; at most 10/);
  });

  it('refuses symbolic links and other non-regular files, naming them', () => {
    expect(refusal([file('link', 4, 4, 0o120777)])).toMatch(/"link" is a symbolic link/);
    expect(refusal([file('fifo', 0, 0, 0o010644)])).toMatch(/"fifo" is not a regular file/);
  });

  it('refuses the same path twice (one would silently replace the other)', () => {
    expect(refusal([file('a.ts'), file('./a.ts')])).toMatch(/appears twice/);
  });

  it('refuses a total past the cap and a ratio past the cap on large entries only', () => {
    const big = RATIO_FLOOR_BYTES * 6;
    expect(refusal([file('a', big, big), file('b', big, big)])).toMatch(/expands to more than/);
    expect(refusal([file('zeros', RATIO_FLOOR_BYTES, 1000)])).toMatch(/"zeros" expands 1049 times/);
    // A small, very repetitive file is fine.
    expect(checkArchiveEntries(1, [file('small', RATIO_FLOOR_BYTES - 1, 1)], limits)).toHaveLength(1);
  });

  it('escapes control characters of names in messages', () => {
    expect(refusal([file('/\u001b[31mred')])).toContain('\\x1b[31mred');
  });
});
