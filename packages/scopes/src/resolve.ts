import { isKnownScope, Scope, sortedUnique } from './catalogue';
import { Role, roleBundle } from './roles';
import { expandScopes, isValidScopeRequest, isWildcard } from './wildcards';

/** API mapping: unknown_scope -> 422; wildcard_not_allowed and outside_bundle -> 403. */
export type ScopeRejectionReason = 'unknown_scope' | 'wildcard_not_allowed' | 'outside_bundle';

export type ScopeResolution =
  | { readonly ok: true; readonly scopes: Scope[] }
  | { readonly ok: false; readonly reason: ScopeRejectionReason; readonly scopes: string[] };

/**
 * Validates the scopes requested for a new API key created by a member with `creatorRole`.
 * Checks, in order: every entry is a known scope or wildcard; only an owner uses wildcards;
 * every resulting scope is in the creator's bundle. On success the scopes are concrete, sorted
 * and de-duplicated; on failure `scopes` lists the offending entries, sorted and de-duplicated.
 */
export function resolveRequestedScopes(requested: readonly string[], creatorRole: Role): ScopeResolution {
  const bundle = roleBundle(creatorRole);

  const unknown = requested.filter((r) => !isValidScopeRequest(r));
  if (unknown.length > 0) return reject('unknown_scope', unknown.map(String));

  const wildcards = requested.filter(isWildcard);
  if (wildcards.length > 0 && creatorRole !== 'owner') return reject('wildcard_not_allowed', wildcards);

  const scopes = expandScopes(requested);
  const outside = scopes.filter((s) => !bundle.has(s));
  if (outside.length > 0) return reject('outside_bundle', outside);

  return { ok: true, scopes };
}

function reject(reason: ScopeRejectionReason, scopes: string[]): ScopeResolution {
  return { ok: false, reason, scopes: sortedUnique(scopes) };
}

/**
 * The scopes a key may use now: its stored scopes intersected with its creator's current bundle,
 * so a demoted creator's keys lose scopes. A creator who is no longer a member (null/undefined)
 * leaves the key with nothing.
 */
export function effectiveKeyScopes(
  storedScopes: Iterable<string>,
  creatorCurrentRole: Role | null | undefined,
): Scope[] {
  if (creatorCurrentRole == null) return [];
  const bundle = roleBundle(creatorCurrentRole);
  return sortedUnique([...storedScopes].filter((s) => bundle.has(s)));
}

/**
 * Exact membership of `required` in `granted`. Wildcards in `granted` grant nothing here: they are
 * expanded before storage, and matching them would let a stray `*` grant everything.
 * `required` must be a catalogue scope; anything else is a programming error and throws.
 */
export function hasScope(granted: Iterable<string> | ReadonlySet<string>, required: string): boolean {
  if (!isKnownScope(required)) throw new TypeError(`not a catalogue scope: ${String(required)}`);
  if (isReadonlySet(granted)) return granted.has(required);
  for (const scope of granted) if (scope === required) return true;
  return false;
}

function isReadonlySet(value: Iterable<string> | ReadonlySet<string>): value is ReadonlySet<string> {
  return value instanceof Set;
}
