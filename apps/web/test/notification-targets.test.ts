// The notification targets page in Chromium: an admin creates a Slack target and sends a test message that the
// loopback Slack receiver gets as Block Kit; the page shows when it was last sent; a manager sees the targets without
// any control (SPEC's role table: read only); a member sees no such page.
import type { Page } from 'playwright-core';
import { TEST_PASSWORD } from '../../api/test/support/fixtures';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';

let b: BrowserWorld;
let page: Page;

beforeAll(async () => {
  b = await startBrowserWorld();
  b.w.receiver.script('/services/T1/B1/dash', () => ({ status: 200, headers: { 'content-type': 'text/html' }, body: 'ok' }));
}, 60_000);
beforeEach(async () => {
  page = await b.page();
});
afterAll(() => b?.close());

async function targetId(name: string): Promise<string> {
  const row = await b.w.h.deps.prisma.webhookSubscription.findFirstOrThrow({ where: { organizationId: b.w.org.id, name, deletedAt: null } });
  return row.id;
}

describe('notification targets page', () => {
  it('an admin creates a Slack target, sends a test message, sees it sent; a manager sees it without controls; the admin disables and revokes it', async () => {
    const { w, step } = b;
    await step('login-admin', async () => {
      await b.logIn(w.org.admin.email, TEST_PASSWORD);
      await page.getByRole('link', { name: 'Notifications' }).click();
      await page.getByRole('heading', { name: 'Notification targets' }).waitFor();
    });

    await step('create-slack-target', async () => {
      const form = page.getByRole('form', { name: 'Create notification target' });
      await form.getByLabel('Kind').selectOption('slack');
      await form.getByLabel('Target name').fill('Security channel');
      await form.getByLabel('Slack incoming webhook URL').fill(w.receiver.url('/services/T1/B1/dash'));
      await form.getByLabel('finding.created').check();
      await form.getByLabel(/^Severity filter/).fill('critical, high');
      await form.getByRole('button', { name: 'Create target' }).click();
      const row = page.getByTestId('target-Security channel');
      await row.waitFor();
      await row.getByText('(URL hidden)').waitFor();
      expect(await row.textContent()).not.toContain('/services/T1/B1/dash');
      await row.getByText('finding.created (critical, high)').waitFor();
    });

    await step('send-test', async () => {
      const row = page.getByTestId('target-Security channel');
      await row.getByRole('button', { name: 'Send test' }).click();
      await row.getByRole('status').filter({ hasText: 'Test message queued' }).waitFor();
      const [request] = await w.receiver.waitForRequests('/services/T1/B1/dash', 1);
      const body = JSON.parse(request.body.toString('utf8'));
      expect(body.text).toBe('Test notification from the Security Assessment Service');
      expect(body.blocks[2].elements[0].url).toBe(`${b.base}/`);
      // The attempt is recorded just after the receiver answers: reload until the page shows it.
      await b.w.waitForDelivery((await b.w.deliveriesOf(await targetId('Security channel')))[0].id);
      await page.reload();
      await row.getByTestId('last-sent').locator('time').waitFor();
      expect(await row.getByTestId('last-error').textContent()).toBe('—');
    });

    await step('manager-reads-only', async () => {
      page = await b.page();
      await b.logIn(w.org.manager.email, TEST_PASSWORD);
      await page.getByRole('link', { name: 'Notifications' }).click();
      const row = page.getByTestId('target-Security channel');
      await row.getByTestId('last-sent').locator('time').waitFor();
      expect(await page.getByRole('form', { name: 'Create notification target' }).count()).toBe(0);
      expect(await row.getByRole('button').count()).toBe(0);
    });

    await step('admin-again', async () => {
      page = await b.page();
      await b.logIn(w.org.admin.email, TEST_PASSWORD);
      await page.getByRole('link', { name: 'Notifications' }).click();
      await page.getByTestId('target-Security channel').waitFor();
    });

    await step('disable-and-revoke', async () => {
      const row = page.getByTestId('target-Security channel');
      await row.getByRole('button', { name: 'Disable' }).click();
      await row.getByText('disabled: disabled by a user').waitFor();
      await row.getByRole('button', { name: 'Revoke' }).click();
      await row.waitFor({ state: 'detached' });
    });
  });

  it('an e-mail target is edited in place; a member has no Notifications page', async () => {
    const { w, step } = b;
    await step('email-target', async () => {
      await b.logIn(w.org.admin.email, TEST_PASSWORD);
      await page.getByRole('link', { name: 'Notifications' }).click();
      const form = page.getByRole('form', { name: 'Create notification target' });
      await form.getByLabel('Kind').selectOption('email');
      await form.getByLabel('Target name').fill('Mailing list');
      await form.getByLabel(/^Recipients/).fill('sec@example.com, lead@example.com');
      await form.getByLabel('report.ready').check();
      await form.getByRole('button', { name: 'Create target' }).click();
      const row = page.getByTestId('target-Mailing list');
      await row.getByText('sec@example.com, lead@example.com').waitFor();
      await row.getByRole('button', { name: 'Edit' }).click();
      const edit = page.getByRole('form', { name: 'Edit Mailing list' });
      await edit.getByLabel(/^Recipients/).fill('sec@example.com');
      await edit.getByRole('button', { name: 'Save' }).click();
      await page.getByTestId('target-Mailing list').getByText('sec@example.com', { exact: true }).waitFor();
    });

    await step('member-has-no-page', async () => {
      page = await b.page();
      await b.logIn(w.org.member.email, TEST_PASSWORD);
      await page.getByRole('link', { name: 'Projects' }).waitFor();
      expect(await page.getByRole('link', { name: 'Notifications' }).count()).toBe(0);
    });
  });
});
