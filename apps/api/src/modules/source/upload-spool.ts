// Receives an upload body into a temporary file while hashing it, and stops at the size cap: the client gets its
// 413 while it is still sending, not after the whole body has been read.
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import type { Request, Response } from 'express';
import { HttpError } from '../../http/errors';
import { UPLOAD_PREFIX, makeTempFolder } from './temp-files';

export interface SpooledUpload {
  file: string;
  size: number;
  sha256: string;
  /** Removes the temporary file (and its folder). */
  discard(): Promise<void>;
}

export const uploadTooLarge = (maxBytes: number) =>
  new HttpError(413, `The archive is larger than ${maxBytes} bytes (SOURCE_UPLOAD_MAX_BYTES).`);

/** Counts and hashes the bytes going through; fails as soon as more than maxBytes went by. */
class CappedHasher extends Transform {
  readonly hash = createHash('sha256');
  size = 0;
  constructor(private readonly maxBytes: number) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) return done(uploadTooLarge(this.maxBytes));
    this.hash.update(chunk);
    done(null, chunk);
  }
}

export async function spoolUpload(req: Request, maxBytes: number, temp: { tempDir: string; tempGraceMs: number }): Promise<SpooledUpload> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw uploadTooLarge(maxBytes);
  const folder = await makeTempFolder(temp, UPLOAD_PREFIX);
  const discard = folder.remove;
  const file = path.join(folder.dir, 'archive.zip');
  const counter = new CappedHasher(maxBytes);
  try {
    await receive(req, counter, file);
  } catch (err) {
    await discard();
    throw err;
  }
  return { file, size: counter.size, sha256: counter.hash.digest('hex'), discard };
}

/** Not `pipeline`: on a refusal it would destroy the request, and with it the socket the 413 goes out on. */
function receive(req: Request, counter: CappedHasher, file: string): Promise<void> {
  // A client gone while the request waited (access checks) closed it before the listeners below: 'close' is past.
  if (req.destroyed && !req.readableEnded) return Promise.reject(new HttpError(400, 'The upload was interrupted before its end.'));
  return new Promise((resolve, reject) => {
    const out = createWriteStream(file);
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      req.unpipe(counter);
      counter.destroy();
      out.destroy();
      reject(err instanceof HttpError ? err : new HttpError(400, 'The upload was interrupted before its end.'));
    };
    req.once('error', fail);
    req.once('close', () => {
      if (!req.readableEnded) fail(new Error('aborted'));
    });
    counter.once('error', fail);
    out.once('error', fail);
    out.once('finish', () => {
      settled = true;
      resolve();
    });
    req.pipe(counter).pipe(out);
  });
}

/**
 * After an early answer (413, or any refusal before the body was read), Node discards the rest of the body so the
 * client can read the answer while it is still sending (closing at once would reset the connection under it and
 * lose the answer). Discarding lasts at most graceMs: a body still arriving then has its connection closed.
 */
export function closeAfterAnswer(req: Request, res: Response, graceMs = 2000): void {
  if (req.complete) return;
  res.once('finish', () => {
    req.resume();
    setTimeout(() => {
      if (!req.complete) req.socket.destroy();
    }, graceMs).unref();
  });
}
