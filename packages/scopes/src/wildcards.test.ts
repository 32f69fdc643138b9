import { ALL_SCOPES, expandScopes, isValidScopeRequest, isWildcard } from './index';
import { EXPECTED_CATALOGUE, EXPECTED_TOTAL, sorted } from './__tests__/expected';

const CATEGORIES = Object.keys(EXPECTED_CATALOGUE);
const MALFORMED = ['', 'projects', 'projects:', ':read', 'projects:read:x', 'PROJECTS:READ'];

describe('isWildcard', () => {
  it('accepts *', () => {
    expect(isWildcard('*')).toBe(true);
  });

  it.each(CATEGORIES)('accepts %s:*', (category) => {
    expect(isWildcard(`${category}:*`)).toBe(true);
  });

  it.each([
    'foo:*', 'PROJECTS:*', 'Projects:*', ':*', '*:*', '*:read', '**', 'projects:**', 'projects:*:*',
    ' *', '* ', 'projects: *', '__proto__:*', 'constructor:*', 'projects:read', ...MALFORMED,
  ])('rejects %j', (value) => {
    expect(isWildcard(value)).toBe(false);
  });

  it('rejects non-strings', () => {
    expect(isWildcard(undefined)).toBe(false);
    expect(isWildcard(['*'])).toBe(false);
  });
});

describe('isValidScopeRequest', () => {
  it('accepts catalogue scopes and wildcards, nothing else', () => {
    expect(isValidScopeRequest('projects:read')).toBe(true);
    expect(isValidScopeRequest('projects:*')).toBe(true);
    expect(isValidScopeRequest('*')).toBe(true);
    for (const bad of [...MALFORMED, 'foo:*', 'projects:fly']) expect(isValidScopeRequest(bad)).toBe(false);
  });
});

describe('expandScopes', () => {
  it('expands * to every scope, sorted', () => {
    const all = expandScopes(['*']);
    expect(all).toHaveLength(EXPECTED_TOTAL);
    expect(all).toEqual(sorted(ALL_SCOPES));
  });

  it.each(Object.entries(EXPECTED_CATALOGUE))('expands %s:* to that category, sorted', (category, scopes) => {
    expect(expandScopes([`${category}:*`])).toEqual(sorted(Object.keys(scopes)));
  });

  it('spot check: findings:* literally', () => {
    expect(expandScopes(['findings:*'])).toEqual([
      'findings:accept_risk', 'findings:edit_severity', 'findings:export', 'findings:export_issue',
      'findings:read', 'findings:suppress', 'findings:triage',
    ]);
  });

  it('passes concrete scopes through, sorted and de-duplicated', () => {
    expect(expandScopes(['webhooks:read', 'audit:read', 'webhooks:read'])).toEqual(['audit:read', 'webhooks:read']);
  });

  it('merges overlapping wildcards and concrete scopes without duplicates', () => {
    expect(expandScopes(['api_keys:read', 'api_keys:*', 'api_keys:*', 'audit:export'])).toEqual([
      'api_keys:create', 'api_keys:read', 'api_keys:revoke', 'api_keys:rotate', 'audit:export',
    ]);
    expect(expandScopes(['projects:*', '*', 'projects:read'])).toEqual(sorted(ALL_SCOPES));
  });

  it('returns [] for []', () => {
    expect(expandScopes([])).toEqual([]);
  });

  it.each([...MALFORMED, 'foo:*', 'projects:fly'])('throws on %j rather than passing it through', (bad) => {
    expect(() => expandScopes(['projects:read', bad])).toThrow(RangeError);
  });

  it('does not alter its input', () => {
    const input = ['reports:*', 'audit:read'];
    expandScopes(input);
    expect(input).toEqual(['reports:*', 'audit:read']);
  });
});
