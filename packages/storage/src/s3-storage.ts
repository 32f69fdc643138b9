// Objects in an S3-compatible bucket (AWS S3, MinIO, Ceph...). PutObject is atomic on the server side: a failed
// upload leaves no object.
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  NoSuchKey,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';
import { ObjectNotFoundError, assertSafeKey, type ObjectStorage, type StoredEntry } from './storage';

export interface S3StorageOptions {
  bucket: string;
  endpoint?: string;
  region: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
  forcePathStyle: boolean;
}

/** Where the S3 client's own warnings go (a structured logger); without one they are dropped, never printed raw. */
export interface StorageLogger {
  warn(message: string): void;
}

const ignore = (): void => undefined;

/**
 * The SDK logs through console unless given a logger, and raw lines would break the process's JSON logs. Its errors
 * are the failed command's, which the caller gets thrown (the record also holds the command's input): not logged.
 */
function sdkLogger(logger?: StorageLogger) {
  const warn = (...content: unknown[]) => {
    const text = content.filter((part): part is string => typeof part === 'string').join(' ');
    if (text) logger?.warn(`Object storage client: ${text}`);
  };
  return { trace: ignore, debug: ignore, info: ignore, warn, error: ignore };
}

/** DeleteObjects takes at most this many keys a call. */
const DELETE_BATCH = 1000;

export class S3Storage implements ObjectStorage {
  readonly driver = 's3' as const;
  private readonly client: S3Client;
  private readonly bucket: string;

  constructor(options: S3StorageOptions, logger?: StorageLogger) {
    this.bucket = options.bucket;
    this.client = new S3Client({
      region: options.region,
      endpoint: options.endpoint,
      credentials: options.credentials,
      forcePathStyle: options.forcePathStyle,
      // Checksums only where the protocol requires them: streamed bodies then go out as plain bodies of a known
      // length, which every S3-compatible server understands.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      logger: sdkLogger(logger),
    });
  }

  async put(key: string, body: Readable, size: number): Promise<void> {
    assertSafeKey(key);
    // A body failing midway must abort the request: otherwise the server waits for the rest of ContentLength.
    const abort = new AbortController();
    const onError = (err: Error) => abort.abort(err);
    body.once('error', onError);
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentLength: size }), {
        abortSignal: abort.signal,
      });
    } finally {
      body.off('error', onError);
    }
  }

  async get(key: string): Promise<Readable> {
    assertSafeKey(key);
    try {
      const out = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return out.Body as Readable;
    } catch (err) {
      if (err instanceof NoSuchKey || (err as { name?: string }).name === 'NoSuchKey') throw new ObjectNotFoundError(key);
      throw err;
    }
  }

  async list(prefix: string): Promise<string[]> {
    return (await this.scan(prefix)).map((entry) => entry.key);
  }

  async scan(prefix: string): Promise<StoredEntry[]> {
    assertSafeKey(prefix, { prefix: true });
    const entries: StoredEntry[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const object of page.Contents ?? []) {
        if (object.Key) entries.push({ key: object.Key, modifiedAt: object.LastModified ?? new Date(0), partial: false });
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async deletePrefix(prefix: string): Promise<void> {
    await this.deleteKeys(await this.list(prefix));
  }

  async deleteKeys(keys: string[]): Promise<void> {
    keys.forEach((key) => assertSafeKey(key));
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      const batch = keys.slice(i, i + DELETE_BATCH);
      const out = await this.client.send(
        new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
      );
      if (out.Errors && out.Errors.length > 0) {
        throw new Error(`Could not delete ${out.Errors.length} stored objects (${out.Errors[0]!.Key}): ${out.Errors[0]!.Code}`);
      }
    }
  }

  close(): void {
    this.client.destroy();
  }
}
