// Sudo mode on the notification targets page (docs/api.md, "Sensitive changes"), in Chromium: a person whose
// sign-in is more than 10 minutes old creates an e-mail target, adds a recipient and enables a disabled target. The
// page sends each change as it is; only when the API asks does it show "Confirm with your password", and the same
// change then goes through with it. Removing a recipient and disabling happen at once.
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

const NAME = 'sudo mailing list';
const target = () => b.w.h.deps.prisma.webhookSubscription.findFirst({ where: { organizationId: b.w.org.id, name: NAME, deletedAt: null } });

describe('notification targets from an older sign-in', () => {
  it('creating, adding a recipient and enabling again ask for the password; with it each change is made', async () => {
    const { w, step } = b;
    const admin = await createUserInOrg(w.h, w.org.id, 'admin', 'sudo-targets');
    const sent: Request[] = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/api/v1/notification-targets') && ['POST', 'PATCH'].includes(r.method())) sent.push(r);
    });
    await step('open', async () => {
      await b.logIn(admin.email, TEST_PASSWORD);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Notifications' }).click();
      await page.getByRole('heading', { name: 'Notification targets' }).waitFor();
    });
    await signedInAWhileAgo(b, page);

    const form = page.getByRole('form', { name: 'Create notification target' });
    await step('create-asked', async () => {
      await form.getByLabel('Kind').selectOption('email');
      await form.getByLabel('Target name').fill(NAME);
      await form.getByLabel(/^Recipients/).fill('sec@example.com, lead@example.com');
      await form.getByLabel('report.ready').check();
      await form.getByRole('button', { name: 'Create target' }).click();
      await form.getByText('You signed in more than 10 minutes ago: confirm with your password to create this target.').waitFor();
      // The API's text for clients is not shown as an error; nothing was created.
      expect(await page.getByRole('alert').filter({ hasText: 'current_password' }).count()).toBe(0);
      expect(await target()).toBeNull();
    });
    const row = page.getByTestId(`target-${NAME}`);
    await step('created-with-password', async () => {
      await form.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Create target' }).click();
      await row.getByText('sec@example.com, lead@example.com').waitFor();
      expect(await form.getByLabel('Confirm with your password').count()).toBe(0);
    });

    const edit = page.getByRole('form', { name: `Edit ${NAME}` });
    await step('removing-a-recipient-at-once', async () => {
      await row.getByRole('button', { name: 'Edit' }).click();
      await edit.getByLabel(/^Recipients/).fill('sec@example.com');
      await edit.getByRole('button', { name: 'Save' }).click();
      await row.getByText('sec@example.com', { exact: true }).waitFor();
    });
    await step('adding-a-recipient-asked', async () => {
      await row.getByRole('button', { name: 'Edit' }).click();
      await edit.getByLabel(/^Recipients/).fill('sec@example.com, new@example.com');
      await edit.getByRole('button', { name: 'Save' }).click();
      await edit.getByText('confirm with your password to send its messages to the new address').waitFor();
      expect((await target())!.emailRecipients).toEqual(['sec@example.com']);
      await edit.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await edit.getByRole('button', { name: 'Save' }).click();
      await row.getByText('sec@example.com, new@example.com').waitFor();
      expect((await target())!.emailRecipients).toEqual(['sec@example.com', 'new@example.com']);
    });

    const enabling = page.getByRole('form', { name: `Confirm enabling ${NAME}` });
    await step('disable-at-once-enable-asked', async () => {
      await row.getByRole('button', { name: 'Disable' }).click();
      await row.getByText('disabled: disabled by a user').waitFor();
      await row.getByRole('button', { name: 'Enable' }).click();
      await enabling.getByText('confirm with your password to send its messages again').waitFor();
      expect((await target())!.status).toBe('disabled');
    });
    await step('enabled-with-password', async () => {
      await enabling.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await enabling.getByRole('button', { name: 'Enable the target' }).click();
      await row.getByRole('button', { name: 'Disable' }).waitFor();
      expect((await target())!.status).toBe('active');
      expect(await enabling.count()).toBe(0);
    });

    // The password went only in the bodies of the changes sent after the API asked, never in a URL.
    const passwords = sent.map((r) => (JSON.parse(r.postData() ?? '{}') as { current_password?: string }).current_password);
    expect(passwords).toEqual([undefined, TEST_PASSWORD, undefined, undefined, TEST_PASSWORD, undefined, undefined, TEST_PASSWORD]);
    expect(sent.every((r) => !r.url().includes('password'))).toBe(true);
  });
});
