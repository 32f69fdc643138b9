// Zip archives written byte by byte, so tests can make the hostile ones no archiver would: names that escape the
// root, symbolic links, entries whose headers lie, entries that share one compressed body (a zip bomb of a few KiB).
import { crc32, deflateRawSync } from 'node:zlib';

export interface ZipEntrySpec {
  name: string;
  data?: Buffer;
  /** Unix mode stored in the external attributes (default: a regular file, 0644). */
  mode?: number;
  /** Deflate the data (default: stored). */
  deflate?: boolean;
  /** Declared uncompressed size, when the header should lie about it. */
  declaredSize?: number;
  /** Another name in the local header than in the central directory (which the service judges). */
  localName?: string;
  /** A body deflated once for many entries (see deflatedOnce): the data is not deflated again. */
  deflated?: DeflatedBody;
  /** An Info-ZIP Unicode Path extra field (0x7075) in the central directory: the name tools that read it see. */
  unicodePath?: string;
}

export interface DeflatedBody {
  compressed: Buffer;
  crc: number;
  size: number;
}

/** One deflate of `data`, for archives of many identical entries (400 x 1,000,000 zero bytes in a blink). */
export function deflatedOnce(data: Buffer): DeflatedBody {
  return { compressed: deflateRawSync(data, { level: 9 }), crc: crc32(data), size: data.length };
}

const REGULAR_FILE = 0o100644;
export const SYMLINK = 0o120777;

interface Body {
  offset: number;
  crc: number;
  compressedSize: number;
  uncompressedSize: number;
  method: number;
}

function localHeader(name: Buffer, body: Omit<Body, 'offset'>): Buffer {
  const h = Buffer.alloc(30);
  h.writeUInt32LE(0x04034b50, 0);
  h.writeUInt16LE(20, 4);
  h.writeUInt16LE(0x800, 6); // UTF-8 names
  h.writeUInt16LE(body.method, 8);
  h.writeUInt16LE(0, 10);
  h.writeUInt16LE(0x21, 12);
  h.writeUInt32LE(body.crc, 14);
  h.writeUInt32LE(body.compressedSize, 18);
  h.writeUInt32LE(body.uncompressedSize, 22);
  h.writeUInt16LE(name.length, 26);
  h.writeUInt16LE(0, 28);
  return Buffer.concat([h, name]);
}

/** Info-ZIP Unicode Path extra field: version 1, the CRC-32 of the header's own name, the UTF-8 name. */
function unicodePathField(name: Buffer, unicodePath: string): Buffer {
  const path = Buffer.from(unicodePath, 'utf8');
  const field = Buffer.alloc(9);
  field.writeUInt16LE(0x7075, 0);
  field.writeUInt16LE(5 + path.length, 2);
  field.writeUInt8(1, 4);
  field.writeUInt32LE(crc32(name), 5);
  return Buffer.concat([field, path]);
}

function centralHeader(name: Buffer, body: Body, mode: number, extra: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(46);
  h.writeUInt32LE(0x02014b50, 0);
  h.writeUInt16LE((3 << 8) | 20, 4); // made by Unix: the external attributes hold a mode
  h.writeUInt16LE(20, 6);
  h.writeUInt16LE(0x800, 8);
  h.writeUInt16LE(body.method, 10);
  h.writeUInt16LE(0, 12);
  h.writeUInt16LE(0x21, 14);
  h.writeUInt32LE(body.crc, 16);
  h.writeUInt32LE(body.compressedSize, 20);
  h.writeUInt32LE(body.uncompressedSize, 24);
  h.writeUInt16LE(name.length, 28);
  h.writeUInt16LE(extra.length, 30);
  h.writeUInt32LE(((mode & 0xffff) << 16) >>> 0, 38);
  h.writeUInt32LE(body.offset, 42);
  return Buffer.concat([h, name, extra]);
}

function endOfCentralDirectory(count: number, size: number, offset: number): Buffer {
  const e = Buffer.alloc(22);
  e.writeUInt32LE(0x06054b50, 0);
  e.writeUInt16LE(count, 8);
  e.writeUInt16LE(count, 10);
  e.writeUInt32LE(size, 12);
  e.writeUInt32LE(offset, 16);
  return e;
}

/** A zip of the given entries, in order. */
export function buildZip(entries: ZipEntrySpec[]): Buffer {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const data = entry.data ?? Buffer.alloc(0);
    const deflated = entry.deflated ?? (entry.deflate ? deflatedOnce(data) : undefined);
    const compressed = deflated ? deflated.compressed : data;
    const body: Body = {
      offset,
      crc: deflated ? deflated.crc : crc32(data),
      compressedSize: compressed.length,
      uncompressedSize: entry.declaredSize ?? (deflated ? deflated.size : data.length),
      method: deflated ? 8 : 0,
    };
    const local = localHeader(entry.localName === undefined ? name : Buffer.from(entry.localName, 'utf8'), body);
    parts.push(local, compressed);
    const extra = entry.unicodePath === undefined ? undefined : unicodePathField(name, entry.unicodePath);
    central.push(centralHeader(name, body, entry.mode ?? REGULAR_FILE, extra));
    offset += local.length + compressed.length;
  }
  const cd = Buffer.concat(central);
  return Buffer.concat([...parts, cd, endOfCentralDirectory(entries.length, cd.length, offset)]);
}

/**
 * A bomb of overlapping entries (after David Fifield's "better zip bomb"): `copies` entries in the central
 * directory all point at ONE deflated body of `kernelBytes` zeros. Declares copies x kernelBytes in a file of a
 * few KiB per MiB of kernel.
 */
export function overlappingBomb(copies: number, kernelBytes: number): Buffer {
  const data = Buffer.alloc(kernelBytes);
  const compressed = deflateRawSync(data, { level: 9 });
  const name = Buffer.from('kernel.txt');
  const body: Body = { offset: 0, crc: crc32(data), compressedSize: compressed.length, uncompressedSize: kernelBytes, method: 8 };
  const local = localHeader(name, body);
  const central = Array.from({ length: copies }, (_, i) =>
    centralHeader(Buffer.from(`copy-${String(i).padStart(4, '0')}.txt`), body, REGULAR_FILE),
  );
  const cd = Buffer.concat(central);
  const cdOffset = local.length + compressed.length;
  return Buffer.concat([local, compressed, cd, endOfCentralDirectory(copies, cd.length, cdOffset)]);
}

/**
 * Overlapping entries without compression: `copies` central records all point at ONE stored body. Each entry
 * expands 1:1, yet the archive as a whole declares copies x its size.
 */
export function overlappingStored(copies: number, data: Buffer): Buffer {
  const name = Buffer.from('body.bin');
  const body: Body = { offset: 0, crc: crc32(data), compressedSize: data.length, uncompressedSize: data.length, method: 0 };
  const local = localHeader(name, body);
  const central = Array.from({ length: copies }, (_, i) => centralHeader(Buffer.from(`copy-${String(i).padStart(4, '0')}.bin`), body, REGULAR_FILE));
  const cd = Buffer.concat(central);
  return Buffer.concat([local, data, cd, endOfCentralDirectory(copies, cd.length, local.length + data.length)]);
}
