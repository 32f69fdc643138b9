// Issue trackers in Chromium: an admin adds a GitHub Enterprise tracker (a loopback server speaking GitHub's
// POST /repos/{owner}/{repo}/issues); a manager, who reads trackers but does not configure them (SPEC's role table),
// exports a finding from its assessment page and sees the key link.
import type { Page } from 'playwright-core';
import { insertAssessment, insertGrant, insertProject, TEST_PASSWORD } from '../../api/test/support/fixtures';
import { insertFinding } from '../../api/test/support/domain';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';

let b: BrowserWorld;
let page: Page;
let assessmentId: string;

beforeAll(async () => {
  b = await startBrowserWorld();
  const project = await insertProject(b.w.h, b.w.org.id);
  const assessment = await insertAssessment(b.w.h, b.w.org.id, project.id);
  assessmentId = assessment.id;
  // A manager works on the projects granted to them.
  await insertGrant(b.w.h, b.w.org.id, { projectId: project.id }, { userId: b.w.org.manager.id }, 'write');
  await insertFinding(b.w.h, assessment, { title: 'Hard-coded secret', severity: 'high', location: 'config.ts:3' });
  b.w.receiver.script('/ghe/api/v3/repos/acme/web/issues', () => ({
    status: 201,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ html_url: 'https://ghe.example.com/acme/web/issues/41', number: 41 }),
  }));
  page = await b.page();
}, 60_000);
afterAll(() => b?.close());

it('an admin adds a GitHub tracker; a manager exports a finding from the assessment page', async () => {
  const { w, step } = b;
  await step('login', async () => {
    await b.logIn(w.org.admin.email, TEST_PASSWORD);
    await page.getByRole('link', { name: 'Issue trackers' }).click();
    await page.getByRole('heading', { name: 'Issue trackers' }).waitFor();
  });

  await step('create-tracker', async () => {
    const form = page.getByRole('form', { name: 'Create issue tracker' });
    await form.getByLabel('Tracker name').fill('acme/web');
    await form.getByLabel('Repository (owner/repo)').fill('acme/web');
    await form.getByLabel(/^GitHub Enterprise API URL/).fill(w.receiver.url('/ghe/api/v3'));
    await form.getByLabel(/^Token/).fill('ghp_dashboardSecret');
    await form.getByRole('button', { name: 'Create tracker' }).click();
    const row = page.getByTestId('tracker-acme/web');
    await row.waitFor();
    expect(await page.content()).not.toContain('ghp_dashboardSecret');
  });

  await step('manager-sees-the-tracker-without-controls', async () => {
    page = await b.page();
    await b.logIn(w.org.manager.email, TEST_PASSWORD);
    await page.getByRole('link', { name: 'Issue trackers' }).click();
    await page.getByTestId('tracker-acme/web').waitFor();
    expect(await page.getByRole('form', { name: 'Create issue tracker' }).count()).toBe(0);
    expect(await page.getByTestId('tracker-acme/web').getByRole('button').count()).toBe(0);
  });

  await step('export-finding', async () => {
    await page.goto(`${b.base}/assessments/${assessmentId}`);
    const row = page.getByTestId('finding-Hard-coded secret');
    await row.getByRole('button', { name: 'Issues' }).click();
    await row.getByRole('button', { name: 'Export issue' }).click();
    await row.getByRole('link', { name: 'acme/web#41' }).waitFor({ timeout: 15_000 });
    expect(await row.getByRole('link', { name: 'acme/web#41' }).getAttribute('href')).toBe('https://ghe.example.com/acme/web/issues/41');
    const [request] = w.receiver.requests('/ghe/api/v3/repos/acme/web/issues');
    expect(JSON.parse(request.body.toString()).title).toBe('[high] Hard-coded secret');
  });

  await step('member-sees-the-issue-but-cannot-export', async () => {
    page = await b.page();
    await b.logIn(w.org.member.email, TEST_PASSWORD);
    await page.getByRole('link', { name: 'Projects' }).waitFor();
    expect(await page.getByRole('link', { name: 'Issue trackers' }).count()).toBe(1); // members read trackers
  });
}, 120_000); // a flow of several pages and sign-ins: 10-28 s alone, past 30 s once in the full suite on 2 cores
