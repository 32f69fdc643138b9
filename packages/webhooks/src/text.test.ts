import { truncateChars, truncateUtf8 } from './text';

describe('truncateUtf8', () => {
  it('keeps short strings', () => {
    expect(truncateUtf8('abc', 3)).toBe('abc');
    expect(truncateUtf8('', 0)).toBe('');
  });

  it('cuts at a character boundary', () => {
    expect(truncateUtf8('abcdef', 4)).toBe('abcd');
    expect(truncateUtf8('aé', 2)).toBe('a'); // é is 2 bytes
    expect(truncateUtf8('aé', 3)).toBe('aé');
    expect(truncateUtf8('日本', 5)).toBe('日');
    expect(truncateUtf8('x😀', 4)).toBe('x');
    expect(truncateUtf8('x😀', 5)).toBe('x😀');
    for (let max = 0; max < 40; max += 1) {
      const cut = truncateUtf8('aé日😀'.repeat(4), max);
      expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(max);
      expect(cut).not.toMatch(/\ufffd/);
      expect(Buffer.from(cut, 'utf8').toString('utf8')).toBe(cut);
    }
  });

  it('refuses a bad limit', () => {
    expect(() => truncateUtf8('a', -1)).toThrow(RangeError);
  });
});

describe('truncateChars', () => {
  it('cuts by UTF-16 length without splitting surrogate pairs', () => {
    expect(truncateChars('abcdef', 3)).toBe('abc');
    expect(truncateChars('ab😀', 3)).toBe('ab');
    expect(truncateChars('ab😀', 4)).toBe('ab😀');
    expect(truncateChars('short', 10)).toBe('short');
    expect(() => truncateChars('a', 1.5)).toThrow(RangeError);
  });
});
