// Scope logic the pages share: grouping by category (SPEC's tables are per category) and what the caller may grant.

export interface ScopeGroup {
  category: string;
  scopes: string[];
}

export function categoryOf(scope: string): string {
  const i = scope.indexOf(':');
  return i < 0 ? scope : scope.slice(0, i);
}

/** Scopes grouped by category, categories in first-seen order, scopes sorted within each. */
export function groupScopes(scopes: readonly string[]): ScopeGroup[] {
  const groups = new Map<string, string[]>();
  for (const scope of scopes) {
    const category = categoryOf(scope);
    groups.set(category, [...(groups.get(category) ?? []), scope]);
  }
  return [...groups].map(([category, list]) => ({ category, scopes: [...list].sort() }));
}

/** Whether a granted list (which may hold `*` or `category:*`) allows one scope. */
export function allows(granted: readonly string[], scope: string): boolean {
  return granted.includes('*') || granted.includes(scope) || granted.includes(`${categoryOf(scope)}:*`);
}

/** Wildcards a key may be given: owners only, and only categories they hold in full. */
export function wildcardOptions(role: string, scopes: readonly string[]): string[] {
  if (role !== 'owner') return [];
  return ['*', ...groupScopes(scopes).map((g) => `${g.category}:*`)];
}
