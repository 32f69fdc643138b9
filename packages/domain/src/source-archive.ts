// What a source archive may contain. Pure rules over the facts a zip's central directory declares; the API's
// extraction (yauzl, which also holds every entry to its declared size while reading) applies them before it
// stores a single byte.

export interface SourceArchiveLimits {
  maxEntries: number;
  maxUncompressedBytes: number;
  /** Largest uncompressed/compressed ratio of one entry of at least RATIO_FLOOR_BYTES. */
  maxRatio: number;
}

export interface ZipEntryFacts {
  name: string;
  compressedSize: number;
  uncompressedSize: number;
  /** Unix mode from the upper 16 bits of the external attributes (0 when the archiver recorded none). */
  unixMode: number;
}

/** Entries smaller than this are never a bomb by ratio alone (a short, repetitive source file compresses well). */
export const RATIO_FLOOR_BYTES = 1024 * 1024;

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;

export class ArchiveRefusal extends Error {
  constructor(detail: string) {
    super(detail);
    this.name = 'ArchiveRefusal';
  }
}

/** Why an entry name would land outside the extraction root (or could not be stored), or null when it is safe. */
export function unsafeEntryName(name: string): string | null {
  if (name.length === 0) return 'has an empty name';
  if (name.includes('\0')) return 'has a NUL byte in its name';
  if (name.includes('\\')) return 'uses a backslash in its path';
  if (/^[A-Za-z]:/.test(name)) return 'starts with a drive letter';
  if (name.startsWith('/')) return 'is an absolute path';
  if (name.split('/').includes('..')) return 'escapes the archive root with ..';
  return null;
}

export function isDirectoryEntry(entry: ZipEntryFacts): boolean {
  return entry.name.endsWith('/') || (entry.unixMode & S_IFMT) === S_IFDIR;
}

/** Anything but a regular file or directory (a symlink, a device, a FIFO) is refused. */
function unsafeEntryType(entry: ZipEntryFacts): string | null {
  const type = entry.unixMode & S_IFMT;
  if (type === S_IFLNK) return 'is a symbolic link';
  if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) return 'is not a regular file';
  return null;
}

/** The stored path of a file entry: './' segments and repeated slashes dropped. */
export function normalizedEntryPath(name: string): string {
  return name.split('/').filter((segment) => segment !== '' && segment !== '.').join('/');
}

/** A file entry to extract: its position among the entries and the path it is stored under. */
export interface ArchiveFileEntry {
  index: number;
  path: string;
  size: number;
}

/** Throws ArchiveRefusal naming the first entry that makes the archive unsafe or too large; returns the files. */
export function checkArchiveEntries(entryCount: number, entries: ZipEntryFacts[], limits: SourceArchiveLimits): ArchiveFileEntry[] {
  refuseEntryCount(entryCount, limits);
  let total = 0;
  const files: ArchiveFileEntry[] = [];
  const seen = new Set<string>();
  for (const [index, entry] of entries.entries()) {
    const reason = unsafeEntryName(entry.name) ?? unsafeEntryType(entry);
    if (reason) throw new ArchiveRefusal(`Entry "${printable(entry.name)}" ${reason}: the archive is refused.`);
    if (isDirectoryEntry(entry)) continue;
    const path = normalizedEntryPath(entry.name);
    if (path === '') throw new ArchiveRefusal(`Entry "${printable(entry.name)}" has no file name: the archive is refused.`);
    if (seen.has(path)) throw new ArchiveRefusal(`Entry "${printable(entry.name)}" appears twice: the archive is refused.`);
    seen.add(path);
    total += entry.uncompressedSize;
    if (total > limits.maxUncompressedBytes) {
      throw new ArchiveRefusal(
        `The archive expands to more than ${limits.maxUncompressedBytes} bytes (at entry "${printable(entry.name)}"): refused as a possible zip bomb.`,
      );
    }
    refuseRatio(entry, limits);
    files.push({ index, path, size: entry.uncompressedSize });
  }
  return files;
}

export function refuseEntryCount(entryCount: number, limits: SourceArchiveLimits): void {
  if (entryCount > limits.maxEntries) {
    throw new ArchiveRefusal(`The archive has ${entryCount} entries; at most ${limits.maxEntries} are accepted.`);
  }
}

function refuseRatio(entry: ZipEntryFacts, limits: SourceArchiveLimits): void {
  if (entry.uncompressedSize < RATIO_FLOOR_BYTES) return;
  const ratio = entry.uncompressedSize / Math.max(entry.compressedSize, 1);
  if (ratio > limits.maxRatio) {
    throw new ArchiveRefusal(
      `Entry "${printable(entry.name)}" expands ${Math.round(ratio)} times (at most ${limits.maxRatio}): refused as a possible zip bomb.`,
    );
  }
}

/** Entry names go into error messages: control characters are shown escaped, long names cut. */
function printable(name: string): string {
  const escaped = name.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return escaped.length > 200 ? `${escaped.slice(0, 200)}...` : escaped;
}
