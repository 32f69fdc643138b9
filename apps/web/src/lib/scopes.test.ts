// Unit tests of the dashboard's scope helpers (pure logic, no browser).
import { allows, categoryOf, groupScopes, wildcardOptions } from './scopes';

describe('dashboard scope helpers', () => {
  it('groups scopes by their category, sorted within it, categories in order of appearance', () => {
    expect(groupScopes(['webhooks:read', 'projects:read', 'webhooks:create', 'projects:create'])).toEqual([
      { category: 'webhooks', scopes: ['webhooks:create', 'webhooks:read'] },
      { category: 'projects', scopes: ['projects:create', 'projects:read'] },
    ]);
    expect(categoryOf('api_keys:revoke')).toBe('api_keys');
  });

  it('reads wildcards when deciding what a principal may do', () => {
    expect(allows(['webhooks:*'], 'webhooks:update')).toBe(true);
    expect(allows(['*'], 'org:delete')).toBe(true);
    expect(allows(['webhooks:read'], 'webhooks:update')).toBe(false);
    expect(allows(['projects:*'], 'webhooks:read')).toBe(false);
  });

  it('offers wildcards to owners only', () => {
    expect(wildcardOptions('admin', ['webhooks:read'])).toEqual([]);
    expect(wildcardOptions('owner', ['webhooks:read', 'org:read'])).toEqual(['*', 'webhooks:*', 'org:*']);
  });
});
