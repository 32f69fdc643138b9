import { ALL_SCOPES, ROLES, Role, isRole, roleBundle, roleRank } from './index';
import { ADMIN_BUNDLE, EXPECTED_TOTAL, MANAGER_BUNDLE, MEMBER_BUNDLE, OWNER_BUNDLE, sorted } from './__tests__/expected';

describe('ROLES and roleRank', () => {
  it('lists the four roles, highest first', () => {
    expect(ROLES).toEqual(['owner', 'admin', 'manager', 'member']);
  });

  it('ranks owner > admin > manager > member', () => {
    expect(roleRank('owner')).toBeGreaterThan(roleRank('admin'));
    expect(roleRank('admin')).toBeGreaterThan(roleRank('manager'));
    expect(roleRank('manager')).toBeGreaterThan(roleRank('member'));
    expect(ROLES.map(roleRank)).toEqual([3, 2, 1, 0]);
  });

  it('isRole accepts only the four roles, case-sensitively', () => {
    for (const role of ROLES) expect(isRole(role)).toBe(true);
    for (const other of ['', 'Owner', 'OWNER', 'superadmin', 'guest', '__proto__', null, undefined, 1]) {
      expect(isRole(other)).toBe(false);
    }
  });

  it('refuses an unknown role at run time', () => {
    expect(() => roleRank('superadmin' as Role)).toThrow(TypeError);
    expect(() => roleBundle('superadmin' as Role)).toThrow(TypeError);
    expect(() => roleBundle('Owner' as Role)).toThrow(TypeError);
  });
});

describe('roleBundle', () => {
  it('owner: every scope', () => {
    expect(sorted(roleBundle('owner'))).toEqual(sorted(OWNER_BUNDLE));
    expect(roleBundle('owner').size).toBe(EXPECTED_TOTAL);
    expect(sorted(roleBundle('owner'))).toEqual(sorted(ALL_SCOPES));
  });

  it('admin: everything except org:delete and org:transfer_ownership', () => {
    expect(sorted(roleBundle('admin'))).toEqual(sorted(ADMIN_BUNDLE));
    expect(roleBundle('admin').size).toBe(EXPECTED_TOTAL - 2);
    expect(roleBundle('admin').has('org:delete')).toBe(false);
    expect(roleBundle('admin').has('org:transfer_ownership')).toBe(false);
  });

  it('manager: reads, full project/assessment/finding/report work, API keys; no webhooks, no billing', () => {
    expect(sorted(roleBundle('manager'))).toEqual(sorted(MANAGER_BUNDLE));
    expect(roleBundle('manager').size).toBe(36);
  });

  it("manager: only read on issue exports, notification targets and source (SPEC's table, not issue 24)", () => {
    const manager = roleBundle('manager');
    const held = ALL_SCOPES.filter((s) => /^(issue_exports|notification_targets|source):/.test(s) && manager.has(s));
    expect(held).toEqual(['issue_exports:read', 'notification_targets:read', 'source:read_artifacts']);
  });

  it('member: reads plus profile:update, findings:triage and api_keys:revoke', () => {
    expect(sorted(roleBundle('member'))).toEqual(sorted(MEMBER_BUNDLE));
    expect(roleBundle('member').size).toBe(14);
  });

  it('manager has no webhook, billing, audit, governance or write-side org/member/team scope', () => {
    const manager = roleBundle('manager');
    for (const scope of ALL_SCOPES.filter((s) => /^(webhooks|billing|audit|governance):/.test(s))) {
      expect(manager.has(scope)).toBe(false);
    }
    for (const scope of ['org:update', 'members:invite', 'teams:create', 'assessments:delete', 'findings:suppress']) {
      expect(manager.has(scope)).toBe(false);
    }
  });

  it('roles form a ladder: each bundle contains the bundle of the role below', () => {
    for (let i = 0; i < ROLES.length - 1; i++) {
      const higher = roleBundle(ROLES[i]);
      const lower = roleBundle(ROLES[i + 1]);
      expect([...lower].filter((s) => !higher.has(s))).toEqual([]);
      expect(higher.size).toBeGreaterThan(lower.size);
    }
  });

  it('every bundle holds only catalogue scopes', () => {
    const known = new Set(ALL_SCOPES);
    for (const role of ROLES) expect([...roleBundle(role)].filter((s) => !known.has(s))).toEqual([]);
  });

  it('hands out a copy: mutating it does not change the role', () => {
    const bundle = roleBundle('member') as Set<string>;
    bundle.add('org:delete');
    bundle.delete('org:read');
    expect(roleBundle('member').has('org:delete')).toBe(false);
    expect(roleBundle('member').has('org:read')).toBe(true);
  });
});

describe('api_keys:rotate in the bundles', () => {
  it('is held by owner and admin only', () => {
    expect(ROLES.filter((role) => roleBundle(role).has('api_keys:rotate'))).toEqual(['owner', 'admin']);
  });
});
