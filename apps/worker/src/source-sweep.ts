// The orphan sweep of stored source (a maintenance job every SOURCE_ORPHAN_SWEEP_INTERVAL_MS): objects no archive
// row references and local `.partial` files, once older than SOURCE_ORPHAN_GRACE_MS (packages/domain
// source-sweep.ts decides which). It is also the retry of every storage deletion that failed after its rows were
// gone: a replaced archive, a deleted assessment, project or organization.
import { SOURCE_OBJECTS_ROOT, orphanKeys, planSweep } from '@svc/domain';
import { createStorage, isSafeKey, type ObjectStorage } from '@svc/storage';
import type { WorkerDeps } from './deps';

export interface SourceSweepResult {
  scanned: number;
  deleted: number;
}

/** The archive rows are looked up this many upload prefixes at a time. */
const LOOKUP_BATCH = 500;

async function referencedPrefixes(deps: WorkerDeps, prefixes: string[]): Promise<Set<string>> {
  const referenced = new Set<string>();
  for (let i = 0; i < prefixes.length; i += LOOKUP_BATCH) {
    // Across organizations on purpose: the sweep serves the whole storage, and only reads the prefixes.
    const rows = await deps.prisma.sourceArchive.findMany({
      where: { storagePrefix: { in: prefixes.slice(i, i + LOOKUP_BATCH) } },
      select: { storagePrefix: true },
    });
    for (const row of rows) referenced.add(row.storagePrefix);
  }
  return referenced;
}

export async function sweepOrphanedSource(deps: WorkerDeps): Promise<SourceSweepResult> {
  if (deps.storage) return sweepStorage(deps, deps.storage);
  const storage = createStorage(deps.config.storage, deps.logger);
  try {
    return await sweepStorage(deps, storage);
  } finally {
    storage.close();
  }
}

async function sweepStorage(deps: WorkerDeps, storage: ObjectStorage): Promise<SourceSweepResult> {
  const cutoff = new Date(deps.clock.now().getTime() - deps.config.source.orphanGraceMs);
  // A key the service could not have written (odd characters) is not its to delete, nor to stop the sweep.
  const entries = (await storage.scan(SOURCE_OBJECTS_ROOT)).filter((entry) => isSafeKey(entry.key));
  const plan = planSweep(entries, cutoff);
  const keys = orphanKeys(plan, await referencedPrefixes(deps, [...plan.byUploadPrefix.keys()]));
  if (keys.length > 0) {
    await storage.deleteKeys(keys);
    deps.logger.info('Removed orphaned source objects', { objects: keys.length });
  }
  return { scanned: entries.length, deleted: keys.length };
}
