// The two storage implementations behave alike: a local directory (temp folder) and S3 (s3rver on loopback).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { LocalStorage, ObjectNotFoundError, S3Storage, type ObjectStorage } from '@svc/storage';
import { startS3, type TestS3 } from './support/s3';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const put = (storage: ObjectStorage, key: string, text: string) =>
  storage.put(key, Readable.from([Buffer.from(text)]), Buffer.byteLength(text));

let s3: TestS3;
const opened: ObjectStorage[] = [];
let localDir: string;
beforeAll(async () => {
  s3 = await startS3();
  localDir = mkdtempSync(path.join(tmpdir(), 'svc-storage-test-'));
});
afterAll(async () => {
  opened.forEach((storage) => storage.close());
  await s3.close();
  rmSync(localDir, { recursive: true, force: true });
});

const implementations: Array<[string, () => ObjectStorage]> = [
  ['local directory', () => new LocalStorage(localDir)],
  [
    'S3 (s3rver)',
    () =>
      new S3Storage({
        bucket: s3.bucket,
        endpoint: s3.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
        forcePathStyle: true,
      }),
  ],
];


describe.each(implementations)('%s storage', (_name, create) => {
  const make = () => {
    const storage = create();
    opened.push(storage);
    return storage;
  };
  it('stores, reads back, lists by prefix and deletes a prefix with everything under it', async () => {
    const storage = make();
    await put(storage, 'orgs/o1/projects/p1/a.txt', 'alpha');
    await put(storage, 'orgs/o1/projects/p1/deep/b.txt', 'beta');
    await put(storage, 'orgs/o1/projects/p2/c.txt', 'gamma');
    expect((await readAll(await storage.get('orgs/o1/projects/p1/deep/b.txt'))).toString()).toBe('beta');
    expect(await storage.list('orgs/o1/projects/p1/')).toEqual(['orgs/o1/projects/p1/a.txt', 'orgs/o1/projects/p1/deep/b.txt']);

    await storage.deletePrefix('orgs/o1/projects/p1/');
    expect(await storage.list('orgs/o1/projects/p1/')).toEqual([]);
    await expect(storage.get('orgs/o1/projects/p1/a.txt')).rejects.toBeInstanceOf(ObjectNotFoundError);
    // Its neighbour stays.
    expect(await storage.list('orgs/o1/')).toEqual(['orgs/o1/projects/p2/c.txt']);
    await storage.deletePrefix('orgs/o1/');
    await storage.deletePrefix('orgs/nothing-here/');
  });

  it('replaces an object put twice under one key', async () => {
    const storage = make();
    await put(storage, 'orgs/o2/k', 'first');
    await put(storage, 'orgs/o2/k', 'second');
    expect((await readAll(await storage.get('orgs/o2/k'))).toString()).toBe('second');
    await storage.deletePrefix('orgs/o2/');
  });

  it('refuses keys that could leave their folder', async () => {
    const storage = make();
    for (const key of ['../x', 'orgs/../x', '/abs', 'orgs//x', 'orgs/a\\b']) {
      await expect(put(storage, key, 'x')).rejects.toThrow(/Unsafe storage key/);
    }
    await expect(storage.deletePrefix('orgs/o3')).rejects.toThrow(/must end with/);
  });

  it('keeps nothing of a put whose body fails midway', async () => {
    const storage = make();
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(1024, 1));
        this.destroy(new Error('client went away'));
      },
    });
    await expect(storage.put('orgs/o4/partial', failing, 4096)).rejects.toThrow();
    expect(await storage.list('orgs/o4/')).toEqual([]);
  });
});

it('leaves no temporary files behind in the local directory', () => {
  const leftovers = readdirSync(localDir, { recursive: true }).filter((f) => String(f).endsWith('.partial'));
  expect(leftovers).toEqual([]);
});

it("sends the S3 client's own warnings to the service's logger, never as raw console lines among the JSON logs", async () => {
  const warnings: string[] = [];
  const storage = new S3Storage(
    { bucket: s3.bucket, endpoint: s3.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }, forcePathStyle: true },
    { warn: (message) => warnings.push(message) },
  );
  opened.push(storage);
  const consoleWarn = jest.spyOn(console, 'warn');
  try {
    const failing = new Readable({
      read() {
        this.push(Buffer.alloc(1024, 1));
        this.destroy(new Error('client went away'));
      },
    });
    await expect(storage.put('orgs/o5/partial', failing, 4096)).rejects.toThrow();
    expect(consoleWarn).not.toHaveBeenCalled();
    expect(warnings).toEqual([expect.stringMatching(/^Object storage client: .*non-retryable streaming request/)]);
  } finally {
    consoleWarn.mockRestore();
  }
});
