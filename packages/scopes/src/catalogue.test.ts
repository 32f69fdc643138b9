import { ALL_SCOPES, SCOPE_CATALOGUE, SCOPE_CATEGORIES, isKnownCategory, isKnownScope, scopesOfCategory } from './index';
import { EXPECTED_CATALOGUE, EXPECTED_COUNTS, EXPECTED_TOTAL } from './__tests__/expected';

describe('SCOPE_CATALOGUE', () => {
  it('holds exactly the scopes of the specification, in its order, with its Grants text', () => {
    const expected = Object.entries(EXPECTED_CATALOGUE).flatMap(([category, scopes]) =>
      Object.entries(scopes).map(([name, description]) => ({ name, category, description })),
    );
    expect(SCOPE_CATALOGUE).toEqual(expected);
  });

  it(`has ${EXPECTED_TOTAL} scopes in all`, () => {
    expect(SCOPE_CATALOGUE).toHaveLength(EXPECTED_TOTAL);
    expect(ALL_SCOPES).toHaveLength(EXPECTED_TOTAL);
    expect(new Set(ALL_SCOPES).size).toBe(EXPECTED_TOTAL);
  });

  it.each(Object.entries(EXPECTED_COUNTS))('category %s has %i scopes', (category, count) => {
    expect(SCOPE_CATALOGUE.filter((s) => s.category === category)).toHaveLength(count);
    expect(Object.keys(EXPECTED_CATALOGUE[category])).toHaveLength(count);
  });

  it('lists the 17 categories in specification order', () => {
    expect(SCOPE_CATEGORIES).toEqual([
      'org', 'audit', 'governance', 'profile', 'billing', 'members', 'teams',
      'integrations', 'issue_exports', 'notification_targets', 'source',
      'projects', 'assessments', 'findings', 'reports', 'api_keys', 'webhooks',
    ]);
  });

  it('names every scope category:action with its own category', () => {
    for (const scope of SCOPE_CATALOGUE) {
      expect(scope.name).toMatch(/^[a-z_]+:[a-z_]+$/);
      expect(scope.name.split(':')[0]).toBe(scope.category);
    }
  });

  it('ALL_SCOPES is the catalogue names in catalogue order', () => {
    expect(ALL_SCOPES).toEqual(Object.values(EXPECTED_CATALOGUE).flatMap((s) => Object.keys(s)));
  });

  it('cannot be altered at run time', () => {
    expect(Object.isFrozen(SCOPE_CATALOGUE)).toBe(true);
    expect(Object.isFrozen(SCOPE_CATALOGUE[0])).toBe(true);
    expect(Object.isFrozen(ALL_SCOPES)).toBe(true);
  });
});

describe('isKnownScope', () => {
  it.each(Object.values(EXPECTED_CATALOGUE).flatMap((s) => Object.keys(s)))('knows %s', (name) => {
    expect(isKnownScope(name)).toBe(true);
  });

  it.each([
    '', 'projects', 'projects:', ':read', 'projects:read:x', 'PROJECTS:READ', 'Projects:read',
    ' projects:read', 'projects:read ', 'projects:fly', 'foo:read', '*', 'projects:*',
    '__proto__', 'constructor', 'toString', 'hasOwnProperty:read',
  ])('rejects %j', (name) => {
    expect(isKnownScope(name)).toBe(false);
  });

  it.each([undefined, null, 1, {}, ['projects:read']])('rejects non-string %p', (value) => {
    expect(isKnownScope(value)).toBe(false);
  });
});

describe('categories', () => {
  it('isKnownCategory knows exactly the catalogue categories', () => {
    for (const category of Object.keys(EXPECTED_CATALOGUE)) expect(isKnownCategory(category)).toBe(true);
    for (const other of ['', 'foo', 'Projects', 'project', '*', '__proto__']) expect(isKnownCategory(other)).toBe(false);
  });

  it.each(Object.entries(EXPECTED_CATALOGUE))('scopesOfCategory(%s) lists its scopes in catalogue order', (category, scopes) => {
    expect(scopesOfCategory(category)).toEqual(Object.keys(scopes));
  });

  it('scopesOfCategory of an unknown category is empty', () => {
    expect(scopesOfCategory('foo')).toEqual([]);
  });
});
