import { ALL_SCOPES, ROLES, Role, effectiveKeyScopes, hasScope, resolveRequestedScopes } from './index';
import { EXPECTED_BUNDLES, EXPECTED_CATALOGUE, sorted } from './__tests__/expected';

const CATEGORIES = Object.keys(EXPECTED_CATALOGUE);
const NON_OWNERS: Role[] = ['admin', 'manager', 'member'];
const MALFORMED = ['', 'projects', 'projects:', ':read', 'projects:read:x', 'PROJECTS:READ'];
const UNKNOWN = ['projects:fly', 'foo:read', 'foo:*', 'Projects:*', '*:read', '**', '__proto__:*', 'constructor', ' projects:read'];

describe('resolveRequestedScopes: wildcards', () => {
  it('lets an owner use * and returns every scope, sorted', () => {
    expect(resolveRequestedScopes(['*'], 'owner')).toEqual({ ok: true, scopes: sorted(ALL_SCOPES) });
  });

  it.each(Object.entries(EXPECTED_CATALOGUE))('lets an owner use %s:*', (category, scopes) => {
    expect(resolveRequestedScopes([`${category}:*`], 'owner')).toEqual({
      ok: true,
      scopes: sorted(Object.keys(scopes)),
    });
  });

  describe.each(NON_OWNERS)('refuses every wildcard to %s', (role) => {
    it('*', () => {
      expect(resolveRequestedScopes(['*'], role)).toEqual({ ok: false, reason: 'wildcard_not_allowed', scopes: ['*'] });
    });

    it.each(CATEGORIES)('%s:*', (category) => {
      expect(resolveRequestedScopes([`${category}:*`], role)).toEqual({
        ok: false,
        reason: 'wildcard_not_allowed',
        scopes: [`${category}:*`],
      });
    });

    it('even a wildcard that would fall inside the bundle, mixed with concrete scopes', () => {
      expect(resolveRequestedScopes(['org:read', 'profile:*', 'profile:*'], role)).toEqual({
        ok: false,
        reason: 'wildcard_not_allowed',
        scopes: ['profile:*'],
      });
    });
  });
});

describe('resolveRequestedScopes: unknown and malformed names', () => {
  describe.each(ROLES)('for %s', (role) => {
    it.each([...MALFORMED, ...UNKNOWN])('%j is unknown_scope', (name) => {
      expect(resolveRequestedScopes(['org:read', name], role)).toEqual({
        ok: false,
        reason: 'unknown_scope',
        scopes: [name],
      });
    });
  });

  it('lists every unknown entry once, sorted', () => {
    expect(resolveRequestedScopes(['zzz:read', 'org:read', 'aaa', 'zzz:read', ''], 'owner')).toEqual({
      ok: false,
      reason: 'unknown_scope',
      scopes: ['', 'aaa', 'zzz:read'],
    });
  });

  it('reports non-string entries as unknown instead of crashing', () => {
    const result = resolveRequestedScopes(['org:read', 42, null] as unknown as string[], 'owner');
    expect(result).toEqual({ ok: false, reason: 'unknown_scope', scopes: ['42', 'null'] });
  });
});

describe('resolveRequestedScopes: bundles', () => {
  // Exhaustive: every catalogue scope, requested alone, by every role.
  describe.each(ROLES)('%s', (role) => {
    const bundle = new Set<string>(EXPECTED_BUNDLES[role]);

    it.each(ALL_SCOPES.map((s) => [s, bundle.has(s)] as const))('%s allowed: %s', (scope, allowed) => {
      const expected = allowed
        ? { ok: true, scopes: [scope] }
        : { ok: false, reason: 'outside_bundle', scopes: [scope] };
      expect(resolveRequestedScopes([scope], role)).toEqual(expected);
    });

    it('accepts its whole bundle at once', () => {
      expect(resolveRequestedScopes([...EXPECTED_BUNDLES[role]], role)).toEqual({
        ok: true,
        scopes: sorted(EXPECTED_BUNDLES[role]),
      });
    });
  });

  it('admin: names the owner-only scopes it asked for, and only those', () => {
    expect(resolveRequestedScopes(['org:transfer_ownership', 'org:read', 'org:delete'], 'admin')).toEqual({
      ok: false,
      reason: 'outside_bundle',
      scopes: ['org:delete', 'org:transfer_ownership'],
    });
  });

  it('manager: names webhook, billing and excluded scopes, sorted and de-duplicated', () => {
    const requested = ['webhooks:create', 'projects:read', 'billing:read', 'findings:suppress', 'assessments:delete', 'webhooks:create'];
    expect(resolveRequestedScopes(requested, 'manager')).toEqual({
      ok: false,
      reason: 'outside_bundle',
      scopes: ['assessments:delete', 'billing:read', 'findings:suppress', 'webhooks:create'],
    });
  });

  it('member: names the write scopes it lacks', () => {
    expect(resolveRequestedScopes(['findings:triage', 'findings:export', 'api_keys:create', 'projects:read'], 'member')).toEqual({
      ok: false,
      reason: 'outside_bundle',
      scopes: ['api_keys:create', 'findings:export'],
    });
  });
});

describe('resolveRequestedScopes: check order and shape', () => {
  it('unknown comes before wildcard permission', () => {
    expect(resolveRequestedScopes(['projects:*', 'nope'], 'member')).toMatchObject({ ok: false, reason: 'unknown_scope', scopes: ['nope'] });
  });

  it('unknown comes before bundle', () => {
    expect(resolveRequestedScopes(['webhooks:read', 'nope'], 'member')).toMatchObject({ ok: false, reason: 'unknown_scope', scopes: ['nope'] });
  });

  it('wildcard permission comes before bundle, and lists only the wildcards', () => {
    expect(resolveRequestedScopes(['billing:read', 'webhooks:*'], 'manager')).toEqual({
      ok: false,
      reason: 'wildcard_not_allowed',
      scopes: ['webhooks:*'],
    });
  });

  it('de-duplicates and sorts a valid request', () => {
    expect(resolveRequestedScopes(['reports:read', 'org:read', 'reports:read', 'findings:triage'], 'member')).toEqual({
      ok: true,
      scopes: ['findings:triage', 'org:read', 'reports:read'],
    });
  });

  it('de-duplicates overlapping wildcards and names for an owner', () => {
    expect(resolveRequestedScopes(['webhooks:read', 'webhooks:*', 'webhooks:*'], 'owner')).toEqual({
      ok: true,
      scopes: ['webhooks:create', 'webhooks:delete', 'webhooks:read', 'webhooks:update'],
    });
  });

  it('an empty request does not crash', () => {
    for (const role of ROLES) expect(resolveRequestedScopes([], role)).toEqual({ ok: true, scopes: [] });
  });

  it('refuses an unknown creator role', () => {
    expect(() => resolveRequestedScopes(['org:read'], 'root' as Role)).toThrow(TypeError);
  });

  it('does not alter its input', () => {
    const input = ['reports:read', 'org:read', 'reports:read'];
    resolveRequestedScopes(input, 'member');
    expect(input).toEqual(['reports:read', 'org:read', 'reports:read']);
  });
});

describe('effectiveKeyScopes', () => {
  const stored = ['webhooks:create', 'projects:delete', 'findings:triage', 'org:read', 'org:delete', 'api_keys:rotate'];

  it('keeps every stored scope while the creator keeps the role', () => {
    expect(effectiveKeyScopes(stored, 'owner')).toEqual(sorted(stored));
  });

  it('drops scopes after the creator is demoted, step by step', () => {
    expect(effectiveKeyScopes(stored, 'admin')).toEqual(['api_keys:rotate', 'findings:triage', 'org:read', 'projects:delete', 'webhooks:create']);
    expect(effectiveKeyScopes(stored, 'manager')).toEqual(['findings:triage', 'org:read', 'projects:delete']);
    expect(effectiveKeyScopes(stored, 'member')).toEqual(['findings:triage', 'org:read']);
  });

  it("drops a manager key's scopes minted before the manager bundle followed SPEC's table", () => {
    const minted = ['notification_targets:configure', 'notification_targets:test', 'issue_exports:configure', 'source:upload_zip', 'findings:read'];
    expect(effectiveKeyScopes(minted, 'manager')).toEqual(['findings:read']);
  });

  it('never adds scopes when the creator is promoted', () => {
    expect(effectiveKeyScopes(['org:read'], 'owner')).toEqual(['org:read']);
  });

  it('leaves nothing when the creator is no longer a member', () => {
    expect(effectiveKeyScopes(stored, null)).toEqual([]);
    expect(effectiveKeyScopes(stored, undefined)).toEqual([]);
  });

  it('drops unknown names and wildcards that somehow got stored', () => {
    expect(effectiveKeyScopes(['*', 'projects:*', 'legacy:thing', 'projects:read'], 'owner')).toEqual(['projects:read']);
  });

  it('accepts any iterable and de-duplicates', () => {
    expect(effectiveKeyScopes(new Set(['org:read', 'audit:read']), 'member')).toEqual(['org:read']);
    expect(effectiveKeyScopes(['org:read', 'org:read'], 'member')).toEqual(['org:read']);
  });

  it('refuses an unknown role rather than guessing', () => {
    expect(() => effectiveKeyScopes(stored, 'root' as Role)).toThrow(TypeError);
  });
});

describe('hasScope', () => {
  it('finds a scope in a Set, an array and a one-shot iterable', () => {
    expect(hasScope(new Set(['org:read', 'projects:read']), 'projects:read')).toBe(true);
    expect(hasScope(['org:read', 'projects:read'], 'projects:read')).toBe(true);
    function* gen() {
      yield 'org:read';
      yield 'projects:read';
    }
    expect(hasScope(gen(), 'projects:read')).toBe(true);
  });

  it('is false when the scope is missing', () => {
    expect(hasScope(new Set(['org:read']), 'projects:read')).toBe(false);
    expect(hasScope(['org:read'], 'projects:read')).toBe(false);
    expect(hasScope([], 'projects:read')).toBe(false);
  });

  it('does not honour wildcards or other spellings in the granted list', () => {
    expect(hasScope(['*'], 'projects:read')).toBe(false);
    expect(hasScope(new Set(['*']), 'projects:read')).toBe(false);
    expect(hasScope(new Set(['projects:*']), 'projects:read')).toBe(false);
    expect(hasScope(['PROJECTS:READ', 'projects:read '], 'projects:read')).toBe(false);
  });

  it('works with role bundles and effective key scopes', () => {
    const scopes = effectiveKeyScopes(['webhooks:read', 'org:read'], 'manager');
    expect(hasScope(scopes, 'org:read')).toBe(true);
    expect(hasScope(scopes, 'webhooks:read')).toBe(false);
  });

  it.each(['*', 'projects:*', 'projects:fly', '', 'PROJECTS:READ'])('throws when the required scope %j is not a catalogue scope', (required) => {
    expect(() => hasScope(['*', 'projects:*', required], required)).toThrow(TypeError);
  });
});

describe('api_keys:rotate', () => {
  it('is in the catalogue as reserved', () => {
    expect(EXPECTED_CATALOGUE.api_keys['api_keys:rotate']).toBe('Reserved for future use');
    expect(ALL_SCOPES).toContain('api_keys:rotate');
  });

  it('can be requested by owner and admin only', () => {
    expect(resolveRequestedScopes(['api_keys:rotate'], 'owner')).toEqual({ ok: true, scopes: ['api_keys:rotate'] });
    expect(resolveRequestedScopes(['api_keys:rotate'], 'admin')).toEqual({ ok: true, scopes: ['api_keys:rotate'] });
    for (const role of ['manager', 'member'] as const) {
      expect(resolveRequestedScopes(['api_keys:read', 'api_keys:rotate'], role)).toEqual({
        ok: false,
        reason: 'outside_bundle',
        scopes: ['api_keys:rotate'],
      });
    }
  });

  it('comes with an owner api_keys:* key', () => {
    expect(resolveRequestedScopes(['api_keys:*'], 'owner')).toEqual({
      ok: true,
      scopes: ['api_keys:create', 'api_keys:read', 'api_keys:revoke', 'api_keys:rotate'],
    });
  });

  it('is lost when an admin creator becomes a manager', () => {
    expect(effectiveKeyScopes(['api_keys:create', 'api_keys:rotate'], 'manager')).toEqual(['api_keys:create']);
  });
});
