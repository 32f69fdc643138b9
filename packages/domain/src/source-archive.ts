// What a source archive may contain. Pure rules over the facts a zip's central directory declares; the API's
// extraction (yauzl, which also holds every entry to its declared size while reading) applies them before it
// stores a single byte.

export interface SourceArchiveLimits {
  maxEntries: number;
  maxUncompressedBytes: number;
  /** Largest uncompressed/compressed ratio of one entry, and of the whole archive, from RATIO_FLOOR_BYTES up. */
  maxRatio: number;
}

export interface ZipEntryFacts {
  name: string;
  compressedSize: number;
  uncompressedSize: number;
  /** Unix mode from the upper 16 bits of the external attributes (0 when the archiver recorded none). */
  unixMode: number;
}

/**
 * Entries smaller than this are not held to the ratio alone (a short, repetitive source file compresses well);
 * many of them still count towards the ratio of the whole archive.
 */
export const RATIO_FLOOR_BYTES = 4 * 1024;

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

/**
 * The key two names collide under: NFC, then full case folding (upper then lower, so "ß" meets "SS"). Two entries
 * with one key would overwrite each other when extracted on a case-insensitive or normalising file system.
 */
export function entryNameKey(path: string): string {
  return path.normalize('NFC').toUpperCase().toLowerCase().normalize('NFC');
}

/**
 * Throws ArchiveRefusal naming the first entry that makes the archive unsafe or too large; returns the files.
 * archiveBytes is the archive's own size: the whole archive may expand at most maxRatio times it.
 */
export function checkArchiveEntries(
  entryCount: number,
  entries: ZipEntryFacts[],
  limits: SourceArchiveLimits,
  archiveBytes = entries.reduce((sum, e) => sum + e.compressedSize, 0),
): ArchiveFileEntry[] {
  refuseEntryCount(entryCount, limits);
  let total = 0;
  const files: ArchiveFileEntry[] = [];
  const fileNames = new Map<string, string>();
  const folders = new Map<string, string>();
  for (const [index, entry] of entries.entries()) {
    const reason = unsafeEntryName(entry.name) ?? unsafeEntryType(entry);
    if (reason) throw new ArchiveRefusal(`Entry "${printable(entry.name)}" ${reason}: the archive is refused.`);
    const path = normalizedEntryPath(entry.name);
    if (isDirectoryEntry(entry)) {
      if (path !== '') folders.set(entryNameKey(path), entry.name);
      continue;
    }
    if (path === '') throw new ArchiveRefusal(`Entry "${printable(entry.name)}" has no file name: the archive is refused.`);
    const key = entryNameKey(path);
    const twin = fileNames.get(key);
    if (twin !== undefined) {
      throw new ArchiveRefusal(
        twin === path
          ? `Entry "${printable(entry.name)}" appears twice: the archive is refused.`
          : `Entries "${printable(twin)}" and "${printable(path)}" differ only in letter case or Unicode normalisation: the archive is refused.`,
      );
    }
    fileNames.set(key, path);
    for (const folder of ancestorsOf(path)) if (!folders.has(entryNameKey(folder))) folders.set(entryNameKey(folder), `${folder}/`);
    total += entry.uncompressedSize;
    if (total > limits.maxUncompressedBytes) {
      throw new ArchiveRefusal(
        `The archive expands to more than ${limits.maxUncompressedBytes} bytes (at entry "${printable(entry.name)}"): refused as a possible zip bomb.`,
      );
    }
    refuseRatio(entry, limits);
    files.push({ index, path, size: entry.uncompressedSize });
  }
  refuseFileFolderClash(fileNames, folders);
  refuseArchiveRatio(total, archiveBytes, limits);
  return files;
}

/** "a/b/c" -> ["a", "a/b"]. */
function ancestorsOf(path: string): string[] {
  const segments = path.split('/');
  return segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join('/'));
}

/** A name that is a file and also a folder ("a" and "a/b"): one of them cannot be extracted. */
function refuseFileFolderClash(fileNames: Map<string, string>, folders: Map<string, string>): void {
  for (const [key, path] of fileNames) {
    const folder = folders.get(key);
    if (folder !== undefined) {
      throw new ArchiveRefusal(`Entry "${printable(path)}" is a file and also a folder ("${printable(folder)}"): the archive is refused.`);
    }
  }
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

/** Many small entries each under the floor, or each just under the ratio, still add up: the whole is held too. */
function refuseArchiveRatio(total: number, archiveBytes: number, limits: SourceArchiveLimits): void {
  if (total < RATIO_FLOOR_BYTES) return;
  const ratio = total / Math.max(archiveBytes, 1);
  if (ratio > limits.maxRatio) {
    throw new ArchiveRefusal(
      `The archive expands ${Math.round(ratio)} times its size (${total} bytes from ${archiveBytes}; at most ${limits.maxRatio} times): refused as a possible zip bomb.`,
    );
  }
}

/**
 * Refuses an upload that would take the organization past its quota of stored uncompressed bytes. usedBytes is
 * what its archives hold now; replacedBytes what this upload replaces (that archive goes once this one is stored).
 */
export function refuseOverQuota(q: { usedBytes: number; replacedBytes: number; incomingBytes: number; quotaBytes: number }): void {
  const after = q.usedBytes - q.replacedBytes + q.incomingBytes;
  if (after > q.quotaBytes) {
    throw new QuotaRefusal(
      `The organization's source storage quota is ${q.quotaBytes} uncompressed bytes (SOURCE_ORG_QUOTA_BYTES); ` +
        `${q.usedBytes} are used and this archive expands to ${q.incomingBytes}: refused. Delete assessments or archives you no longer need.`,
    );
  }
}

export class QuotaRefusal extends ArchiveRefusal {
  constructor(detail: string) {
    super(detail);
    this.name = 'QuotaRefusal';
  }
}

/**
 * Each entry's own header name, where an Info-ZIP Unicode Path extra field (0x7075) gave the entry another: tools
 * that ignore the field extract under the header's name, so it must be safe too, and no two files may share it.
 * Letter case is not compared: a header name in a legacy code page (Info-ZIP's default) is mojibake, and two
 * different names can fold alike.
 */
export function refuseHeaderNames(entries: Array<{ facts: ZipEntryFacts; headerName: string }>): void {
  const files = new Set<string>();
  for (const { facts, headerName } of entries) {
    const reason = unsafeEntryName(headerName);
    if (reason) throw new ArchiveRefusal(`Entry "${printable(headerName)}" ${reason}: the archive is refused.`);
    if (isDirectoryEntry({ ...facts, name: headerName })) continue;
    const path = normalizedEntryPath(headerName);
    if (files.has(path)) throw new ArchiveRefusal(`Entry "${printable(headerName)}" appears twice: the archive is refused.`);
    files.add(path);
  }
}

/** Fixed part of a zip local file header; the name follows it. */
export const LOCAL_HEADER_BYTES = 30;
const LOCAL_HEADER_SIGNATURE = 0x04034b50;
const UTF8_FLAG = 0x800;

/**
 * Compares an entry's local file header (its first LOCAL_HEADER_BYTES + centralName.length bytes, read at the
 * offset the central directory gives) with the central directory's record: the name bytes and their encoding flag
 * must be the same. Extractors that walk local headers (streaming unzip, some scanners) would otherwise see other
 * names than the ones judged here.
 */
export function refuseLocalHeaderMismatch(
  local: Uint8Array,
  central: { rawName: Uint8Array; flags: number; name: string },
): void {
  const view = new DataView(local.buffer, local.byteOffset, local.byteLength);
  const refuse = (why: string) => {
    throw new ArchiveRefusal(`Entry "${printable(central.name)}" ${why}: the archive is refused.`);
  };
  if (local.byteLength < LOCAL_HEADER_BYTES || view.getUint32(0, true) !== LOCAL_HEADER_SIGNATURE) {
    refuse('has no local header where the central directory points');
  }
  const nameLength = view.getUint16(26, true);
  const localName = local.subarray(LOCAL_HEADER_BYTES, LOCAL_HEADER_BYTES + nameLength);
  const same =
    nameLength === central.rawName.byteLength &&
    localName.byteLength === nameLength &&
    localName.every((byte, i) => byte === central.rawName[i]) &&
    (view.getUint16(6, true) & UTF8_FLAG) === (central.flags & UTF8_FLAG);
  if (!same) refuse('has another name in its local header than in the central directory');
}

/** Entry names go into error messages: control characters are shown escaped, long names cut. */
function printable(name: string): string {
  const escaped = name.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return escaped.length > 200 ? `${escaped.slice(0, 200)}...` : escaped;
}
