// Which stored source objects the worker's orphan sweep removes. Objects are written before their archive row
// (extraction stores files, then the row commits), and a crash, a failed delete of a replaced archive or a deletion
// whose storage call failed leaves objects no row points at. They go once older than the grace period, which must
// outlast the longest upload: younger ones may belong to an upload whose row is about to be written.

export interface SweepEntry {
  key: string;
  modifiedAt: Date;
  /** A local put's temporary file: referenced by nothing, ever. */
  partial: boolean;
}

/** Where every upload's objects live: orgs/<org>/projects/<project>/assessments/<assessment>/<archive>/... */
export const SOURCE_OBJECTS_ROOT = 'orgs/';
const UPLOAD_PREFIX_SEGMENTS = 7;

/** The upload prefix a key lies under (what an archive row's storagePrefix holds), or null outside that layout. */
export function uploadPrefixOfKey(key: string): string | null {
  const segments = key.split('/');
  if (segments.length <= UPLOAD_PREFIX_SEGMENTS) return null;
  if (segments[0] !== 'orgs' || segments[2] !== 'projects' || segments[4] !== 'assessments') return null;
  return `${segments.slice(0, UPLOAD_PREFIX_SEGMENTS).join('/')}/`;
}

export interface SweepPlan {
  /** Local `.partial` files older than the cutoff: deleted whatever the rows say. */
  partials: string[];
  /** Upload prefix -> its old-enough keys; deleted when no archive row has that prefix. */
  byUploadPrefix: Map<string, string[]>;
}

/** Groups what is older than the cutoff; anything younger is left for a later sweep. */
export function planSweep(entries: SweepEntry[], cutoff: Date): SweepPlan {
  const plan: SweepPlan = { partials: [], byUploadPrefix: new Map() };
  // An upload with anything younger than the cutoff may still be writing (its row comes after its last object).
  const writing = new Set<string>();
  for (const entry of entries) {
    if (entry.modifiedAt.getTime() > cutoff.getTime()) {
      const prefix = uploadPrefixOfKey(entry.key);
      if (prefix) writing.add(prefix);
      continue;
    }
    if (entry.partial) {
      plan.partials.push(entry.key);
      continue;
    }
    const prefix = uploadPrefixOfKey(entry.key);
    // Not an upload's object: never written by the service, so never the sweep's to judge.
    if (!prefix) continue;
    const keys = plan.byUploadPrefix.get(prefix) ?? [];
    keys.push(entry.key);
    plan.byUploadPrefix.set(prefix, keys);
  }
  for (const prefix of writing) plan.byUploadPrefix.delete(prefix);
  return plan;
}

/** The keys to delete once the referenced upload prefixes are known. */
export function orphanKeys(plan: SweepPlan, referenced: ReadonlySet<string>): string[] {
  const keys = [...plan.partials];
  for (const [prefix, prefixKeys] of plan.byUploadPrefix) if (!referenced.has(prefix)) keys.push(...prefixKeys);
  return keys;
}
