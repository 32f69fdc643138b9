// The API's temporary folders in SOURCE_TEMP_DIR: an upload's spool (svc-upload-*) and an extraction's scratch
// (svc-extract-*). Each request removes its own on every way out; a process killed mid-upload cannot, so the API
// sweeps them when it starts and every SOURCE_TEMP_SWEEP_INTERVAL_MS while it runs (a process restarted soon after
// the kill finds them younger than the grace and would otherwise keep them until its own next start). Only folders
// with our prefixes, only those untouched for SOURCE_TEMP_GRACE_MS (a younger one may belong to another API process
// sharing the folder, still receiving), and never one this process is using. A folder in use is touched every third
// of the grace, so that another process's sweep does not take it either while nothing is written to it (an
// extraction reads the spool for as long as it runs).
import { mkdir, mkdtemp, readdir, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '@svc/config';

export const UPLOAD_PREFIX = 'svc-upload-';
export const EXTRACT_PREFIX = 'svc-extract-';
const OURS = [UPLOAD_PREFIX, EXTRACT_PREFIX];

/** The folders this process's requests are using now: its sweeps leave them alone. */
const inUse = new Set<string>();

export interface TempFolder {
  dir: string;
  /** Removes the folder and what is in it (never throws). */
  remove(): Promise<void>;
}

type TempConfig = { tempDir: string; tempGraceMs: number; tempSweepIntervalMs: number };

/** How often a folder in use is touched: a third of the grace, between 1 s and 5 min (none with no grace). */
const touchIntervalMs = (graceMs: number) => Math.min(Math.max(Math.floor(graceMs / 3), 1_000), 5 * 60_000);

/** A new temporary folder of ours for one request; the request removes it on every way out. */
export async function makeTempFolder(config: Omit<TempConfig, 'tempSweepIntervalMs'>, prefix: typeof UPLOAD_PREFIX | typeof EXTRACT_PREFIX): Promise<TempFolder> {
  const dir = await mkdtemp(path.join(config.tempDir, prefix));
  inUse.add(dir);
  const touching =
    config.tempGraceMs > 0
      ? setInterval(() => {
          const now = new Date();
          utimes(dir, now, now).catch(() => undefined);
        }, touchIntervalMs(config.tempGraceMs)).unref()
      : null;
  return {
    dir,
    remove: async () => {
      if (touching) clearInterval(touching);
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      inUse.delete(dir);
    },
  };
}

/** The newest modification time of a folder and the files directly in it (a spool being written keeps it fresh). */
async function lastTouched(dir: string): Promise<number> {
  let newest = (await stat(dir)).mtimeMs;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const info = await stat(path.join(dir, entry.name)).catch(() => null);
    if (info) newest = Math.max(newest, info.mtimeMs);
  }
  return newest;
}

/** Removes our temporary folders untouched for graceMs and not in use here; answers the names removed. */
export async function sweepTempFiles(tempDir: string, graceMs: number, now = Date.now()): Promise<string[]> {
  const entries = await readdir(tempDir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
  const removed: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || !OURS.some((prefix) => entry.name.startsWith(prefix))) continue;
    const dir = path.join(tempDir, entry.name);
    if (inUse.has(dir)) continue;
    const touched = await lastTouched(dir).catch(() => null);
    if (touched === null || now - touched < graceMs) continue;
    await rm(dir, { recursive: true, force: true });
    removed.push(entry.name);
  }
  return removed;
}

/** One sweep that never throws: says what it removed, or why it could not. */
async function sweepAndLog(config: TempConfig, logger: Logger): Promise<void> {
  try {
    const removed = await sweepTempFiles(config.tempDir, config.tempGraceMs);
    if (removed.length > 0) logger.info('Removed leftover upload temp folders', { count: removed.length });
  } catch (err) {
    logger.warn('Could not sweep upload temp folders', { error: (err as Error).message });
  }
}

/**
 * The start-up sweep (and the folder made if missing), then one every tempSweepIntervalMs; never stops the API from
 * starting. Answers the function that stops the periodic sweeps (at shutdown).
 */
export async function startTempFileSweeps(config: TempConfig, logger: Logger): Promise<() => void> {
  await mkdir(config.tempDir, { recursive: true }).catch((err: Error) => logger.warn('Could not create the upload temp folder', { error: err.message }));
  await sweepAndLog(config, logger);
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void sweepAndLog(config, logger).finally(() => {
      running = false;
    });
  }, config.tempSweepIntervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
