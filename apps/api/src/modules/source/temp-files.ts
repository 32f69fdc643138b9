// The API's temporary folders in SOURCE_TEMP_DIR: an upload's spool (svc-upload-*) and an extraction's scratch
// (svc-extract-*). Each request removes its own on every way out; a process killed mid-upload cannot, so the API
// sweeps them when it starts. Only folders with our prefixes, and only those untouched for SOURCE_TEMP_GRACE_MS:
// a younger one may belong to another API process sharing the folder, still receiving.
import { mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '@svc/config';

export const UPLOAD_PREFIX = 'svc-upload-';
export const EXTRACT_PREFIX = 'svc-extract-';
const OURS = [UPLOAD_PREFIX, EXTRACT_PREFIX];

/** The newest modification time of a folder and the files directly in it (a spool being written keeps it fresh). */
async function lastTouched(dir: string): Promise<number> {
  let newest = (await stat(dir)).mtimeMs;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const info = await stat(path.join(dir, entry.name)).catch(() => null);
    if (info) newest = Math.max(newest, info.mtimeMs);
  }
  return newest;
}

/** Removes our temporary folders untouched for graceMs; answers the names removed. */
export async function sweepTempFiles(tempDir: string, graceMs: number, now = Date.now()): Promise<string[]> {
  const entries = await readdir(tempDir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  const removed: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || !OURS.some((prefix) => entry.name.startsWith(prefix))) continue;
    const dir = path.join(tempDir, entry.name);
    const touched = await lastTouched(dir).catch(() => null);
    if (touched === null || now - touched < graceMs) continue;
    await rm(dir, { recursive: true, force: true });
    removed.push(entry.name);
  }
  return removed;
}

/** The start-up sweep (and the folder made if missing): never stops the API from starting, says what it removed. */
export async function sweepTempFilesAtStart(config: { tempDir: string; tempGraceMs: number }, logger: Logger): Promise<void> {
  try {
    await mkdir(config.tempDir, { recursive: true });
    const removed = await sweepTempFiles(config.tempDir, config.tempGraceMs);
    if (removed.length > 0) logger.info('Removed leftover upload temp folders', { count: removed.length });
  } catch (err) {
    logger.warn('Could not sweep upload temp folders', { error: (err as Error).message });
  }
}
