// Sudo mode in the dashboard (docs/api.md, "Sensitive changes"), in Chromium: a person whose sign-in is more than
// 10 minutes old creates an API key, invites someone, raises a role or transfers ownership; the page sends the change as it is, and only when the
// API asks does it show "Confirm with your password" (an account without a password: a Sign in again link). A wrong
// password shows the API's message; the right one makes the change. The password is in no URL and is cleared.
import type { Page } from 'playwright-core';
import { createOrg, createUserInOrg, TEST_PASSWORD, type TestUser } from '../../api/test/support/fixtures';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';
import { requestsTo, signedInAWhileAgo } from './support/sudo';

let b: BrowserWorld;
let page: Page;

beforeAll(async () => {
  b = await startBrowserWorld();
}, 60_000);
beforeEach(async () => {
  page = await b.page();
});
afterAll(() => b?.close());

async function openApiKeys(user: TestUser): Promise<void> {
  await b.logIn(user.email, TEST_PASSWORD);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
  await page.getByRole('form', { name: 'Create an API key' }).waitFor();
}

async function fillKey(name: string): Promise<void> {
  const form = page.getByRole('form', { name: 'Create an API key' });
  await form.getByLabel('Key name').fill(name);
  await form.getByLabel('projects:read', { exact: true }).check();
}

const keysOf = (user: TestUser) => b.w.h.deps.prisma.apiKey.count({ where: { userId: user.id } });
const roleIn = async (organizationId: string, user: TestUser) =>
  (await b.w.h.deps.prisma.membership.findFirstOrThrow({ where: { organizationId, userId: user.id } })).role;

/** Signs `user` in and opens the Members page, waiting for `listed`'s row. */
async function openMembers(user: TestUser, listed: TestUser): Promise<void> {
  await b.logIn(user.email, TEST_PASSWORD);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Members' }).click();
  await page.getByRole('cell', { name: listed.email }).waitFor();
}

describe('creating an API key from an older sign-in', () => {
  it('asks for the password only once the API does; a wrong one is refused, the right one creates the key', async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'manager', 'sudo-key');
    const posts = requestsTo(page, '/api/v1/api-keys');
    await step('open', () => openApiKeys(user));
    const form = page.getByRole('form', { name: 'Create an API key' });
    const passwordField = form.getByLabel('Confirm with your password');

    await step('recent-sign-in-no-password', async () => {
      // Signed in just now: no prompt, the key is created at once.
      expect(await passwordField.count()).toBe(0);
      await fillKey('fresh');
      await form.getByRole('button', { name: 'Create key' }).click();
      await page.getByText('It is shown only once').waitFor();
      expect(await keysOf(user)).toBe(1);
    });

    await step('older-sign-in-asked', async () => {
      await signedInAWhileAgo(b, page);
      await fillKey('later');
      await form.getByRole('button', { name: 'Create key' }).click();
      await passwordField.waitFor();
      await form.getByText('You signed in more than 10 minutes ago: confirm with your password to create this key.').waitFor();
      // The API's text for clients is not shown as an error; nothing was created.
      expect(await page.getByRole('alert').filter({ hasText: 'current_password' }).count()).toBe(0);
      expect(await keysOf(user)).toBe(1);
      expect(await passwordField.getAttribute('type')).toBe('password');
      expect(await passwordField.getAttribute('autocomplete')).toBe('current-password');
    });

    await step('wrong-password', async () => {
      await passwordField.fill('not the password at all');
      await form.getByRole('button', { name: 'Create key' }).click();
      await form.getByRole('alert').filter({ hasText: 'The current password is not correct.' }).waitFor();
      expect(await passwordField.inputValue()).toBe('');
      expect(await keysOf(user)).toBe(1);
    });

    await step('right-password', async () => {
      await passwordField.fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('cell', { name: 'later', exact: true }).waitFor();
      expect(await keysOf(user)).toBe(2);
      expect(await passwordField.count()).toBe(0);
    });

    // Four posts: the recent one and the asked one without the password, then the wrong and the right one with it.
    const sent = posts.filter((r) => r.method() === 'POST').map((r) => JSON.parse(r.postData() ?? '{}') as Record<string, unknown>);
    expect(sent.map((body) => body.current_password)).toEqual([undefined, undefined, 'not the password at all', TEST_PASSWORD]);
    expect(posts.every((r) => !r.url().includes(encodeURIComponent(TEST_PASSWORD)) && !r.url().includes('password'))).toBe(true);
  });

  it('an account without a password is shown Sign in again, and the key is not created', async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'manager', 'sudo-oauth');
    await step('open', () => openApiKeys(user));
    // The account loses its password (as one made by GitHub sign-in has none); the page learns it from /auth/me.
    await w.h.deps.prisma.user.update({ where: { id: user.id }, data: { passwordHash: null } });
    await page.reload();
    const form = page.getByRole('form', { name: 'Create an API key' });
    await form.waitFor();
    await signedInAWhileAgo(b, page);
    await step('asked-to-sign-in-again', async () => {
      await fillKey('oauth');
      await form.getByRole('button', { name: 'Create key' }).click();
      const link = form.getByRole('link', { name: 'Sign in again' });
      await link.waitFor();
      expect(await link.getAttribute('href')).toBe('/login?next=%2Fsettings%2Fapi-keys');
      expect(await form.getByLabel('Confirm with your password').count()).toBe(0);
      expect(await form.getByRole('button', { name: 'Create key' }).isDisabled()).toBe(true);
      expect(await keysOf(user)).toBe(0);
    });
  });
});

describe('transferring ownership from an older sign-in', () => {
  it('asks for the password in a confirmation form; with it, the other member becomes the owner', async () => {
    const { w, step } = b;
    const org = await createOrg(w.h);
    const roleOf = (user: TestUser) => roleIn(org.id, user);
    await step('open-members', () => openMembers(org.owner, org.admin));
    const confirm = page.getByRole('form', { name: 'Confirm the ownership transfer' });

    await step('asked', async () => {
      await signedInAWhileAgo(b, page);
      await page.getByRole('row').filter({ hasText: org.admin.email }).getByRole('button', { name: 'Transfer ownership' }).click();
      await confirm.getByLabel('Confirm with your password').waitFor();
      await confirm.getByText(`confirm with your password to make ${org.admin.email} the owner`).waitFor();
      expect([await roleOf(org.owner), await roleOf(org.admin)]).toEqual(['owner', 'admin']);
    });

    await step('cancel-then-again', async () => {
      await confirm.getByRole('button', { name: 'Cancel' }).click();
      expect(await confirm.count()).toBe(0);
      await page.getByRole('row').filter({ hasText: org.admin.email }).getByRole('button', { name: 'Transfer ownership' }).click();
      await confirm.getByLabel('Confirm with your password').waitFor();
    });

    await step('confirmed', async () => {
      await confirm.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await confirm.getByRole('button', { name: `Transfer ownership to ${org.admin.email}` }).click();
      await confirm.waitFor({ state: 'detached' });
      expect([await roleOf(org.owner), await roleOf(org.admin)]).toEqual(['admin', 'owner']);
    });
  });
});

describe('inviting and raising roles from an older sign-in', () => {
  it('the invitation form asks for the password once the API does, then sends the invitation with it', async () => {
    const { w, step } = b;
    const org = await createOrg(w.h);
    const invitee = `sudo-invitee-${Date.now()}@example.test`;
    await step('open-members', async () => {
      await b.logIn(org.admin.email, TEST_PASSWORD);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Members' }).click();
      await page.getByRole('form', { name: 'Invite a member' }).waitFor();
    });
    const form = page.getByRole('form', { name: 'Invite a member' });
    await step('asked', async () => {
      await signedInAWhileAgo(b, page);
      await form.getByLabel('E-mail to invite').fill(invitee);
      await form.getByRole('button', { name: 'Send invitation' }).click();
      await form.getByText('confirm with your password to send this invitation').waitFor();
      expect(await w.h.deps.prisma.invitation.count({ where: { organizationId: org.id } })).toBe(0);
    });
    await step('sent-with-password', async () => {
      await form.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Send invitation' }).click();
      await page.getByText(`${invitee} (member)`).waitFor();
      expect(await w.h.deps.prisma.invitation.count({ where: { organizationId: org.id, email: invitee } })).toBe(1);
      expect(await form.getByLabel('Confirm with your password').count()).toBe(0);
    });
  });

  it('raising a role waits in a confirmation form for the password; lowering one happens at once', async () => {
    const { w, step } = b;
    const org = await createOrg(w.h);
    const roleOf = (user: TestUser) => roleIn(org.id, user);
    await step('open-members', () => openMembers(org.owner, org.member));
    await signedInAWhileAgo(b, page);
    const confirm = page.getByRole('form', { name: 'Confirm the role change' });
    await step('lowering-at-once', async () => {
      await page.getByLabel(`Role of ${org.admin.email}`).selectOption('member');
      // No password asked: the change goes straight through (polled: the select does not wait for the answer).
      for (let i = 0; i < 100 && (await roleOf(org.admin)) !== 'member'; i++) await new Promise((r) => setTimeout(r, 50));
      expect(await roleOf(org.admin)).toBe('member');
      expect(await confirm.count()).toBe(0);
    });
    await step('raising-asked', async () => {
      await page.getByLabel(`Role of ${org.member.email}`).selectOption('admin');
      await confirm.getByText(`confirm with your password to make ${org.member.email} an admin`).waitFor();
      expect(await roleOf(org.member)).toBe('member');
    });
    await step('raised-with-password', async () => {
      await confirm.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await confirm.getByRole('button', { name: `Make ${org.member.email} admin` }).click();
      await confirm.waitFor({ state: 'detached' });
      expect(await roleOf(org.member)).toBe('admin');
    });
  });
});

describe('webhooks from an older sign-in', () => {
  it('creating a subscription asks for the password in its form; rotating its secret and enabling it again in a confirmation form', async () => {
    const { w, step } = b;
    const admin = await createUserInOrg(w.h, w.org.id, 'admin', 'sudo-hooks');
    await step('open-webhooks', async () => {
      await b.logIn(admin.email, TEST_PASSWORD);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Webhooks' }).click();
      await page.getByRole('heading', { name: 'Organization webhooks' }).waitFor();
    });
    const form = page.getByRole('form', { name: 'Create subscription' });
    await signedInAWhileAgo(b, page);
    await step('create-asked', async () => {
      await form.getByLabel('Subscription name').fill('sudo receiver');
      await form.getByLabel('Endpoint URL (https)').fill(w.receiver.url('/sudo'));
      await form.getByLabel('finding.created', { exact: true }).check();
      await form.getByRole('button', { name: 'Create subscription' }).click();
      await form.getByText('confirm with your password to create this subscription').waitFor();
      expect(await w.h.deps.prisma.webhookSubscription.count({ where: { name: 'sudo receiver' } })).toBe(0);
    });
    await step('created-with-password', async () => {
      await form.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Create subscription' }).click();
      await page.getByText('It is shown only once').waitFor();
      await page.getByRole('cell', { name: 'sudo receiver' }).waitFor();
    });
    const confirm = page.getByRole('form', { name: 'Confirm the secret rotation' });
    await step('rotate-asked', async () => {
      await page.getByRole('link', { name: 'sudo receiver' }).first().click();
      await page.getByRole('heading', { name: 'Subscription sudo receiver' }).waitFor();
      await page.getByRole('button', { name: 'Rotate secret' }).click();
      await confirm.getByText('confirm with your password to rotate the signing secret').waitFor();
      expect(await page.getByText('New signing secret').count()).toBe(0);
    });
    await step('rotated-with-password', async () => {
      await confirm.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await confirm.getByRole('button', { name: 'Rotate the secret' }).click();
      await page.getByText('New signing secret').waitFor();
      expect(await confirm.count()).toBe(0);
    });
    const status = async () => (await w.h.deps.prisma.webhookSubscription.findFirstOrThrow({ where: { name: 'sudo receiver' } })).status;
    const enabling = page.getByRole('form', { name: 'Confirm enabling the subscription' });
    await step('disable-at-once-enable-asked', async () => {
      await page.getByRole('button', { name: 'Disable' }).click();
      await page.getByRole('button', { name: 'Enable' }).waitFor();
      expect(await status()).toBe('disabled');
      await page.getByRole('button', { name: 'Enable' }).click();
      await enabling.getByText('confirm with your password to send its events again').waitFor();
      expect(await status()).toBe('disabled');
    });
    await step('enabled-with-password', async () => {
      await enabling.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await enabling.getByRole('button', { name: 'Enable the subscription' }).click();
      await page.getByRole('button', { name: 'Disable' }).waitFor();
      expect(await status()).toBe('active');
    });
  });
});
