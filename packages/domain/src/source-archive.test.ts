import {
  ArchiveRefusal,
  RATIO_FLOOR_BYTES,
  LOCAL_HEADER_BYTES,
  checkArchiveEntries,
  entryNameKey,
  normalizedEntryPath,
  refuseHeaderNames,
  refuseLocalHeaderMismatch,
  refuseOverQuota,
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

  it('refuses a total past the cap and a ratio past the cap on every entry from the small floor up', () => {
    const big = RATIO_FLOOR_BYTES * 6;
    expect(refusal([file('a', big, big), file('b', big, big)])).toMatch(/expands to more than/);
    expect(refusal([file('zeros', RATIO_FLOOR_BYTES, 40)])).toMatch(/"zeros" expands 102 times/);
    // Just under 1 MiB at ~1000:1: the size that used to pass.
    expect(() => checkArchiveEntries(1, [file('almost-1mib', 1024 * 1024 - 1, 1040)], { ...limits, maxUncompressedBytes: 2 ** 30 })).toThrow(
      /"almost-1mib" expands 1008 times/,
    );
    // A small, very repetitive file is fine.
    expect(checkArchiveEntries(1, [file('small', RATIO_FLOOR_BYTES - 1, 1)], limits)).toHaveLength(1);
  });

  it('holds the whole archive to the ratio: many small entries each under the floor', () => {
    const tiny = Array.from({ length: 9 }, (_, i) => file(`t${i}`, RATIO_FLOOR_BYTES - 1, 1));
    expect(refusal(tiny)).toMatch(/The archive expands \d+ times its size/);
    // Against the archive's own size when given (overlapping entries cannot inflate it).
    expect(() => checkArchiveEntries(9, tiny, limits, 9 * 1024)).not.toThrow();
    expect(() => checkArchiveEntries(9, tiny, limits, 100)).toThrow(/times its size/);
  });

  it('refuses names that differ only in case or Unicode normalisation', () => {
    expect(refusal([file('A.txt'), file('a.txt')])).toMatch(/"A.txt" and "a.txt" differ only in letter case or Unicode normalisation/);
    expect(refusal([file('caf\u00e9.py'), file('cafe\u0301.py')])).toMatch(/differ only/);
    expect(refusal([file('SRC/x'), file('src/X')])).toMatch(/differ only/);
    expect(refusal([file('stra\u00dfe'), file('STRASSE')])).toMatch(/differ only/);
    expect(entryNameKey('Caf\u0065\u0301')).toBe(entryNameKey('CAF\u00c9'));
  });

  it('refuses a name that is a file and a folder, in either order, also across case', () => {
    expect(refusal([file('a'), file('a/b')])).toMatch(/"a" is a file and also a folder \("a\/"\)/);
    expect(refusal([file('a/b'), file('a')])).toMatch(/"a" is a file and also a folder/);
    expect(refusal([file('x/y/z'), file('X/Y')])).toMatch(/"X\/Y" is a file and also a folder/);
    expect(refusal([file('d/'), file('d')])).toMatch(/"d" is a file and also a folder \("d\/"\)/);
    // Folders may repeat and contain files.
    expect(checkArchiveEntries(4, [file('d/'), file('d/'), file('d/a'), file('d/e/b')], limits)).toHaveLength(2);
  });

  it('escapes control characters of names in messages', () => {
    expect(refusal([file('/\u001b[31mred')])).toContain('\\x1b[31mred');
  });
});

describe('refuseOverQuota', () => {
  it('counts what the organization holds, less the archive replaced, plus the new one', () => {
    expect(() => refuseOverQuota({ usedBytes: 60, replacedBytes: 0, incomingBytes: 40, quotaBytes: 100 })).not.toThrow();
    expect(() => refuseOverQuota({ usedBytes: 60, replacedBytes: 0, incomingBytes: 41, quotaBytes: 100 })).toThrow(
      /quota is 100 uncompressed bytes \(SOURCE_ORG_QUOTA_BYTES\); 60 are used and this archive expands to 41/,
    );
    expect(() => refuseOverQuota({ usedBytes: 60, replacedBytes: 30, incomingBytes: 70, quotaBytes: 100 })).not.toThrow();
  });
});

describe('refuseHeaderNames', () => {
  const named = (headerName: string, name: string) => ({ facts: file(name), headerName });
  it('refuses a header name that escapes the root or repeats a file, whatever the Unicode Path field says', () => {
    expect(() => refuseHeaderNames([named('../../evil.sh', 'evil.sh')])).toThrow(/"\.\.\/\.\.\/evil\.sh" escapes the archive root/);
    expect(() => refuseHeaderNames([named('a.txt', 'x.txt'), named('./a.txt', 'y.txt')])).toThrow(/"\.\/a\.txt" appears twice/);
  });

  it('accepts legacy code page names that only fold alike (UTF-8 bytes of "À" and "Ç" read as CP437)', () => {
    expect(() => refuseHeaderNames([named('\u251c\u00c7.txt', '\u00c0.txt'), named('\u251c\u00e7.txt', '\u00c7.txt'), named('d/', 'd/')])).not.toThrow();
  });
});

describe('refuseLocalHeaderMismatch', () => {
  const header = (name: string, flags = 0x800, declaredLength = Buffer.byteLength(name)) => {
    const h = Buffer.alloc(LOCAL_HEADER_BYTES);
    h.writeUInt32LE(0x04034b50, 0);
    h.writeUInt16LE(flags, 6);
    h.writeUInt16LE(declaredLength, 26);
    return Buffer.concat([h, Buffer.from(name)]);
  };
  const central = (name: string, flags = 0x800) => ({ rawName: Buffer.from(name), flags, name });

  it('accepts the same bytes and encoding flag', () => {
    expect(() => refuseLocalHeaderMismatch(header('src/a.ts'), central('src/a.ts'))).not.toThrow();
  });

  it('refuses another name, another length, another encoding flag, or no header at all', () => {
    expect(() => refuseLocalHeaderMismatch(header('src/b.ts'), central('src/a.ts'))).toThrow(/"src\/a.ts" has another name in its local header/);
    expect(() => refuseLocalHeaderMismatch(header('src/a.ts', 0x800, 12), central('src/a.ts'))).toThrow(/another name/);
    expect(() => refuseLocalHeaderMismatch(header('src/a.ts', 0), central('src/a.ts'))).toThrow(/another name/);
    expect(() => refuseLocalHeaderMismatch(Buffer.alloc(38), central('src/a.ts'))).toThrow(/no local header/);
    expect(() => refuseLocalHeaderMismatch(Buffer.alloc(3), central('src/a.ts'))).toThrow(/no local header/);
  });
});
