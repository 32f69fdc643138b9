import { ALL_SCOPES, isKnownCategory, isKnownScope, Scope, scopesOfCategory, sortedUnique } from './catalogue';

export const ALL_WILDCARD = '*';

/** `*` or `<category>:*` for a category of the catalogue. `foo:*` is not a wildcard but an unknown name. */
export function isWildcard(value: unknown): value is string {
  if (value === ALL_WILDCARD) return true;
  return typeof value === 'string' && value.endsWith(':*') && isKnownCategory(value.slice(0, -2));
}

/** A catalogue scope or a wildcard. Case-sensitive, no trimming. */
export function isValidScopeRequest(value: unknown): value is string {
  return isKnownScope(value) || isWildcard(value);
}

/**
 * Expands `*` and `<category>:*` into concrete scopes; returns them sorted and de-duplicated.
 * Throws a RangeError on any entry that is neither a known scope nor a wildcard: validate input
 * with resolveRequestedScopes first, which reports such entries instead of throwing.
 */
export function expandScopes(requested: readonly string[]): Scope[] {
  const invalid = requested.filter((r) => !isValidScopeRequest(r));
  if (invalid.length > 0) {
    throw new RangeError(`unknown scopes: ${invalid.map(String).join(', ')}`);
  }
  return sortedUnique(requested.flatMap(expandOne));
}

function expandOne(entry: string): Scope[] {
  if (entry === ALL_WILDCARD) return [...ALL_SCOPES];
  if (isWildcard(entry)) return scopesOfCategory(entry.slice(0, -2));
  return [entry];
}
