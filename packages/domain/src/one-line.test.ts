import { oneLine } from './one-line';

describe('oneLine', () => {
  it.each([
    ['CR, LF and CRLF', 'a\rb\nc\r\nd', 'a b c d'],
    ['the Unicode line and paragraph separators, NEL, VT and FF', 'a\u2028b\u2029c\u0085d\u000be\u000cf', 'a b c d e f'],
    ['tabs, escapes, NUL and DEL', 'a\tb\u001b[31mc\u0000d\u007fe', 'a b [31mc d e'],
    ['bidirectional overrides, embeddings, isolates and marks', 'a\u202eb\u202ac\u2066d\u2069e\u200ef\u200fg', 'a b c d e f g'],
    ['runs of spaces, and spaces at the ends', '  a \n\n  b  ', 'a b'],
  ])('turns %s into single spaces', (_what, input, expected) => {
    expect(oneLine(input)).toBe(expected);
  });

  it('keeps letters of any script, emoji (joiners included) and punctuation', () => {
    const text = 'Zürich 東京 — “app” 👩‍💻 🇩🇪 (v1.2)';
    expect(oneLine(text)).toBe(text);
  });

  it('leaves no character that breaks a line in any input', () => {
    const every = Array.from({ length: 0x3000 }, (_, code) => String.fromCharCode(code)).join('x');
    expect(oneLine(every)).not.toMatch(/[\r\n\u000b\u000c\u0085\u2028\u2029]/);
  });
});
