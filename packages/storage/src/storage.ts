// One interface for the objects the service stores (uploaded source archives and their extracted files), with
// two implementations: a local directory (the default, one API instance) and an S3-compatible bucket (several
// API instances). Keys are '/'-separated paths of safe segments; the caller owns their layout.
import type { Readable } from 'node:stream';

export interface ObjectStorage {
  readonly driver: 'local' | 's3';
  /** Stores `size` bytes read from `body` under `key`, replacing any object there. Nothing is visible until done. */
  put(key: string, body: Readable, size: number): Promise<void>;
  /** A stream of the object's bytes; throws ObjectNotFoundError when there is none. */
  get(key: string): Promise<Readable>;
  /** Keys under a prefix ending in '/', sorted. */
  list(prefix: string): Promise<string[]>;
  /** Deletes every object under a prefix ending in '/'; a prefix without objects is fine. */
  deletePrefix(prefix: string): Promise<void>;
  /**
   * Everything stored under a prefix with its last modification, for the orphan sweep: the objects, and (local
   * storage) the temporary `.partial` files of puts that never finished, marked as such.
   */
  scan(prefix: string): Promise<StoredEntry[]>;
  /** Deletes these keys (objects or `.partial` entries from scan); a key already gone is fine. */
  deleteKeys(keys: string[]): Promise<void>;
  /** Releases connections (S3); the storage is not used afterwards. */
  close(): void;
}

export interface StoredEntry {
  key: string;
  modifiedAt: Date;
  /** A local put's temporary file: never an object, only ever left behind by a put that died. */
  partial: boolean;
}

export class ObjectNotFoundError extends Error {
  constructor(key: string) {
    super(`No stored object at ${key}`);
    this.name = 'ObjectNotFoundError';
  }
}

const SAFE_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

/** True when every segment of the key is a plain name (what assertSafeKey insists on). */
export function isSafeKey(key: string): boolean {
  return key.split('/').every((segment) => SAFE_SEGMENT.test(segment));
}

/** Throws unless every segment of the key is a plain name (no '..', no empty segment, no odd characters). */
export function assertSafeKey(key: string, { prefix = false } = {}): void {
  const body = prefix ? key.replace(/\/$/, '') : key;
  if (prefix && !key.endsWith('/')) throw new Error(`A storage prefix must end with '/': ${key}`);
  if (!body.split('/').every((segment) => SAFE_SEGMENT.test(segment))) throw new Error(`Unsafe storage key: ${key}`);
}
