export {
  ALL_SCOPES,
  SCOPE_CATALOGUE,
  SCOPE_CATEGORIES,
  isKnownCategory,
  isKnownScope,
  scopesOfCategory,
} from './catalogue';
export type { Scope, ScopeDefinition } from './catalogue';
export { ROLES, isRole, roleBundle, roleRank } from './roles';
export type { Role } from './roles';
export { ALL_WILDCARD, expandScopes, isValidScopeRequest, isWildcard } from './wildcards';
export { effectiveKeyScopes, hasScope, resolveRequestedScopes } from './resolve';
export type { ScopeRejectionReason, ScopeResolution } from './resolve';
