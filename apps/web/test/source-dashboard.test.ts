// The dashboard's source pages in real Chromium (playwright-core + Debian's chromium) against the real API serving
// the built dashboard on loopback: a project's repository, an assessment's upload with its progress, the artifacts
// browser, the refusal of an unsafe archive, and what a member does not get to see.
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createHarness, type Harness } from '../../api/test/support/harness';
import { createOrg, insertAssessment, insertGrant, insertProject, TEST_PASSWORD, type TestOrg } from '../../api/test/support/fixtures';
import { buildZip } from '../../api/test/support/zips';

const SCREENSHOTS = path.resolve(__dirname, '../../../test-results/dashboard');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

let h: Harness;
let org: TestOrg;
let server: Server;
let base: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let files: string;

beforeAll(async () => {
  h = await createHarness({ RATE_LIMIT_PER_MINUTE: '5000', LOGIN_RATE_LIMIT_PER_MINUTE: '100' });
  org = await createOrg(h);
  server = h.app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  files = mkdtempSync(path.join(tmpdir(), 'svc-dash-zips-'));
}, 60_000);
afterAll(async () => {
  await browser?.close();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await h.close();
  rmSync(files, { recursive: true, force: true });
});
beforeEach(async () => {
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('dialog', (dialog) => void dialog.accept());
});
afterEach(async () => {
  await context?.close();
});

async function step<T>(name: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (err) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    const file = path.join(SCREENSHOTS, `source-${name.replace(/[^a-z0-9]+/gi, '-')}.png`);
    await page?.screenshot({ path: file, fullPage: true }).catch(() => undefined);
    throw new Error(`step "${name}" failed (screenshot: ${file}): ${(err as Error).message}`);
  }
}

async function logIn(email: string) {
  await page.goto(`${base}/login`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(TEST_PASSWORD);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

function zipFile(name: string, bytes: Buffer): string {
  const file = path.join(files, name);
  writeFileSync(file, bytes);
  return file;
}

it('an admin attaches a repository, uploads source with progress, browses it and makes it the project source', async () => {
  const project = await insertProject(h, org.id, 'Shop');
  const assessment = await insertAssessment(h, org.id, project.id, 'Release 2.0');
  // Large enough (random, so it does not compress) for the browser to report upload progress.
  const zip = buildZip([
    { name: 'src/index.ts', data: Buffer.from('export const answer = 42;\n') },
    { name: 'assets/blob.bin', data: randomBytes(3 * 1024 * 1024) },
  ]);
  const sha = createHash('sha256').update(zip).digest('hex');
  await logIn(org.admin.email);

  await step('attach repository', async () => {
    await page.goto(`${base}/projects/${project.id}`);
    await page.getByText('No source attached.').waitFor();
    await page.getByLabel('Clone URL (https)').fill('https://140.82.121.4/acme/shop.git');
    await page.getByLabel('Default branch').fill('release');
    await page.getByRole('button', { name: 'Attach repository' }).click();
    await page.getByTestId('project-source').filter({ hasText: 'https://140.82.121.4/acme/shop.git' }).waitFor();
    expect(await page.getByTestId('project-source').textContent()).toContain('branch release');
  });

  await step('refused clone URL', async () => {
    await page.getByLabel('Clone URL (https)').fill('https://10.1.2.3/internal.git');
    await page.getByRole('button', { name: 'Change source' }).click();
    await page.getByRole('alert').filter({ hasText: 'Repository URL refused' }).waitFor();
  });

  await step('upload with progress', async () => {
    await page.goto(`${base}/assessments/${assessment.id}`);
    await page.getByText('No source uploaded.').waitFor();
    await page.evaluate(`(() => {
      window.__progress = [];
      new MutationObserver(() => {
        const bar = document.querySelector('progress');
        if (bar) window.__progress.push(bar.value);
      }).observe(document.body, { subtree: true, childList: true, attributes: true });
    })()`);
    await page.getByLabel('Zipped source').setInputFiles(zipFile('release.zip', zip));
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('status').filter({ hasText: `Uploaded: SHA-256 ${sha}` }).waitFor();
    const seen = (await page.evaluate('window.__progress')) as number[];
    expect(seen.length).toBeGreaterThan(0);
    expect(await page.getByTestId('source-archive').textContent()).toContain(sha);
    // The organization's stored source against its quota (SOURCE_ORG_QUOTA_BYTES, 10 GiB by default).
    await page.getByTestId('source-usage').filter({ hasText: 'Organization source storage: 3 MiB of 10 GiB used' }).waitFor();
  });

  await step('artifacts browser', async () => {
    await page.getByRole('button', { name: 'src/index.ts' }).click();
    expect(await page.getByTestId('file-text').textContent()).toBe('export const answer = 42;\n');
    await page.getByRole('button', { name: 'assets/blob.bin' }).click();
    await page.getByRole('link', { name: 'Download assets/blob.bin' }).waitFor();
    await page.getByLabel('Folder or path prefix').fill('src/');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByRole('button', { name: 'assets/blob.bin' }).waitFor({ state: 'detached' });
    expect(await page.getByRole('link', { name: 'Download original archive' }).getAttribute('href')).toBe(
      `/api/v1/assessments/${assessment.id}/source/archive`,
    );
    await page.getByRole('button', { name: 'src/index.ts' }).click();
    await page.getByTestId('file-text').waitFor();
    // What the page looks like, for people (test-results/ is not committed; docs/dashboard-source.png is a copy).
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, 'source-artifacts.png'), fullPage: true });
  });

  await step('archive as the project source', async () => {
    await page.getByRole('button', { name: 'Use as project source' }).click();
    await page.getByRole('status').filter({ hasText: 'The project now uses this archive' }).waitFor();
    await page.goto(`${base}/projects/${project.id}`);
    await page.getByTestId('project-source').filter({ hasText: `Archive ${sha.slice(0, 12)}` }).waitFor();
  });

  await step('unsafe archive refused', async () => {
    await page.goto(`${base}/assessments/${assessment.id}`);
    await page.getByLabel('Zipped source').setInputFiles(zipFile('evil.zip', buildZip([{ name: '../../evil.sh', data: Buffer.from('x') }])));
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByRole('alert').filter({ hasText: 'Entry "../../evil.sh" escapes the archive root' }).waitFor();
  });
}, 90_000);

it('a member sees the project source but cannot change it, upload, or read artifacts', async () => {
  const project = await insertProject(h, org.id, 'Read only');
  const assessment = await insertAssessment(h, org.id, project.id, 'Audit');
  await insertGrant(h, org.id, { projectId: project.id }, { userId: org.member.id }, 'read');
  await logIn(org.member.email);
  await step('member on the project', async () => {
    await page.goto(`${base}/projects/${project.id}`);
    await page.getByText('No source attached.').waitFor();
    expect(await page.getByRole('form', { name: 'Attach repository' }).count()).toBe(0);
  });
  await step('member on the assessment', async () => {
    await page.goto(`${base}/assessments/${assessment.id}`);
    await page.getByRole('heading', { name: 'Source', exact: true }).waitFor();
    expect(await page.getByRole('form', { name: 'Upload source' }).count()).toBe(0);
    expect(await page.getByText('No source uploaded.').count()).toBe(0);
  });
}, 60_000);
