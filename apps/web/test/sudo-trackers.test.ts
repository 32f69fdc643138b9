// Sudo mode in the dashboard for issue trackers and integrations (docs/api.md, "Sensitive changes"), in Chromium: an
// admin whose sign-in is more than 10 minutes old creates an issue tracker and connects a Slack workspace; the page
// sends the change as it is, and only when the API asks does it show "Confirm with your password". A wrong password
// shows the API's message; the right one makes the change. The password is in no URL and is cleared.
import type { Page, Request } from 'playwright-core';
import { createUserInOrg, TEST_PASSWORD } from '../../api/test/support/fixtures';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';
import { signedInAWhileAgo } from './support/sudo';

let b: BrowserWorld;
let page: Page;

beforeAll(async () => {
  b = await startBrowserWorld();
}, 60_000);
beforeEach(async () => {
  page = await b.page();
});
afterAll(() => b?.close());

/** The bodies of the POSTs the page sends to `path`, and every URL it sends there. */
function postsTo(p: Page, path: string): Request[] {
  const seen: Request[] = [];
  p.on('request', (r) => {
    if (new URL(r.url()).pathname === path && r.method() === 'POST') seen.push(r);
  });
  return seen;
}

const passwordsSent = (posts: Request[]) => posts.map((r) => (JSON.parse(r.postData() ?? '{}') as { current_password?: string }).current_password);
const inNoUrl = (posts: Request[]) => posts.every((r) => !r.url().includes('password') && !r.url().includes(encodeURIComponent(TEST_PASSWORD)));

async function openAs(email: string, link: string): Promise<void> {
  await b.logIn(email, TEST_PASSWORD);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link }).click();
  await page.getByRole('heading', { name: link }).waitFor();
}

describe('from an older sign-in', () => {
  it('creating an issue tracker asks for the password once the API does; a wrong one is refused, the right one creates it', async () => {
    const { w, step } = b;
    const admin = await createUserInOrg(w.h, w.org.id, 'admin', 'sudo-tracker');
    const posts = postsTo(page, '/api/v1/issue-export-targets');
    const trackers = () => w.h.deps.prisma.issueExportTarget.count({ where: { organizationId: w.org.id, name: 'sudo tracker' } });
    await step('open', () => openAs(admin.email, 'Issue trackers'));
    const form = page.getByRole('form', { name: 'Create issue tracker' });
    const passwordField = form.getByLabel('Confirm with your password');

    await step('asked', async () => {
      await signedInAWhileAgo(b, page);
      expect(await passwordField.count()).toBe(0);
      await form.getByLabel('Tracker name').fill('sudo tracker');
      await form.getByLabel('Repository (owner/repo)').fill('acme/sudo');
      await form.getByLabel(/^Token/).fill('ghp_sudoTrackerToken');
      await form.getByRole('button', { name: 'Create tracker' }).click();
      await form.getByText('You signed in more than 10 minutes ago: confirm with your password to create this tracker.').waitFor();
      // The API's text for clients is not shown as an error; nothing was created.
      expect(await page.getByRole('alert').filter({ hasText: 'current_password' }).count()).toBe(0);
      expect(await passwordField.getAttribute('type')).toBe('password');
      expect(await trackers()).toBe(0);
    });

    await step('wrong-password', async () => {
      await passwordField.fill('not the password at all');
      await form.getByRole('button', { name: 'Create tracker' }).click();
      await form.getByRole('alert').filter({ hasText: 'The current password is not correct.' }).waitFor();
      expect(await passwordField.inputValue()).toBe('');
      expect(await trackers()).toBe(0);
    });

    await step('right-password', async () => {
      await passwordField.fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Create tracker' }).click();
      await page.getByTestId('tracker-sudo tracker').waitFor();
      expect(await trackers()).toBe(1);
      expect(await passwordField.count()).toBe(0);
    });

    expect(passwordsSent(posts)).toEqual([undefined, 'not the password at all', TEST_PASSWORD]);
    expect(inNoUrl(posts)).toBe(true);
  });

  it('connecting a Slack workspace asks for the password once the API does; with it, the integration is connected', async () => {
    const { w, step } = b;
    const admin = await createUserInOrg(w.h, w.org.id, 'admin', 'sudo-integration');
    const posts = postsTo(page, '/api/v1/integrations');
    const connected = () => w.h.deps.prisma.integration.count({ where: { organizationId: w.org.id, name: 'sudo slack' } });
    await step('open', () => openAs(admin.email, 'Integrations'));
    const form = page.getByRole('form', { name: 'Connect an integration' });

    await step('asked', async () => {
      await signedInAWhileAgo(b, page);
      await form.getByLabel('Kind').selectOption('slack');
      await form.getByLabel('Integration name').fill('sudo slack');
      await form.getByLabel('Slack bot token').fill('xoxb-9999-8888-sudoworkspacetoken');
      await form.getByLabel('Slack workspace id').fill('T0SUDO01');
      await form.getByRole('button', { name: 'Connect integration' }).click();
      await form.getByText('You signed in more than 10 minutes ago: confirm with your password to connect this integration.').waitFor();
      expect(await page.getByRole('alert').filter({ hasText: 'current_password' }).count()).toBe(0);
      expect(await connected()).toBe(0);
    });

    await step('right-password', async () => {
      await form.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Connect integration' }).click();
      await page.getByTestId('integration-sudo slack').getByText('T0SUDO01').waitFor();
      expect(await connected()).toBe(1);
      expect(await form.getByLabel('Confirm with your password').count()).toBe(0);
    });

    expect(passwordsSent(posts)).toEqual([undefined, TEST_PASSWORD]);
    expect(inNoUrl(posts)).toBe(true);
  });
});
