import {
  MIN_SEARCHED_NAME_LENGTH,
  canCancelErasure,
  canRetryErasure,
  erasureReplacements,
  escapePgRegex,
  jsonEscaped,
  pseudonymFor,
} from './erasure';

// The PostgreSQL patterns use ARE syntax that JavaScript shares for everything used here ([[:alnum:]] aside).
const toJs = (pattern: string) => new RegExp(pattern.replace(/\[\[:alnum:\]/g, '[a-zA-Z0-9'), 'gi');

describe('erasure life cycle', () => {
  it('cancels only pending requests and retries only failed ones', () => {
    expect(['pending', 'completed', 'failed', 'cancelled'].filter(canCancelErasure)).toEqual(['pending']);
    expect(['pending', 'completed', 'failed', 'cancelled'].filter(canRetryErasure)).toEqual(['failed']);
  });
});

describe('pseudonymFor', () => {
  it('is stable for a request, differs between requests and uses a reserved domain', () => {
    const a = pseudonymFor('era_01jabcdefghjkmnpqrstvwxyz0');
    expect(pseudonymFor('era_01jabcdefghjkmnpqrstvwxyz0')).toEqual(a);
    expect(pseudonymFor('era_01jabcdefghjkmnpqrstvwxyz1').email).not.toBe(a.email);
    expect(a.email).toMatch(/^erased-[0-9a-z]{10}@erased\.invalid$/);
    expect(a.name).toMatch(/^Erased person [0-9a-z]{10}$/);
  });
});

describe('escapePgRegex and jsonEscaped', () => {
  it('escapes every regex metacharacter', () => {
    const literal = 'a.b*c+d?e(f)g[h]i{j}k|l^m$n\\o';
    expect(new RegExp(`^${escapePgRegex(literal)}$`).test(literal)).toBe(true);
  });
  it('escapes quotes and backslashes as JSON does', () => {
    expect(jsonEscaped('Ann "Nan" O\\Neil')).toBe('Ann \\"Nan\\" O\\\\Neil');
  });
});

describe('erasureReplacements', () => {
  const pseudonym = pseudonymFor('era_01jabcdefghjkmnpqrstvwxyz0');

  it('replaces the e-mail and the name case-insensitively, whole words only', () => {
    const [email, name] = erasureReplacements({ name: 'Ann Lee', email: 'ann@example.com' }, pseudonym);
    const erase = (s: string) => s.replace(toJs(email.pattern), email.replacement).replace(toJs(name.pattern), name.replacement);
    expect(erase('by ANN@example.com and Ann Lee.')).toBe(`by ${pseudonym.email} and ${pseudonym.name}.`);
    expect(erase('joann@example.com, ann@example.com.au, Ann Leeds')).toBe('joann@example.com, ann@example.com.au, Ann Leeds');
  });

  it('matches the JSON-escaped form in JSON text', () => {
    const [, name] = erasureReplacements({ name: 'Ann "Nan" Lee', email: 'a@b.c' }, pseudonym);
    const text = JSON.stringify({ actor: 'Ann "Nan" Lee' });
    expect(text.replace(toJs(name.jsonPattern), name.replacement)).toBe(JSON.stringify({ actor: pseudonym.name }));
  });

  it(`does not search free text for names shorter than ${MIN_SEARCHED_NAME_LENGTH} characters`, () => {
    expect(erasureReplacements({ name: 'Al', email: 'al@example.com' }, pseudonym)).toHaveLength(1);
    expect(erasureReplacements({ name: '', email: '' }, pseudonym)).toHaveLength(0);
  });
});
