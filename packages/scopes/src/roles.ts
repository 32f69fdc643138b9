import { ALL_SCOPES, Scope, scopesOfCategory } from './catalogue';

/** Highest first. */
export const ROLES = ['owner', 'admin', 'manager', 'member'] as const;
export type Role = (typeof ROLES)[number];

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

/** owner 3, admin 2, manager 1, member 0. */
export function roleRank(role: Role): number {
  assertRole(role);
  return ROLES.length - 1 - ROLES.indexOf(role);
}

const OWNER: readonly Scope[] = ALL_SCOPES;

// api_keys:rotate is reserved and grants nothing; owner and admin carry it only because their
// bundles are "everything (except ...)".
const ADMIN: readonly Scope[] = ALL_SCOPES.filter(
  (s) => s !== 'org:delete' && s !== 'org:transfer_ownership',
);

// SPEC's role table is the source (DESIGN.md, trust boundaries): read only on issue exports, notification targets
// and source artifacts, so a manager decides neither where findings are exported or notified nor what source an
// assessment receives. The specification lists the manager's reads but not profile:update or api_keys:read, while a
// member has both. Roles form a ladder (every member scope is also a manager scope), so both are included;
// "may create and revoke API keys" gives api_keys:create and api_keys:revoke, not rotate.
const MANAGER: readonly Scope[] = [
  'org:read',
  'profile:read',
  'profile:update',
  'members:read',
  'teams:read',
  'integrations:read',
  'issue_exports:read',
  'notification_targets:read',
  'source:read_artifacts',
  ...scopesOfCategory('projects'),
  ...scopesOfCategory('assessments').filter((s) => s !== 'assessments:delete'),
  ...scopesOfCategory('findings').filter((s) => s !== 'findings:suppress'),
  ...scopesOfCategory('reports'),
  'api_keys:read',
  'api_keys:create',
  'api_keys:revoke',
];

const MEMBER: readonly Scope[] = [
  'org:read',
  'profile:read',
  'profile:update',
  'members:read',
  'teams:read',
  'integrations:read',
  'issue_exports:read',
  'projects:read',
  'assessments:read',
  'findings:read',
  'reports:read',
  'api_keys:read',
  'findings:triage',
  'api_keys:revoke',
];

const BUNDLES: ReadonlyMap<Role, readonly Scope[]> = new Map<Role, readonly Scope[]>([
  ['owner', OWNER],
  ['admin', ADMIN],
  ['manager', MANAGER],
  ['member', MEMBER],
]);

/** The scopes a role holds. A fresh set on every call, so callers cannot alter the shared bundle. */
export function roleBundle(role: Role): ReadonlySet<Scope> {
  assertRole(role);
  return new Set(BUNDLES.get(role));
}

// Roles usually come from the database as plain strings; a wrong one must not pass silently.
function assertRole(role: unknown): asserts role is Role {
  if (!isRole(role)) throw new TypeError(`unknown role: ${String(role)}`);
}
