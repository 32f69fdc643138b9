// Archive limits without holes (issue 35, part 2): the ratio on every entry and on the whole archive, names that
// collide after case folding or NFC, a file that is also a folder, local headers that name another entry, and the
// organization's quota. Each refusal is a 422 that leaves nothing behind: no row, no stored object, no temp folder.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertProject, type TestOrg } from './support/fixtures';
import { buildZip, deflatedOnce, overlappingStored, type ZipEntrySpec } from './support/zips';

const MiB = 1024 * 1024;
const QUOTA = 4 * MiB;

let h: Harness;
let org: TestOrg;
let tempDir: string;

beforeAll(async () => {
  tempDir = mkdtempSync(path.join(tmpdir(), 'svc-limits-tmp-'));
  h = await createHarness({ SOURCE_TEMP_DIR: tempDir, SOURCE_ORG_QUOTA_BYTES: String(QUOTA) });
  org = await createOrg(h);
});
afterAll(async () => {
  await h.close();
  rmSync(tempDir, { recursive: true, force: true });
});

const upload = (token: string, assessmentId: string, body: Buffer) =>
  request(h.app).post(`/api/v1/assessments/${assessmentId}/source`).set(bearer(token)).set('Content-Type', 'application/zip').send(body);

async function draftIn(o: TestOrg) {
  const project = await insertProject(h, o.id);
  const assessment = await insertAssessment(h, o.id, project.id);
  return { project, assessment };
}

/** Nothing of the refused upload anywhere: its row, its objects, the API's temp folders. */
async function expectNothingLeft(o: TestOrg, projectId: string, assessmentId: string) {
  expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId } })).toBe(0);
  expect(await h.deps.storage.list(`orgs/${o.id}/projects/${projectId}/`)).toEqual([]);
  expect(readdirSync(tempDir)).toEqual([]);
}

/** Incompressible bytes, stored: an honest archive of the given uncompressed size (ratio 1). */
const incompressible = (name: string, bytes: number): ZipEntrySpec => ({ name, data: randomBytes(bytes) });

describe('refused archives: a clear 422, and nothing stored', () => {
  const zeros = deflatedOnce(Buffer.alloc(1_000_000));
  const almostMiB = deflatedOnce(Buffer.alloc(MiB - 1));
  const cases: Array<[string, () => Buffer, RegExp]> = [
    [
      '400 entries of 1,000,000 zero bytes',
      () => buildZip(Array.from({ length: 400 }, (_, i) => ({ name: `zeros/${i}.bin`, deflated: zeros }))),
      /"zeros\/0\.bin" expands \d+ times \(at most 200\): refused as a possible zip bomb/,
    ],
    [
      '512 entries of just under 1 MiB at about 1000:1',
      () => buildZip(Array.from({ length: 512 }, (_, i) => ({ name: `almost/${i}.bin`, deflated: almostMiB }))),
      /"almost\/0\.bin" expands \d+ times \(at most 200\)/,
    ],
    [
      '400 stored entries of 1:1 sharing one 1 MiB body (the whole archive expands 400 times)',
      () => overlappingStored(400, randomBytes(MiB)),
      /The archive expands \d+ times its size .*refused as a possible zip bomb/,
    ],
    ['names that differ only in case', () => buildZip([{ name: 'A.txt', data: Buffer.from('a') }, { name: 'a.txt', data: Buffer.from('b') }]), /"A\.txt" and "a\.txt" differ only in letter case or Unicode normalisation/],
    [
      'names that differ only in Unicode normalisation',
      () => buildZip([{ name: 'caf\u00e9.py', data: Buffer.from('1') }, { name: 'cafe\u0301.py', data: Buffer.from('2') }]),
      /differ only in letter case or Unicode normalisation/,
    ],
    ['a file and a folder of one name', () => buildZip([{ name: 'a', data: Buffer.from('file') }, { name: 'a/b', data: Buffer.from('x') }]), /"a" is a file and also a folder/],
    [
      'a local header naming another entry than the central directory',
      () => buildZip([{ name: 'src/ok.ts', data: Buffer.from('ok') }, { name: 'src/a.ts', localName: 'src/b.ts', data: Buffer.from('x') }]),
      /"src\/a\.ts" has another name in its local header than in the central directory/,
    ],
    [
      'a local header with a longer name',
      () => buildZip([{ name: 'a.ts', localName: '../../evil.sh', data: Buffer.from('x') }]),
      /"a\.ts" has another name in its local header/,
    ],
    [
      'a name that escapes the root behind a Unicode Path field naming a safe file',
      // Tools that ignore the field (Go's and Python's zip readers, Java's) extract the header's own name.
      () => buildZip([{ name: '../../evil.sh', unicodePath: 'evil.sh', data: Buffer.from('x') }]),
      /"\.\.\/\.\.\/evil\.sh" escapes the archive root with \.\./,
    ],
    [
      'one name twice behind Unicode Path fields naming two files',
      () => buildZip([{ name: 'a.txt', unicodePath: 'x.txt', data: Buffer.from('1') }, { name: 'a.txt', unicodePath: 'y.txt', data: Buffer.from('2') }]),
      /"a\.txt" appears twice/,
    ],
  ];

  it.each(cases)('%s', async (_name, zip, detail) => {
    const { project, assessment } = await draftIn(org);
    const res = await upload(org.admin.token, assessment.id, zip());
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(detail);
    await expectNothingLeft(org, project.id, assessment.id);
  });
});

describe('the organization quota of stored uncompressed bytes', () => {
  it('refuses an upload past it with 422, counts a replaced archive out, and answers used/quota', async () => {
    const o = await createOrg(h);
    const first = await draftIn(o);
    expect((await upload(o.admin.token, first.assessment.id, buildZip([incompressible('a.bin', 3 * MiB)]))).status).toBe(200);

    const second = await draftIn(o);
    const refused = await upload(o.owner.token, second.assessment.id, buildZip([incompressible('b.bin', 2 * MiB)]));
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toBe(
      `The organization's source storage quota is ${QUOTA} uncompressed bytes (SOURCE_ORG_QUOTA_BYTES); ${3 * MiB} are used ` +
        `and this archive expands to ${2 * MiB}: refused. Delete assessments or archives you no longer need.`,
    );
    await expectNothingLeft(o, second.project.id, second.assessment.id);

    // Replacing the 3 MiB archive with a 3.5 MiB one fits: the old one goes.
    const replaced = await upload(o.admin.token, first.assessment.id, buildZip([incompressible('c.bin', 3.5 * MiB)]));
    expect(replaced.status).toBe(200);
    const usage = await request(h.app).get('/api/v1/organization/source-usage').set(bearer(o.owner.token));
    expect(usage.status).toBe(200);
    expect(usage.body).toEqual({ used_bytes: 3.5 * MiB, quota_bytes: QUOTA });
    // Another organization's usage is its own.
    expect((await request(h.app).get('/api/v1/organization/source-usage').set(bearer(org.admin.token))).body.used_bytes).not.toBe(3.5 * MiB);
  });

  it('two uploads at once that each fit but not together: one is stored, the other refused and removed', async () => {
    const o = await createOrg(h);
    const [a, b] = await Promise.all([draftIn(o), draftIn(o)]);
    const [ra, rb] = await Promise.all([
      upload(o.admin.token, a.assessment.id, buildZip([incompressible('a.bin', 2.5 * MiB)])),
      upload(o.owner.token, b.assessment.id, buildZip([incompressible('b.bin', 2.5 * MiB)])),
    ]);
    expect([ra.status, rb.status].sort()).toEqual([200, 422]);
    const loser = ra.status === 422 ? a : b;
    expect((ra.status === 422 ? ra : rb).body.detail).toMatch(/source storage quota/);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: loser.assessment.id } })).toBe(0);
    expect(await h.deps.storage.list(`orgs/${o.id}/projects/${loser.project.id}/`)).toEqual([]);
    expect(readdirSync(tempDir)).toEqual([]);
  });
});

it("replacing an archive that is a project's source removes that source and says so in the audit log", async () => {
  const { project, assessment } = await draftIn(org);
  const first = await upload(org.admin.token, assessment.id, buildZip([{ name: 'a.txt', data: Buffer.from('one') }]));
  const put = await request(h.app)
    .put(`/api/v1/projects/${project.id}/source`)
    .set(bearer(org.admin.token))
    .send({ type: 'archive', archive_id: first.body.id });
  expect(put.status).toBe(200);
  const second = await upload(org.admin.token, assessment.id, buildZip([{ name: 'a.txt', data: Buffer.from('two') }]));
  expect(second.status).toBe(200);
  expect((await request(h.app).get(`/api/v1/projects/${project.id}`).set(bearer(org.admin.token))).body.source).toBeNull();
  const audit = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id, action: 'project.source_removed', targetId: project.id } });
  expect(audit).toEqual([
    expect.objectContaining({
      actorId: org.admin.id,
      metadata: { reason: 'archive_replaced', archive_id: first.body.id, replaced_by: second.body.id },
    }),
  ]);
});
