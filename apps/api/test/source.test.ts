// Source of assessments (issue 23): upload, safe extraction, artifacts, archive download, a project's source,
// stored objects following deletions. Local storage here (a temp folder per harness); S3 in source-s3.test.ts.
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import yazl from 'yazl';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { SYMLINK, buildZip, overlappingBomb } from './support/zips';
import { binaryBody } from './support/binary';

let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());

const api = () => request(h.app);
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A real archive from a well-kept archiver (yazl): text, a binary, nested folders, a folder entry. */
async function sampleZip(extra: Record<string, Buffer> = {}): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  const files: Record<string, Buffer> = {
    'README.md': Buffer.from('# Shop\n'),
    'src/index.ts': Buffer.from('export const answer = 42;\n'),
    'src/lib/util.ts': Buffer.from('export function id<T>(x: T): T { return x; }\n'),
    'assets/logo.png': Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]), randomBytes(64)]),
    ...extra,
  };
  zip.addEmptyDirectory('docs/');
  for (const [name, data] of Object.entries(files)) zip.addBuffer(data, name);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const upload = (token: string, assessmentId: string, body: Buffer, type = 'application/zip') =>
  api().post(`/api/v1/assessments/${assessmentId}/source`).set(bearer(token)).set('Content-Type', type).send(body);


async function draftAssessment(o: TestOrg = org) {
  const project = await insertProject(h, o.id);
  const assessment = await insertAssessment(h, o.id, project.id);
  await insertGrant(h, o.id, { projectId: project.id }, { userId: o.manager.id }, 'write');
  return { project, assessment };
}

const storedUnder = (organizationId: string, projectId: string, assessmentId?: string) =>
  h.deps.storage.list(`orgs/${organizationId}/projects/${projectId}/${assessmentId ? `assessments/${assessmentId}/` : ''}`);

describe('POST /assessments/{id}/source', () => {
  it('stores the archive and its files, answers the SHA-256, and a manager with write access reads it back', async () => {
    const { project, assessment } = await draftAssessment();
    const zip = await sampleZip();
    const res = await upload(org.admin.token, assessment.id, zip);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^src_[0-9a-z]{26}$/),
      assessment_id: assessment.id,
      project_id: project.id,
      sha256: sha256(zip),
      size_bytes: zip.length,
      file_count: 4,
      uncompressed_bytes: expect.any(Number),
      duplicate: false,
      created_at: expect.any(String),
    });
    // The archive and one object per distinct file.
    const keys = await storedUnder(org.id, project.id, assessment.id);
    expect(keys.filter((k) => k.endsWith('/archive.zip'))).toHaveLength(1);
    expect(keys.filter((k) => k.includes('/files/'))).toHaveLength(4);

    const meta = await api().get(`/api/v1/assessments/${assessment.id}/source`).set(bearer(org.manager.token));
    expect(meta.status).toBe(200);
    expect(meta.body.sha256).toBe(sha256(zip));

    const audit = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id, action: 'source.uploaded', targetId: assessment.id } });
    expect(audit).toEqual([
      expect.objectContaining({
        actorType: 'user',
        actorId: org.admin.id,
        metadata: { archive_id: res.body.id, sha256: sha256(zip), size_bytes: zip.length, file_count: 4, replaced: null },
      }),
    ]);
  });

  it('stores the same archive once per assessment: a second upload answers the stored one', async () => {
    const { project, assessment } = await draftAssessment();
    const zip = await sampleZip();
    const first = await upload(org.admin.token, assessment.id, zip);
    const keysAfterFirst = await storedUnder(org.id, project.id, assessment.id);
    const second = await upload(org.admin.token, assessment.id, zip);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ ...first.body, duplicate: true });
    expect(await storedUnder(org.id, project.id, assessment.id)).toEqual(keysAfterFirst);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(1);
  });

  it('replaces a different earlier archive and removes its stored objects', async () => {
    const { project, assessment } = await draftAssessment();
    const first = await upload(org.admin.token, assessment.id, await sampleZip());
    const second = await upload(org.admin.token, assessment.id, await sampleZip({ 'src/new.ts': Buffer.from('new\n') }));
    expect(second.status).toBe(200);
    expect(second.body.id).not.toBe(first.body.id);
    expect(second.body.file_count).toBe(5);
    const keys = await storedUnder(org.id, project.id, assessment.id);
    expect(keys.some((k) => k.includes(first.body.id))).toBe(false);
    expect(keys.filter((k) => k.endsWith('/archive.zip'))).toEqual([expect.stringContaining(second.body.id)]);
  });

  it('accepts source while launched (queued) and refuses it once the engine runs or the assessment ended (409)', async () => {
    const { assessment } = await draftAssessment();
    await h.deps.prisma.assessment.update({ where: { id: assessment.id }, data: { status: 'queued' } });
    expect((await upload(org.admin.token, assessment.id, await sampleZip())).status).toBe(200);
    for (const status of ['running', 'completed', 'failed', 'cancelled']) {
      await h.deps.prisma.assessment.update({ where: { id: assessment.id }, data: { status } });
      const res = await upload(org.admin.token, assessment.id, await sampleZip({ 'x.txt': Buffer.from(status) }));
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain(status);
    }
  });

  it('refuses a member and a manager (both with write access) with 403 naming source:upload_zip, another organization with 404, a non-zip type with 415', async () => {
    const { project, assessment } = await draftAssessment();
    await insertGrant(h, org.id, { projectId: project.id }, { userId: org.member.id }, 'write');
    const zip = await sampleZip();
    for (const user of [org.member, org.manager]) {
      const refused = await upload(user.token, assessment.id, zip);
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toBe('Missing required scope: source:upload_zip.');
    }
    expect((await upload(other.admin.token, assessment.id, zip)).status).toBe(404);
    const wrongType = await upload(org.admin.token, assessment.id, zip, 'application/octet-stream');
    expect(wrongType.status).toBe(415);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
  });
});

describe('unsafe archives are refused with 422 and leave nothing stored', () => {
  const hostile: Array<[string, Buffer, RegExp]> = [
    ['a ../ path traversal', buildZip([{ name: 'ok.txt', data: Buffer.from('ok') }, { name: '../evil.sh', data: Buffer.from('x') }]), /"\.\.\/evil\.sh".*escapes/],
    ['a traversal deeper in the path', buildZip([{ name: 'src/../../evil.sh', data: Buffer.from('x') }]), /"src\/\.\.\/\.\.\/evil\.sh"/],
    ['an absolute path', buildZip([{ name: '/etc/cron.d/evil', data: Buffer.from('x') }]), /"\/etc\/cron\.d\/evil" is an absolute path/],
    ['a drive letter', buildZip([{ name: 'C:/Windows/evil.dll', data: Buffer.from('x') }]), /"C:\/Windows\/evil\.dll" starts with a drive letter/],
    ['a backslash path', buildZip([{ name: '..\\evil.bat', data: Buffer.from('x') }]), /"\.\.\\evil\.bat" uses a backslash/],
    ['a symbolic link', buildZip([{ name: 'src/link', data: Buffer.from('/etc/passwd'), mode: SYMLINK }]), /"src\/link" is a symbolic link/],
    [
      '10,000 entries',
      buildZip(Array.from({ length: 10_000 }, (_, i) => ({ name: `f/${i}.txt`, data: Buffer.from('x') }))),
      /10000 entries; at most 5000/,
    ],
    ['not a zip at all', Buffer.from('this is not a zip archive'), /not a readable zip/],
  ];

  it.each(hostile)('%s', async (_name, zip, detail) => {
    const { project, assessment } = await draftAssessment();
    const res = await upload(org.admin.token, assessment.id, zip);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(detail);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
    expect(await storedUnder(org.id, project.id)).toEqual([]);
  });

  it('a zip bomb of a few KiB declaring 1 GiB (entries sharing one deflated body) is refused before inflating', async () => {
    const bomb = overlappingBomb(64, 16 * 1024 * 1024);
    expect(bomb.length).toBeLessThan(32 * 1024);
    const { project, assessment } = await draftAssessment();
    const res = await upload(org.admin.token, assessment.id, bomb);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/zip bomb/);
    expect(await storedUnder(org.id, project.id)).toEqual([]);
  });

  it('an entry whose header declares 1 GiB is refused by the total cap', async () => {
    const zip = buildZip([{ name: 'big.bin', data: Buffer.alloc(4096), deflate: true, declaredSize: 1024 ** 3 }]);
    expect(zip.length).toBeLessThan(4096);
    const { assessment } = await draftAssessment();
    const res = await upload(org.admin.token, assessment.id, zip);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/expands to more than 536870912 bytes.*zip bomb/);
  });

  it('one honest entry compressing more than the ratio cap is refused', async () => {
    const zip = buildZip([{ name: 'zeros.bin', data: Buffer.alloc(8 * 1024 * 1024), deflate: true }]);
    const { assessment } = await draftAssessment();
    const res = await upload(org.admin.token, assessment.id, zip);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/"zeros\.bin" expands \d+ times \(at most 200\)/);
  });

  it('an entry that inflates past its declared size fails during extraction, and the files already stored go too', async () => {
    const zip = buildZip([
      { name: 'a.txt', data: Buffer.from('first file, stored before the lie is found') },
      { name: 'liar.bin', data: Buffer.alloc(64 * 1024, 7), deflate: true, declaredSize: 10 },
    ]);
    const { project, assessment } = await draftAssessment();
    const res = await upload(org.admin.token, assessment.id, zip);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/"liar\.bin" cannot be extracted/);
    expect(await storedUnder(org.id, project.id)).toEqual([]);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
  });
});

describe('artifacts', () => {
  let assessmentId: string;
  let zip: Buffer;
  beforeAll(async () => {
    const { assessment } = await draftAssessment();
    assessmentId = assessment.id;
    zip = await sampleZip();
    expect((await upload(org.admin.token, assessmentId, zip)).status).toBe(200);
  });

  it('lists the files in path order with size and SHA-256, a page at a time', async () => {
    const first = await api().get(`/api/v1/assessments/${assessmentId}/source/files?limit=3`).set(bearer(org.manager.token));
    expect(first.status).toBe(200);
    expect(first.body.data.map((f: { path: string }) => f.path)).toEqual(['README.md', 'assets/logo.png', 'src/index.ts']);
    expect(first.body.data[2]).toEqual({
      path: 'src/index.ts',
      size_bytes: 26,
      sha256: sha256(Buffer.from('export const answer = 42;\n')),
    });
    const second = await api()
      .get(`/api/v1/assessments/${assessmentId}/source/files?limit=3&cursor=${first.body.next_cursor}`)
      .set(bearer(org.manager.token));
    expect(second.body).toEqual({ data: [expect.objectContaining({ path: 'src/lib/util.ts' })], next_cursor: null });
    const folder = await api().get(`/api/v1/assessments/${assessmentId}/source/files?prefix=src/lib/`).set(bearer(org.manager.token));
    expect(folder.body.data.map((f: { path: string }) => f.path)).toEqual(['src/lib/util.ts']);
  });

  it.each([
    ['a NUL (AA)', 'AA'],
    ['bytes that are no UTF-8 (_w)', '_w'],
    ['a cursor spelt another way than the service spells it (padding)', `${Buffer.from('README.md').toString('base64url')}A`],
  ])('answers 400 for a cursor it did not make: %s', async (_what, cursor) => {
    const res = await api().get(`/api/v1/assessments/${assessmentId}/source/files?cursor=${cursor}`).set(bearer(org.manager.token));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: 'Invalid cursor: pass next_cursor as answered.' });
  });

  it('reads a text file inline and serves a binary one as a download', async () => {
    const text = await api().get(`/api/v1/assessments/${assessmentId}/source/file`).query({ path: 'src/index.ts' }).set(bearer(org.manager.token));
    expect(text.status).toBe(200);
    expect(text.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(text.text).toBe('export const answer = 42;\n');

    const png = await api()
      .get(`/api/v1/assessments/${assessmentId}/source/file`)
      .query({ path: 'assets/logo.png' })
      .set(bearer(org.manager.token))
      .buffer(true)
      .parse(binaryBody);
    expect(png.status).toBe(200);
    expect(png.headers['content-type']).toBe('application/octet-stream');
    expect(png.headers['content-disposition']).toBe('attachment; filename=logo.png');
    expect((png.body as Buffer).subarray(0, 4)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  });

  it('serves text larger than SOURCE_TEXT_MAX_BYTES as a download', async () => {
    const small = await createHarness({ SOURCE_TEXT_MAX_BYTES: '10' });
    try {
      const o = await createOrg(small);
      const p = await insertProject(small, o.id);
      const a = await insertAssessment(small, o.id, p.id);
      await request(small.app).post(`/api/v1/assessments/${a.id}/source`).set(bearer(o.admin.token)).set('Content-Type', 'application/zip').send(zip).expect(200);
      const res = await request(small.app).get(`/api/v1/assessments/${a.id}/source/file?path=src/index.ts`).set(bearer(o.admin.token)).buffer(true).parse(binaryBody);
      expect(res.headers['content-disposition']).toBe('attachment; filename=index.ts');
      expect((res.body as Buffer).toString()).toBe('export const answer = 42;\n');
    } finally {
      await small.close();
    }
  });

  it('answers 404 for paths outside the archive, another organization, and an assessment without source', async () => {
    for (const path of ['../../etc/passwd', '/etc/passwd', 'src', 'docs/', 'nope.txt']) {
      const res = await api().get(`/api/v1/assessments/${assessmentId}/source/file`).query({ path }).set(bearer(org.admin.token));
      expect(res.status).toBe(404);
    }
    for (const suffix of ['source', 'source/files', 'source/file?path=README.md', 'source/archive']) {
      expect((await api().get(`/api/v1/assessments/${assessmentId}/${suffix}`).set(bearer(other.admin.token))).status).toBe(404);
    }
    const { assessment: empty } = await draftAssessment();
    expect((await api().get(`/api/v1/assessments/${empty.id}/source/files`).set(bearer(org.admin.token))).status).toBe(404);
  });

  it('downloads the original archive, streamed, with its name and SHA-256', async () => {
    const res = await api().get(`/api/v1/assessments/${assessmentId}/source/archive`).set(bearer(org.admin.token)).buffer(true).parse(binaryBody);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/zip');
    expect(res.headers['content-disposition']).toBe(`attachment; filename=${assessmentId}-source.zip`);
    expect(res.headers['x-service-source-sha256']).toBe(sha256(zip));
    expect(res.headers['repr-digest']).toBe(`sha-256=:${createHash('sha256').update(zip).digest('base64')}:`);
    expect(Buffer.compare(res.body as Buffer, zip)).toBe(0);
    const audit = await h.deps.prisma.auditEvent.findMany({ where: { action: 'source.archive_downloaded', targetId: assessmentId } });
    expect(audit).toEqual([expect.objectContaining({ organizationId: org.id, actorId: org.admin.id, metadata: expect.objectContaining({ sha256: sha256(zip) }) })]);
  });

  it('needs source:read_artifacts to read and source:download_archive to download (a manager reads but cannot download)', async () => {
    const download = await api().get(`/api/v1/assessments/${assessmentId}/source/archive`).set(bearer(org.manager.token));
    expect(download.status).toBe(403);
    expect(download.body.detail).toContain('source:download_archive');
    for (const suffix of ['source', 'source/files', 'source/file?path=README.md']) {
      const res = await api().get(`/api/v1/assessments/${assessmentId}/${suffix}`).set(bearer(org.member.token));
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('source:read_artifacts');
    }
    const key = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: 'ci', scopes: ['assessments:read'] });
    const res = await api().get(`/api/v1/assessments/${assessmentId}/source/files`).set(bearer(key.body.key));
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain('source:read_artifacts');
  });
});

describe('size cap', () => {
  let small: Harness;
  let server: http.Server;
  let o: TestOrg;
  beforeAll(async () => {
    small = await createHarness({ SOURCE_UPLOAD_MAX_BYTES: String(1024 * 1024) });
    o = await createOrg(small);
    server = small.app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await small.close();
  });

  it('answers 413 at once when Content-Length is over the cap', async () => {
    const p = await insertProject(small, o.id);
    const a = await insertAssessment(small, o.id, p.id);
    const res = await request(small.app)
      .post(`/api/v1/assessments/${a.id}/source`)
      .set(bearer(o.admin.token))
      .set('Content-Type', 'application/zip')
      .send(Buffer.alloc(1024 * 1024 + 1));
    expect(res.status).toBe(413);
    expect(res.body.detail).toContain('1048576');
  });

  it('answers 413 while a chunked body is still being sent, and stores nothing', async () => {
    const p = await insertProject(small, o.id);
    const a = await insertAssessment(small, o.id, p.id);
    const { port } = server.address() as AddressInfo;
    const chunk = randomBytes(64 * 1024);
    const totalChunks = 64; // 4 MiB offered, 1 MiB allowed
    let sent = 0;
    const status = await new Promise<{ status: number; sentWhenAnswered: number; body: string }>((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/api/v1/assessments/${a.id}/source`,
        headers: { ...bearer(o.admin.token), 'Content-Type': 'application/zip', 'Transfer-Encoding': 'chunked' },
      });
      let answered = false;
      req.on('response', (res) => {
        // Like curl, the client stops sending once it has its answer; the server closes the connection.
        answered = true;
        const sentWhenAnswered = sent;
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, sentWhenAnswered, body }));
      });
      req.on('error', (err) => {
        if (!answered) reject(err);
      });
      const pump = () => {
        if (answered) return;
        if (sent >= totalChunks || req.destroyed) return req.end();
        sent += 1;
        req.write(chunk);
        setTimeout(pump, 5);
      };
      pump();
    });
    expect(status.status).toBe(413);
    expect(JSON.parse(status.body).detail).toContain('1048576');
    expect(status.sentWhenAnswered).toBeLessThan(totalChunks);
    expect(await small.deps.prisma.sourceArchive.count({ where: { assessmentId: a.id } })).toBe(0);
    expect(await small.deps.storage.list(`orgs/${o.id}/`)).toEqual([]);
  });
});

describe('project source', () => {
  const put = (token: string, projectId: string, body: Record<string, unknown>) =>
    api().put(`/api/v1/projects/${projectId}/source`).set(bearer(token)).send(body);

  it('attaches a repository, shows it on the project, changes it to an archive and removes it', async () => {
    const { project, assessment } = await draftAssessment();
    const repo = await put(org.manager.token, project.id, { type: 'repository', url: 'https://140.82.121.4/acme/shop.git', default_branch: 'release/2.x' });
    expect(repo.status).toBe(200);
    expect(repo.body).toEqual({
      type: 'repository',
      repository_url: 'https://140.82.121.4/acme/shop.git',
      default_branch: 'release/2.x',
      archive: null,
      updated_at: expect.any(String),
    });
    const shown = await api().get(`/api/v1/projects/${project.id}`).set(bearer(org.manager.token));
    expect(shown.body.source).toEqual(repo.body);

    const uploaded = await upload(org.admin.token, assessment.id, await sampleZip());
    const archive = await put(org.manager.token, project.id, { type: 'archive', archive_id: uploaded.body.id });
    expect(archive.status).toBe(200);
    expect(archive.body).toMatchObject({
      type: 'archive',
      repository_url: null,
      archive: { id: uploaded.body.id, assessment_id: assessment.id, sha256: uploaded.body.sha256 },
    });

    expect((await api().delete(`/api/v1/projects/${project.id}/source`).set(bearer(org.manager.token))).status).toBe(204);
    expect((await api().get(`/api/v1/projects/${project.id}`).set(bearer(org.manager.token))).body.source).toBeNull();
    const audit = await h.deps.prisma.auditEvent.findMany({ where: { targetId: project.id }, orderBy: { createdAt: 'asc' } });
    expect(audit.map((e) => [e.action, (e.metadata as { type?: string } | null)?.type ?? null])).toEqual([
      ['project.source_changed', 'repository'],
      ['project.source_changed', 'archive'],
      ['project.source_removed', null],
    ]);
  });

  it('checks clone URLs like webhook URLs: https, a public host, no credentials (422)', async () => {
    const { project } = await draftAssessment();
    for (const url of [
      'http://140.82.121.4/acme/shop.git',
      'https://127.0.0.1/acme/shop.git',
      'https://10.0.0.8/acme/shop.git',
      'https://169.254.169.254/latest/meta-data',
      'https://user:token@140.82.121.4/acme/shop.git',
      'https://140.82.121.4/',
    ]) {
      const res = await put(org.admin.token, project.id, { type: 'repository', url, default_branch: 'main' });
      expect([url, res.status]).toEqual([url, 422]);
      expect(res.body.detail).toMatch(/^Repository URL refused/);
    }
    const badBranch = await put(org.admin.token, project.id, { type: 'repository', url: 'https://140.82.121.4/a/b.git', default_branch: '../x' });
    expect(badBranch.status).toBe(400);
    expect(await h.deps.prisma.projectSource.count({ where: { projectId: project.id } })).toBe(0);
  });

  it('refuses an archive of another project or organization (422), a member (403), another organization (404)', async () => {
    const { project } = await draftAssessment();
    const { assessment: elsewhere } = await draftAssessment();
    const uploaded = await upload(org.admin.token, elsewhere.id, await sampleZip());
    expect((await put(org.admin.token, project.id, { type: 'archive', archive_id: uploaded.body.id })).status).toBe(422);
    const member = await put(org.member.token, project.id, { type: 'repository', url: 'https://140.82.121.4/a/b.git' });
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('projects:manage_source');
    expect((await put(other.admin.token, project.id, { type: 'repository', url: 'https://140.82.121.4/a/b.git' })).status).toBe(404);
    expect((await api().delete(`/api/v1/projects/${project.id}/source`).set(bearer(other.admin.token))).status).toBe(404);
  });
});

describe('deleting deletes the stored objects', () => {
  it('of an assessment, and of a project', async () => {
    const { project, assessment } = await draftAssessment();
    const second = await insertAssessment(h, org.id, project.id);
    await upload(org.admin.token, assessment.id, await sampleZip());
    await upload(org.admin.token, second.id, await sampleZip({ 'b.txt': Buffer.from('b') }));
    expect((await storedUnder(org.id, project.id, assessment.id)).length).toBeGreaterThan(0);

    expect((await api().delete(`/api/v1/assessments/${assessment.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await storedUnder(org.id, project.id, assessment.id)).toEqual([]);
    expect((await storedUnder(org.id, project.id, second.id)).length).toBeGreaterThan(0);

    expect((await api().delete(`/api/v1/projects/${project.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await storedUnder(org.id, project.id)).toEqual([]);
  });

  it('of an organization', async () => {
    const doomed = await createOrg(h);
    const project = await insertProject(h, doomed.id);
    const assessment = await insertAssessment(h, doomed.id, project.id);
    await upload(doomed.admin.token, assessment.id, await sampleZip());
    expect((await h.deps.storage.list(`orgs/${doomed.id}/`)).length).toBeGreaterThan(0);
    const res = await api().delete('/api/v1/organization').set(bearer(doomed.owner.token)).send({ confirm: doomed.name });
    expect(res.status).toBe(204);
    expect(await h.deps.storage.list(`orgs/${doomed.id}/`)).toEqual([]);
    // Another organization's objects stay.
    expect((await h.deps.storage.list(`orgs/${org.id}/`)).length).toBeGreaterThan(0);
  });
});
