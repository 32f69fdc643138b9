import {
  ERASURE_STATUSES,
  canCancelErasure,
  canConfirmErasure,
  canRetryErasure,
  previewExcerpt,
  retriedErasureStatus,
  searchableName,
  erasureReplacements,
  escapePgRegex,
  jsonEscaped,
  pseudonymFor,
} from './erasure';

// The PostgreSQL patterns use ARE syntax that JavaScript shares for everything used here ([[:alnum:]] aside).
const toJs = (pattern: string) =>
  new RegExp(pattern.replace(/\[\[:alnum:\]/g, '[a-zA-Z0-9').replace(/\[\[:space:\]\]/g, '\\s'), 'gi');

describe('erasure life cycle', () => {
  it('cancels only before the confirmation, confirms only a previewed request, retries only failed ones', () => {
    expect(ERASURE_STATUSES.filter(canCancelErasure)).toEqual(['previewing', 'awaiting_confirmation']);
    expect(ERASURE_STATUSES.filter(canConfirmErasure)).toEqual(['awaiting_confirmation']);
    expect(ERASURE_STATUSES.filter(canRetryErasure)).toEqual(['failed']);
  });
  it('resumes erasing a confirmed request on retry, previews an unconfirmed one again', () => {
    expect(retriedErasureStatus(true)).toBe('erasing');
    expect(retriedErasureStatus(false)).toBe('previewing');
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
    const [, name] = erasureReplacements({ name: "Ann O'Lee", email: 'a@b.c' }, pseudonym);
    const text = JSON.stringify({ actor: "ann o'lee" });
    expect(text.replace(toJs(name.jsonPattern), name.replacement)).toBe(JSON.stringify({ actor: pseudonym.name }));
  });

  it('searches only the e-mail when the name is not a full name', () => {
    expect(erasureReplacements({ name: 'Al', email: 'al@example.com' }, pseudonym).map((r) => r.what)).toEqual(['email']);
    expect(erasureReplacements({ name: '$2b', email: 'x@example.com' }, pseudonym).map((r) => r.what)).toEqual(['email']);
    expect(erasureReplacements({ name: null, email: 'x@example.com' }, pseudonym).map((r) => r.what)).toEqual(['email']);
    expect(erasureReplacements({ name: '', email: '' }, pseudonym)).toHaveLength(0);
  });

  it('matches a full name across any whitespace, never inside a longer word', () => {
    const [, name] = erasureReplacements({ name: 'Ann  Lee', email: 'a@b.c' }, pseudonym);
    expect('ANN\nLEE wrote; Joann Leeds did not'.replace(toJs(name.pattern), name.replacement)).toBe(`${pseudonym.name} wrote; Joann Leeds did not`);
  });
});

describe('searchableName: when a name is searched in free text', () => {
  it.each([
    ['Zelda Quuxley', 'Zelda Quuxley'],
    ['  Ann   Lee ', 'Ann Lee'],
    ["Seán O'Brien-Ní Dhuibhir", "Seán O'Brien-Ní Dhuibhir"],
    ['Mary J. Blige', 'Mary J. Blige'],
    ['Анна Каренина', 'Анна Каренина'],
  ])('searches the full name %j', (name, expected) => {
    expect(searchableName(name)).toBe(expected);
  });

  it.each([
    ['$2b', 'the prefix of every bcrypt hash'],
    ['Northwind', 'one word: an ordinary word of other text (a company, a project)'],
    ['northwind.example', 'a domain'],
    ['Northwind Example.com', 'a word with a dot inside'],
    ['a1b2 c3d4', 'hex or digits'],
    ['Admin 2', 'a number'],
    ['x y', 'single letters'],
    ['Jo Li', 'under 5 letters'],
    ['J. K.', 'initials only'],
    ['', 'empty'],
    ['Ann_Lee Smith', 'an underscore'],
  ])('does not search %j (%s)', (name) => {
    expect(searchableName(name)).toBeNull();
  });
});

describe('previewExcerpt', () => {
  it('shows the text around the first mask, never more than a short excerpt', () => {
    const masked = `${'x'.repeat(100)} assigned to [name] <[e-mail]> after triage ${'y'.repeat(100)}`;
    const excerpt = previewExcerpt(masked);
    expect(excerpt).toContain('assigned to [name] <[e-mail]>');
    expect(excerpt.startsWith('…')).toBe(true);
    expect(excerpt.endsWith('…')).toBe(true);
    expect(excerpt.length).toBeLessThan(100);
  });
});
