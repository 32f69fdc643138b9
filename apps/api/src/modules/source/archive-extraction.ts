// Safe extraction of an uploaded zip with yauzl: the central directory is read and judged first (packages/domain
// source-archive rules: names, types, entry count, sizes, ratios), and only an archive that passes is read. yauzl
// holds each entry to its declared size while reading, so the sizes judged are the sizes extracted.
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import {
  ArchiveRefusal,
  LOCAL_HEADER_BYTES,
  checkArchiveEntries,
  refuseEntryCount,
  refuseHeaderNames,
  refuseLocalHeaderMismatch,
  type SourceArchiveLimits,
  type ZipEntryFacts,
} from '@svc/domain';
import type { ObjectStorage } from '@svc/storage';

export interface ExtractedFile {
  path: string;
  size: number;
  sha256: string;
}

/** yauzl's own decoder of entry names (UTF-8 flag, Info-ZIP Unicode path field, CP437): not in its type file. */
const decodeEntryName = (yauzl as unknown as {
  getFileNameLowLevel(flags: number, raw: Buffer, extraFields: unknown[], strict: boolean): string;
}).getFileNameLowLevel;

function openZip(file: string): Promise<yauzl.ZipFile> {
  return new Promise((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: true }, (err, zip) =>
      err ? reject(new ArchiveRefusal(`The upload is not a readable zip archive (${err.message}).`)) : resolve(zip),
    ),
  );
}

type CentralEntry = { facts: ZipEntryFacts; entry: yauzl.Entry; headerName: string };

function readCentralDirectory(zip: yauzl.ZipFile): Promise<CentralEntry[]> {
  return new Promise((resolve, reject) => {
    const entries: CentralEntry[] = [];
    zip.on('entry', (entry: yauzl.Entry) => {
      const raw = entry.fileName as unknown as Buffer;
      // strict: backslashes are kept (and refused) instead of being turned into separators.
      const name = decodeEntryName(entry.generalPurposeBitFlag, raw, entry.extraFields, true);
      entries.push({
        entry,
        // The header's own name, which extractors that ignore the Unicode Path extra field (0x7075) use instead.
        headerName: decodeEntryName(entry.generalPurposeBitFlag, raw, [], true),
        facts: {
          name,
          compressedSize: entry.compressedSize,
          uncompressedSize: entry.uncompressedSize,
          unixMode: (entry.externalFileAttributes >>> 16) & 0xffff,
        },
      });
      zip.readEntry();
    });
    zip.once('end', () => resolve(entries));
    zip.once('error', (err: Error) => reject(new ArchiveRefusal(`The zip archive is damaged (${err.message}).`)));
    zip.readEntry();
  });
}

function openEntry(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<NodeJS.ReadableStream> {
  return new Promise((resolve, reject) =>
    zip.openReadStream(entry, (err, stream) => (err ? reject(new ArchiveRefusal(`Entry cannot be read (${err.message}).`)) : resolve(stream))),
  );
}

/** Every entry's local header must name it as the central directory does (read here: yauzl skips those names). */
async function checkLocalHeaders(file: string, entries: CentralEntry[]): Promise<void> {
  const handle = await open(file, 'r');
  try {
    for (const { facts, entry } of entries) {
      const rawName = entry.fileName as unknown as Buffer;
      const local = Buffer.alloc(LOCAL_HEADER_BYTES + rawName.length);
      const { bytesRead } = await handle.read(local, 0, local.length, entry.relativeOffsetOfLocalHeader);
      refuseLocalHeaderMismatch(local.subarray(0, bytesRead), { rawName, flags: entry.generalPurposeBitFlag, name: facts.name });
    }
  } finally {
    await handle.close();
  }
}

/**
 * Judges the archive (central directory, then every local header), lets `admit` refuse its total (the quota), then
 * stores each file under `${prefix}files/<sha256>` (identical files once). Throws ArchiveRefusal (a 422) naming the
 * offending entry; the caller removes whatever was stored under the prefix.
 */
export async function extractArchive(
  file: string,
  archiveBytes: number,
  limits: SourceArchiveLimits,
  admit: (uncompressedBytes: number) => Promise<void>,
  storage: ObjectStorage,
  prefix: string,
  scratchFile: string,
): Promise<ExtractedFile[]> {
  const zip = await openZip(file);
  try {
    refuseEntryCount(zip.entryCount, limits);
    const entries = await readCentralDirectory(zip);
    const files = checkArchiveEntries(zip.entryCount, entries.map((e) => e.facts), limits, archiveBytes);
    if (entries.some((e) => e.headerName !== e.facts.name)) refuseHeaderNames(entries);
    await checkLocalHeaders(file, entries);
    await admit(files.reduce((sum, f) => sum + f.size, 0));
    const stored = new Set<string>();
    const out: ExtractedFile[] = [];
    for (const file of files) {
      const sha256 = await extractEntry(zip, entries[file.index]!.entry, file.path, scratchFile);
      if (!stored.has(sha256)) {
        await storage.put(`${prefix}files/${sha256}`, createReadStream(scratchFile), file.size);
        stored.add(sha256);
      }
      out.push({ path: file.path, size: file.size, sha256 });
    }
    return out;
  } finally {
    zip.close();
    await rm(scratchFile, { force: true });
  }
}

/** Inflates one entry into the scratch file and returns its SHA-256 (yauzl fails on any size mismatch). */
async function extractEntry(zip: yauzl.ZipFile, entry: yauzl.Entry, path: string, scratchFile: string): Promise<string> {
  const hash = createHash('sha256');
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(await openEntry(zip, entry), hashing, createWriteStream(scratchFile));
  } catch (err) {
    if (err instanceof ArchiveRefusal) throw err;
    throw new ArchiveRefusal(`Entry "${path}" cannot be extracted (${(err as Error).message}).`);
  }
  return hash.digest('hex');
}
