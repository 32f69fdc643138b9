// Nothing left behind (issue 35, part 3): the API's temp folders swept at start, the worker's periodic sweep of
// stored objects and local .partial files that no archive row references (local storage and S3 through s3rver),
// the retry of a replaced archive's failed delete, and a real API process SIGKILLed mid-upload and mid-extraction.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { createHarness, type Harness } from '../../api/test/support/harness';
import { buildApi, killIfRunning, spawnApi, type ChildApi } from '../../api/test/support/child-api';
import { bearer, createOrg, insertAssessment, insertProject, type TestOrg } from '../../api/test/support/fixtures';
import { startS3, type TestS3 } from '../../api/test/support/s3';
import { buildZip } from '../../api/test/support/zips';
import { sweepTempFiles } from '../../api/src/modules/source/temp-files';
import type { WorkerDeps } from '../src/deps';
import { runMaintenanceJob } from '../src/maintenance';


async function waitFor<T>(read: () => T | Promise<T>, done: (value: T) => boolean, timeoutMs: number, what: () => string, intervalMs = 20): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting: ${what()}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
const GRACE_MS = 60 * 60 * 1000;

function workerDepsOf(h: Harness): WorkerDeps {
  return {
    config: h.config,
    logger: h.deps.logger,
    prisma: h.deps.prisma,
    redis: () => {
      throw new Error('the source sweep uses no Redis');
    },
    clock: h.clock,
    storage: h.deps.storage,
  };
}

/** The maintenance job as the worker's scheduler runs it. */
const runSweep = (h: Harness) => runMaintenanceJob(workerDepsOf(h), undefined as never, 'source-sweep');

const upload = (h: Harness, token: string, assessmentId: string, body: Buffer) =>
  request(h.app).post(`/api/v1/assessments/${assessmentId}/source`).set(bearer(token)).set('Content-Type', 'application/zip').send(body);

async function draft(h: Harness, org: TestOrg) {
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessment(h, org.id, project.id);
  return { project, assessment };
}

const smallZip = (text: string) => buildZip([{ name: 'src/a.txt', data: Buffer.from(text) }, { name: 'b.txt', data: Buffer.from(`${text}!`) }]);

/** The periodic sweep, for one storage: orphans go after the grace period, referenced objects stay. */
function orphanSweepTests(storageName: string, env: () => Record<string, string>) {
  describe(`orphan sweep on ${storageName} storage`, () => {
    let h: Harness;
    let org: TestOrg;
    beforeAll(async () => {
      h = await createHarness({ ...env(), SOURCE_ORPHAN_GRACE_MS: String(GRACE_MS) });
      org = await createOrg(h);
    });
    afterAll(() => h.close());
    afterEach(() => h.clock.reset());

    it('removes objects under no archive row (and .partial files) after the grace period, and keeps referenced ones', async () => {
      const { project, assessment } = await draft(h, org);
      const kept = await upload(h, org.admin.token, assessment.id, smallZip('kept'));
      expect(kept.status).toBe(200);
      const referenced = await h.deps.storage.list(`orgs/${org.id}/`);
      expect(referenced).toHaveLength(3);
      // Objects written by an upload that died before its row: same layout, an archive id no row has.
      const orphanPrefix = `orgs/${org.id}/projects/${project.id}/assessments/${assessment.id}/src_orphan0000000000000000000/`;
      for (const key of [`${orphanPrefix}archive.zip`, `${orphanPrefix}files/${'a'.repeat(64)}`]) {
        await h.deps.storage.put(key, (await import('node:stream')).Readable.from([Buffer.from('orphan')]), 6);
      }
      let partial: string | undefined;
      if (h.config.storage.driver === 'local') {
        // A put killed before its rename leaves its temporary file beside the target.
        partial = path.join(h.config.storage.dir, ...`${orphanPrefix}files/${'b'.repeat(64)}.0a1b2c3d4e5f.partial`.split('/'));
        writeFileSync(partial, 'half an object');
      }
      const before = await h.deps.storage.scan(`orgs/${org.id}/`);
      expect(before.length).toBe(referenced.length + 2 + (partial ? 1 : 0));

      // Young: an upload may still be writing them.
      expect(await runSweep(h)).toMatchObject({ deleted: 0 });
      expect((await h.deps.storage.scan(`orgs/${org.id}/`)).length).toBe(before.length);

      h.clock.advance(GRACE_MS + 60_000);
      expect(await runSweep(h)).toMatchObject({ deleted: 2 + (partial ? 1 : 0) });
      expect((await h.deps.storage.scan(`orgs/${org.id}/`)).map((e) => e.key)).toEqual(referenced);
      // The archive still answers from what was kept.
      const file = await request(h.app).get(`/api/v1/assessments/${assessment.id}/source/file?path=src/a.txt`).set(bearer(org.admin.token));
      expect(file.text).toBe('kept');
    });

    it('keeps every object of an upload still writing past the grace period (its row comes after its last object)', async () => {
      if (h.config.storage.driver !== 'local') return; // an S3 object's LastModified cannot be set: local only
      const { project, assessment } = await draft(h, org);
      const prefix = `orgs/${org.id}/projects/${project.id}/assessments/${assessment.id}/src_writing00000000000000000/`;
      const put = async (key: string) => h.deps.storage.put(key, (await import('node:stream')).Readable.from([Buffer.from('x')]), 1);
      await put(`${prefix}files/${'c'.repeat(64)}`);
      h.clock.advance(GRACE_MS + 60_000);
      // The extraction's latest object, written just now by the service's clock.
      const latest = `${prefix}files/${'d'.repeat(64)}`;
      await put(latest);
      const now = h.clock.now().getTime() / 1000;
      utimesSync(path.join(h.config.storage.dir, ...latest.split('/')), now, now);

      await runSweep(h);
      expect((await h.deps.storage.scan(prefix)).map((e) => e.key)).toEqual([`${prefix}files/${'c'.repeat(64)}`, latest]);
      await h.deps.storage.deletePrefix(prefix);
    });

    it("retries a replaced archive's failed delete instead of only logging it", async () => {
      const { assessment } = await draft(h, org);
      const first = await upload(h, org.admin.token, assessment.id, smallZip('first'));
      const storage = h.deps.storage;
      const deletePrefix = storage.deletePrefix.bind(storage);
      storage.deletePrefix = async () => {
        throw new Error('storage unavailable');
      };
      let second;
      try {
        second = await upload(h, org.admin.token, assessment.id, smallZip('second'));
      } finally {
        storage.deletePrefix = deletePrefix;
      }
      expect(second.status).toBe(200);
      const leftover = (await storage.list(`orgs/${org.id}/`)).filter((k) => k.includes(first.body.id));
      expect(leftover).toHaveLength(3);

      h.clock.advance(GRACE_MS + 60_000);
      await runSweep(h);
      expect((await storage.list(`orgs/${org.id}/`)).filter((k) => k.includes(first.body.id))).toEqual([]);
      expect((await storage.list(`orgs/${org.id}/`)).filter((k) => k.includes(second.body.id))).toHaveLength(3);
    });

    it('a refusal found midway whose clean-up fails still answers 422, and the sweep removes what was stored', async () => {
      const { project, assessment } = await draft(h, org);
      const storage = h.deps.storage;
      const deletePrefix = storage.deletePrefix.bind(storage);
      storage.deletePrefix = async () => {
        throw new Error('storage unavailable');
      };
      let res;
      try {
        res = await upload(h, org.admin.token, assessment.id, buildZip([
          { name: 'a.txt', data: Buffer.from('stored before the lie is found') },
          { name: 'liar.bin', data: Buffer.alloc(32 * 1024, 1), deflate: true, declaredSize: 16 },
        ]));
      } finally {
        storage.deletePrefix = deletePrefix;
      }
      expect(res.status).toBe(422);
      const prefix = `orgs/${org.id}/projects/${project.id}/`;
      expect(await storage.list(prefix)).toHaveLength(1);
      h.clock.advance(GRACE_MS + 60_000);
      await runSweep(h);
      expect(await storage.list(prefix)).toEqual([]);
    });
  });
}

let s3: TestS3 | undefined;
afterAll(() => s3?.close());
orphanSweepTests('local', () => ({}));
describe('with s3rver', () => {
  beforeAll(async () => {
    s3 = await startS3();
  });
  orphanSweepTests('S3', () => s3!.env);
});

describe('temp folders', () => {
  it('the start sweep takes only our folders, and only those untouched for the grace period', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-sweep-tmp-'));
    try {
      const make = (name: string, ageMs: number) => {
        mkdirSync(path.join(dir, name));
        writeFileSync(path.join(dir, name, 'archive.zip'), 'x');
        const at = (Date.now() - ageMs) / 1000;
        utimesSync(path.join(dir, name, 'archive.zip'), at, at);
        utimesSync(path.join(dir, name), at, at);
      };
      make('svc-upload-old', 2 * GRACE_MS);
      make('svc-extract-old', 2 * GRACE_MS);
      make('svc-upload-live', 1000);
      make('someone-elses', 2 * GRACE_MS);
      expect((await sweepTempFiles(dir, GRACE_MS)).sort()).toEqual(['svc-extract-old', 'svc-upload-old']);
      expect(readdirSync(dir).sort()).toEqual(['someone-elses', 'svc-upload-live']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// ---------------------------------------------------------------------------------------------------------------
// A real API process, killed.

/** Every API process a test started; one still running when the tests end (a failure midway) is killed then. */
const started: ChildApi[] = [];
afterAll(() => Promise.all(started.map(killIfRunning)));

async function startApi(h: Harness, tempDir: string, env: Record<string, string> = {}): Promise<ChildApi> {
  const api = await spawnApi(h, {
    SOURCE_TEMP_DIR: tempDir,
    // Every leftover is an earlier (killed) process's: nothing younger runs beside this one here.
    SOURCE_TEMP_GRACE_MS: '0',
    ...env,
  });
  started.push(api);
  return api;
}

/** Starts a POST of `zip` to the child and hands back the request, to abandon (or not) when the child dies. */
function startUpload(api: ChildApi, token: string, assessmentId: string, zip: Buffer, bytesNow: number, onStatus?: (status: number) => void): http.ClientRequest {
  const req = http.request(`${api.url}/api/v1/assessments/${assessmentId}/source`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/zip', 'Content-Length': String(zip.length) },
  });
  req.on('error', () => {});
  req.on('response', (res) => {
    res.resume();
    onStatus?.(res.statusCode ?? 0);
  });
  req.write(zip.subarray(0, bytesNow));
  if (bytesNow >= zip.length) req.end();
  return req;
}

const ours = (dir: string) => readdirSync(dir).filter((n) => n.startsWith('svc-upload-') || n.startsWith('svc-extract-'));

describe('an API process killed mid-upload leaves nothing behind after the sweeps', () => {
  let h: Harness;
  let org: TestOrg;
  let tempDir: string;
  beforeAll(async () => {
    buildApi();
    tempDir = mkdtempSync(path.join(tmpdir(), 'svc-crash-tmp-'));
    h = await createHarness({ SOURCE_TEMP_DIR: tempDir, SOURCE_ORPHAN_GRACE_MS: String(GRACE_MS) });
    org = await createOrg(h);
  });
  afterAll(async () => {
    await h.close();
    rmSync(tempDir, { recursive: true, force: true });
  });

  it('SIGKILL while the body streams, then while files are being stored: the start sweep and the periodic sweep clear all', async () => {
    const { project, assessment } = await draft(h, org);
    // 1. Killed while the body is still arriving: the spool is left in the temp folder.
    let api = await startApi(h, tempDir);
    const big = buildZip([{ name: 'big.bin', data: randomBytes(8 * 1024 * 1024) }]);
    const streaming = startUpload(api, org.admin.token, assessment.id, big, 2 * 1024 * 1024);
    await waitFor(() => ours(tempDir), (names) => names.length === 1, 10_000, () => api.output());
    await killIfRunning(api);
    streaming.destroy();
    expect(ours(tempDir)).toEqual([expect.stringMatching(/^svc-upload-/)]);

    // The next start sweeps it.
    api = await startApi(h, tempDir);
    expect(ours(tempDir)).toEqual([]);

    // 2. Killed while extracting: files stored, no row yet, the spool and scratch folders on disk.
    const many = buildZip(Array.from({ length: 4000 }, (_, i) => ({ name: `src/${i}.bin`, data: randomBytes(2048) })));
    const storing = startUpload(api, org.admin.token, assessment.id, many, many.length);
    const prefix = `orgs/${org.id}/projects/${project.id}/`;
    await waitFor(() => h.deps.storage.scan(prefix), (entries) => entries.length >= 5, 20_000, () => api.output(), 2);
    await killIfRunning(api);
    storing.destroy();
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
    expect((await h.deps.storage.scan(prefix)).length).toBeGreaterThanOrEqual(5);
    expect(ours(tempDir).length).toBeGreaterThanOrEqual(1);

    api = await startApi(h, tempDir);
    expect(ours(tempDir)).toEqual([]);
    await killIfRunning(api);

    // The periodic sweep: nothing before the grace period (an upload could still be writing), everything after.
    await runSweep(h);
    expect((await h.deps.storage.scan(prefix)).length).toBeGreaterThanOrEqual(5);
    h.clock.advance(GRACE_MS + 60_000);
    await runSweep(h);
    expect(await h.deps.storage.scan(prefix)).toEqual([]);
    // Local storage: the emptied folders went with their files.
    const storageDir = h.config.storage.driver === 'local' ? h.config.storage.dir : '';
    expect(existsSync(path.join(storageDir, 'orgs', org.id))).toBe(false);
  }, 120_000);

  it('restarted at once: a leftover younger than the grace survives the start and goes with a sweep while the API runs; an upload of its own paused past the grace is kept', async () => {
    const { assessment } = await draft(h, org);
    const quickSweeps = { SOURCE_TEMP_GRACE_MS: '3000', SOURCE_TEMP_SWEEP_INTERVAL_MS: '200' };
    let api = await startApi(h, tempDir, quickSweeps);
    const big = buildZip([{ name: 'big.bin', data: randomBytes(4 * 1024 * 1024) }]);
    const killed = startUpload(api, org.admin.token, assessment.id, big, 1024 * 1024);
    const [leftover] = await waitFor(() => ours(tempDir), (names) => names.length === 1, 10_000, () => api.output());
    await killIfRunning(api);
    killed.destroy();
    // Touched "just now" whatever the restart takes on a loaded machine: younger than the grace at the next start.
    const future = new Date(Date.now() + 60_000);
    utimesSync(path.join(tempDir, leftover), future, future);

    api = await startApi(h, tempDir, quickSweeps);
    // Younger than the grace: another process's upload, for all the start knows.
    expect(ours(tempDir)).toEqual([leftover]);
    // Now untouched for longer than the grace.
    const past = new Date(Date.now() - 10_000);
    utimesSync(path.join(tempDir, leftover), past, past);

    // An upload to the restarted API that stops sending for longer than the grace, then goes on.
    const zip = buildZip([{ name: 'src/a.txt', data: randomBytes(256 * 1024) }]);
    let status = 0;
    const paused = startUpload(api, org.admin.token, assessment.id, zip, 128 * 1024, (s) => (status = s));
    const [live] = await waitFor(() => ours(tempDir).filter((n) => n !== leftover), (names) => names.length === 1, 10_000, () => api.output());
    // The leftover goes without another restart, once untouched for the grace...
    await waitFor(() => ours(tempDir), (names) => !names.includes(leftover), 15_000, () => `leftover still there: ${ours(tempDir)}\n${api.output()}`);
    // ...but this process's own folder, untouched for longer than the grace, is left alone.
    await new Promise((r) => setTimeout(r, 3500));
    expect(ours(tempDir)).toEqual([live]);
    // Touched while in use, for the sweeps of other API processes sharing the folder.
    expect(Date.now() - statSync(path.join(tempDir, live)).mtimeMs).toBeLessThan(3000);
    paused.end(zip.subarray(128 * 1024));
    await waitFor(() => status, (s) => s !== 0, 15_000, () => api.output());
    expect(status).toBe(200);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(1);
    await waitFor(() => ours(tempDir), (names) => names.length === 0, 5_000, () => `still there: ${ours(tempDir)}`);
    await killIfRunning(api);
  }, 120_000);
});
