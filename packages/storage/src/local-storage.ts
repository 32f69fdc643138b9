// Objects as files under one directory. A put writes a temporary file beside its target and renames it, so a
// reader never sees half an object and a failed put leaves nothing.
import { createReadStream, type WriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { ObjectNotFoundError, assertSafeKey, type ObjectStorage, type StoredEntry } from './storage';

const TEMP_SUFFIX = '.partial';

export class LocalStorage implements ObjectStorage {
  readonly driver = 'local' as const;
  private readonly root: string;

  constructor(dir: string) {
    this.root = path.resolve(dir);
  }

  private fileOf(key: string): string {
    return path.join(this.root, ...key.split('/'));
  }

  async put(key: string, body: Readable, size: number): Promise<void> {
    assertSafeKey(key);
    const target = this.fileOf(key);
    const temp = `${target}.${randomBytes(6).toString('hex')}${TEMP_SUFFIX}`;
    try {
      await pipeline(body, await this.createTemp(temp));
      const written = (await stat(temp)).size;
      if (written !== size) throw new Error(`Stored ${written} bytes for ${key}, expected ${size}`);
      await rename(temp, target);
    } catch (err) {
      await rm(temp, { force: true });
      throw err;
    }
  }

  /**
   * The temporary file, its folders made first. The orphan sweep removes folders it empties: one removed between
   * the mkdir and the open is made again, once.
   */
  private async createTemp(temp: string): Promise<WriteStream> {
    for (let attempt = 0; ; attempt++) {
      await mkdir(path.dirname(temp), { recursive: true });
      const fd = await open(temp, 'wx').catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT' && attempt === 0) return null;
        throw err;
      });
      if (fd) return fd.createWriteStream();
    }
  }

  async get(key: string): Promise<Readable> {
    assertSafeKey(key);
    const file = this.fileOf(key);
    try {
      if (!(await stat(file)).isFile()) throw new ObjectNotFoundError(key);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ObjectNotFoundError(key);
      throw err;
    }
    return createReadStream(file);
  }

  async list(prefix: string): Promise<string[]> {
    assertSafeKey(prefix, { prefix: true });
    const dir = this.fileOf(prefix.replace(/\/$/, ''));
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    return entries
      .filter((e) => e.isFile() && !e.name.endsWith(TEMP_SUFFIX))
      .map((e) => path.relative(this.root, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
      .sort();
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertSafeKey(prefix, { prefix: true });
    await rm(this.fileOf(prefix.replace(/\/$/, '')), { recursive: true, force: true });
  }

  async scan(prefix: string): Promise<StoredEntry[]> {
    assertSafeKey(prefix, { prefix: true });
    const dir = this.fileOf(prefix.replace(/\/$/, ''));
    const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const out: StoredEntry[] = [];
    for (const e of entries) {
      if (!e.isFile()) continue;
      const file = path.join(e.parentPath, e.name);
      const info = await stat(file).catch(() => null);
      if (!info) continue;
      const key = path.relative(this.root, file).split(path.sep).join('/');
      out.push({ key, modifiedAt: info.mtime, partial: e.name.endsWith(TEMP_SUFFIX) });
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async deleteKeys(keys: string[]): Promise<void> {
    for (const key of keys) {
      assertSafeKey(key);
      await rm(this.fileOf(key), { force: true });
      await this.removeEmptyParents(path.dirname(this.fileOf(key)));
    }
  }

  /** Folders left empty by a deletion go too, up to the root (a concurrent put recreates what it needs). */
  private async removeEmptyParents(dir: string): Promise<void> {
    while (dir.startsWith(this.root + path.sep)) {
      try {
        await rmdir(dir);
      } catch {
        return;
      }
      dir = path.dirname(dir);
    }
  }

  close(): void {}
}
