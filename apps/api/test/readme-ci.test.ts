// The "From CI" script of docs/domain.md (the README's map links it), extracted and run with bash as written, against a real API on
// loopback, in a git repository of its own. The test plays the engine: it starts the launched assessment,
// reports findings and completes it while the script waits.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';

const CI_DOC = path.join(__dirname, '../../../docs/domain.md');

/** The bash block that follows the `<!-- ci-script -->` marker in docs/domain.md. */
function ciScriptFromReadme(text = readFileSync(CI_DOC, 'utf8')): string {
  const match = /<!-- ci-script -->\s*```bash\n([\s\S]*?)\n```/.exec(text);
  if (!match) throw new Error('docs/domain.md has no <!-- ci-script --> bash block');
  return match[1]!;
}

let h: Harness;
let org: TestOrg;
let server: http.Server;
let baseUrl: string;
let apiKey: string;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
  server = h.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The key a pipeline holds, minted by an admin with exactly the scopes the README names (a manager's bundle has no
  // source:upload_zip: SPEC's role table).
  const key = await request(h.app)
    .post('/api/v1/api-keys')
    .set(bearer(org.admin.token))
    .send({ name: 'ci', scopes: ['assessments:create', 'assessments:read', 'source:upload_zip', 'findings:read', 'findings:export'] });
  expect(key.status).toBe(201);
  apiKey = key.body.key;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await h.close();
});

function gitRepository(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-ci-repo-'));
  mkdirSync(path.join(dir, 'src'));
  writeFileSync(path.join(dir, 'src/app.js'), 'console.log("shop");\n');
  writeFileSync(path.join(dir, 'README.md'), '# shop\n');
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=ci@example.test', '-c', 'user.name=CI', ...args], { cwd: dir });
  git('init', '-q');
  git('add', '.');
  git('commit', '-q', '-m', 'first');
  return dir;
}

/** The engine's side: waits for the launch, then start -> findings -> complete through the API. */
async function engine(projectId: string, severities: string[]): Promise<void> {
  const deadline = Date.now() + 30_000;
  let launched: { id: string } | null = null;
  while (!launched && Date.now() < deadline) {
    launched = await h.deps.prisma.assessment.findFirst({ where: { projectId, status: 'queued' }, select: { id: true } });
    if (!launched) await new Promise((r) => setTimeout(r, 100));
  }
  if (!launched) throw new Error('the script never launched an assessment');
  const engineApi = (p: string, body: object) => request(h.app).post(`/api/v1/assessments/${launched!.id}${p}`).set(bearer(org.admin.token)).send(body);
  expect((await engineApi('/start', {})).status).toBe(200);
  for (const [i, severity] of severities.entries()) {
    expect((await engineApi('/findings', { title: `Issue ${i}`, severity, fingerprint: `fp-${i}`, location: 'src/app.js:1' })).status).toBe(201);
  }
  expect((await engineApi('/complete', { summary: 'done' })).status).toBe(200);
}

function runScript(cwd: string, projectId: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', ciScriptFromReadme()], {
      cwd,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, SVC_URL: baseUrl, SVC_API_KEY: apiKey, SVC_PROJECT_ID: projectId, SVC_POLL_SECONDS: '0.2' },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

it('uploads the committed source, waits for the engine, writes SARIF and fails the job on a critical finding', async () => {
  const project = await insertProject(h, org.id);
  const repo = gitRepository();
  try {
    const [result] = await Promise.all([runScript(repo, project.id), engine(project.id, ['critical', 'low'])]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/source [0-9a-f]{64}: 2 files/);
    expect(result.stdout).toContain('1 critical finding(s): see findings.sarif');
    const sarif = JSON.parse(readFileSync(path.join(repo, 'findings.sarif'), 'utf8'));
    expect(sarif.version).toBe('2.1.0');
    expect(sarif.runs[0].results).toHaveLength(2);
    const archive = await h.deps.prisma.sourceArchive.findFirst({ where: { projectId: project.id }, include: { files: true } });
    expect(archive!.files.map((f) => f.path).sort()).toEqual(['README.md', 'src/app.js']);
    // The assessment was created under the run's Idempotency-Key: the script's POST sent again answers it again.
    const assessment = await h.deps.prisma.assessment.findFirstOrThrow({ where: { projectId: project.id } });
    const key = await h.deps.prisma.idempotencyKey.findFirstOrThrow({ where: { organizationId: org.id, key: { endsWith: '-assessment' } }, orderBy: { createdAt: 'desc' } });
    const retried = await request(h.app).post(`/api/v1/projects/${project.id}/assessments`)
      .set({ ...bearer(apiKey), 'Idempotency-Key': key.key, 'Content-Type': 'application/json' }).send(`{"name": "${assessment.name}"}`);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.body.id).toBe(assessment.id);
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
}, 60_000);

it('passes the job when the assessment has no critical finding', async () => {
  const project = await insertProject(h, org.id);
  const repo = gitRepository();
  try {
    const [result] = await Promise.all([runScript(repo, project.id), engine(project.id, ['high', 'medium'])]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('no critical findings');
    expect(existsSync(path.join(repo, 'findings.sarif'))).toBe(true);
  } finally {
    rmSync(repo, { recursive: true, force: true });
  }
}, 60_000);
