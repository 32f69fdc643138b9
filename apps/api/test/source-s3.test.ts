// The source routes over S3-compatible storage (s3rver on loopback): what the local-folder tests check, end to end.
import { createHash } from 'node:crypto';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertProject, type TestOrg } from './support/fixtures';
import { startS3, type TestS3 } from './support/s3';
import { buildZip } from './support/zips';
import { binaryBody } from './support/binary';

let s3: TestS3;
let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  s3 = await startS3();
  h = await createHarness(s3.env);
  org = await createOrg(h);
});
afterAll(async () => {
  await h.close();
  await s3.close();
});

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const upload = (assessmentId: string, body: Buffer) =>
  request(h.app).post(`/api/v1/assessments/${assessmentId}/source`).set(bearer(org.admin.token)).set('Content-Type', 'application/zip').send(body);

it('runs on S3: upload, list, read, download, and deleting the assessment empties its objects', async () => {
  expect(h.deps.storage.driver).toBe('s3');
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessment(h, org.id, project.id);
  const zip = buildZip([
    { name: 'src/app.py', data: Buffer.from('print("hello")\n'), deflate: true },
    { name: 'src/same.py', data: Buffer.from('print("hello")\n') },
  ]);
  const res = await upload(assessment.id, zip);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ sha256: sha256(zip), file_count: 2, duplicate: false });
  const prefix = `orgs/${org.id}/projects/${project.id}/assessments/${assessment.id}/`;
  // The archive and ONE object for the two identical files.
  expect(await h.deps.storage.list(prefix)).toHaveLength(2);

  const files = await request(h.app).get(`/api/v1/assessments/${assessment.id}/source/files`).set(bearer(org.admin.token));
  expect(files.body.data.map((f: { path: string }) => f.path)).toEqual(['src/app.py', 'src/same.py']);
  const text = await request(h.app).get(`/api/v1/assessments/${assessment.id}/source/file?path=src/same.py`).set(bearer(org.admin.token));
  expect(text.text).toBe('print("hello")\n');
  const archive = await request(h.app)
    .get(`/api/v1/assessments/${assessment.id}/source/archive`)
    .set(bearer(org.admin.token))
    .buffer(true)
    .parse(binaryBody);
  expect(archive.headers['x-service-source-sha256']).toBe(sha256(zip));
  expect(Buffer.compare(archive.body as Buffer, zip)).toBe(0);

  expect((await request(h.app).delete(`/api/v1/assessments/${assessment.id}`).set(bearer(org.admin.token))).status).toBe(204);
  expect(await h.deps.storage.list(`orgs/${org.id}/`)).toEqual([]);
});

it('a refusal found midway leaves nothing in the bucket', async () => {
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessment(h, org.id, project.id);
  const zip = buildZip([
    { name: 'a.txt', data: Buffer.from('stored first') },
    { name: 'liar.bin', data: Buffer.alloc(32 * 1024, 1), deflate: true, declaredSize: 16 },
  ]);
  expect((await upload(assessment.id, zip)).status).toBe(422);
  expect(await h.deps.storage.list(`orgs/${org.id}/projects/${project.id}/`)).toEqual([]);
});
