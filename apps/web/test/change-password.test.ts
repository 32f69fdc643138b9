// The Profile page's "Change password" form in Chromium: a signed-in person changes the password and is told the
// other sessions ended (a session opened elsewhere beforehand answers 401 from then on); the old password no longer
// signs in and the new one does. A confirmation that does not match sends nothing; a wrong current password (or a
// too short new one) shows the API's message and changes nothing; so does an account without a password (409), which
// once the page knows it (GET /auth/me has_password) sees no form at all, and turns 2FA on and off from a recent sign-in
// only. Turning 2FA off asks an account with a password for it, like turning it on.
import type { Locator, Page } from 'playwright-core';
import { bearer, createUserInOrg, TEST_PASSWORD, type TestUser } from '../../api/test/support/fixtures';
import { oathtoolCode, sessionIdOf } from '../../api/test/support/auth-helpers';
import { RECENT_SIGN_IN_WINDOW_MS } from '../../api/src/modules/auth/reauthentication';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';

const NEW_PASSWORD = 'a much longer new passphrase';

let b: BrowserWorld;
let page: Page;

beforeAll(async () => {
  b = await startBrowserWorld();
}, 60_000);
beforeEach(async () => {
  page = await b.page();
});
afterAll(() => b?.close());

/** The bodies the page posts to /auth/password (none must leave for a mismatched confirmation). */
function passwordPosts(p: Page): string[] {
  const posts: string[] = [];
  p.on('request', (r) => {
    if (r.method() === 'POST' && new URL(r.url()).pathname === '/api/v1/auth/password') posts.push(r.postData() ?? '');
  });
  return posts;
}

async function signInToProfile(user: TestUser, password: string): Promise<void> {
  await b.logIn(user.email, password);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Profile' }).click();
  await page.getByRole('heading', { name: 'Change password' }).waitFor();
}

async function fillChangeForm(current: string, next: string, confirmation: string): Promise<void> {
  const form = page.getByRole('form', { name: 'Change password' });
  await form.getByLabel('Current password').fill(current);
  await form.getByLabel('New password', { exact: true }).fill(next);
  await form.getByLabel('Confirm new password').fill(confirmation);
  await form.getByRole('button', { name: 'Change password' }).click();
}

/** Whether the login page signs `email` in with `password` (it lands on the signed-in dashboard) or refuses it. */
async function signsIn(email: string, password: string): Promise<boolean> {
  page = await b.page();
  await b.logIn(email, password);
  const signedIn = page.getByRole('link', { name: 'Profile' });
  const refused = page.getByRole('alert').filter({ hasText: 'Invalid e-mail or password.' });
  await signedIn.or(refused).first().waitFor();
  return signedIn.isVisible();
}

const apiSessionAlive = async (token: string) => (await b.w.api().get('/api/v1/auth/me').set(bearer(token))).status === 200;

describe('change password on the Profile page', () => {
  it('changes the password: other sessions end, the old password no longer signs in, the new one does', async () => {
    const { w, step } = b;
    // Its token is a session of its own, opened before the change (another device).
    const user = await createUserInOrg(w.h, w.org.id, 'member', 'pw-change');
    await step('open-profile', () => signInToProfile(user, TEST_PASSWORD));

    await step('form-fields', async () => {
      const form = page.getByRole('form', { name: 'Change password' });
      expect(await form.getByLabel('Current password').getAttribute('autocomplete')).toBe('current-password');
      expect(await form.getByLabel('New password', { exact: true }).getAttribute('autocomplete')).toBe('new-password');
      expect(await form.getByLabel('Confirm new password').getAttribute('autocomplete')).toBe('new-password');
      expect(await form.getByLabel('Current password').getAttribute('type')).toBe('password');
    });

    await step('change', async () => {
      await fillChangeForm(TEST_PASSWORD, NEW_PASSWORD, NEW_PASSWORD);
      await page.getByRole('status').filter({ hasText: 'Password changed. Your other sessions were signed out.' }).waitFor();
      // The form is emptied: nothing of either password stays on the page.
      expect(await page.getByLabel('Current password').inputValue()).toBe('');
      expect(await page.getByLabel('New password', { exact: true }).inputValue()).toBe('');
      expect(await page.getByLabel('Confirm new password').inputValue()).toBe('');
    });

    await step('this-session-stays-others-end', async () => {
      await page.reload();
      await page.getByRole('heading', { name: 'Change password' }).waitFor();
      expect(await apiSessionAlive(user.token)).toBe(false);
    });

    await step('old-password-refused', async () => expect(await signsIn(user.email, TEST_PASSWORD)).toBe(false));
    await step('new-password-signs-in', async () => expect(await signsIn(user.email, NEW_PASSWORD)).toBe(true));
  });

  it('a confirmation that does not match sends nothing and changes nothing', async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'member', 'pw-mismatch');
    await step('open-profile', () => signInToProfile(user, TEST_PASSWORD));
    const posts = passwordPosts(page);

    await step('mismatch', async () => {
      await fillChangeForm(TEST_PASSWORD, NEW_PASSWORD, `${NEW_PASSWORD}!`);
      await page.getByRole('alert').filter({ hasText: 'The new password and its confirmation do not match.' }).waitFor();
      expect(posts).toEqual([]);
      expect(await page.getByRole('status').filter({ hasText: 'Password changed' }).count()).toBe(0);
    });

    await step('nothing-changed', async () => {
      expect(await apiSessionAlive(user.token)).toBe(true);
      expect(await signsIn(user.email, TEST_PASSWORD)).toBe(true);
    });
  });

  it("a wrong current password shows the API's message and changes nothing", async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'member', 'pw-wrong');
    await step('open-profile', () => signInToProfile(user, TEST_PASSWORD));
    const posts = passwordPosts(page);

    await step('wrong-current', async () => {
      await fillChangeForm('not the current password', NEW_PASSWORD, NEW_PASSWORD);
      await page.getByRole('alert').filter({ hasText: 'The current password is not correct.' }).waitFor();
      expect(posts).toHaveLength(1);
      expect(await page.getByRole('status').filter({ hasText: 'Password changed' }).count()).toBe(0);
    });

    await step('too-short-new', async () => {
      await fillChangeForm(TEST_PASSWORD, 'short', 'short');
      await page.getByRole('alert').filter({ hasText: /new_password.*at least 10 characters/ }).waitFor();
    });

    await step('nothing-changed', async () => {
      expect(await apiSessionAlive(user.token)).toBe(true);
      expect(await signsIn(user.email, TEST_PASSWORD)).toBe(true);
    });
  });

  it('turning 2FA off asks for the current password: a wrong one turns nothing off, the right one does', async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'member', 'pw-2fa-off');
    await step('open-profile', () => signInToProfile(user, TEST_PASSWORD));
    let secret = '';
    await step('enable-2fa', async () => {
      await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
      secret = (await page.getByTestId('totp-secret').textContent()) ?? '';
      const form = page.getByRole('form', { name: 'Enable two-factor authentication' });
      await form.getByLabel('Code from the app').fill(oathtoolCode(secret, new Date()));
      await form.getByLabel('Current password').fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Enable' }).click();
      await page.getByText('Two-factor authentication is on.').waitFor();
    });

    const form = page.getByRole('form', { name: 'Disable two-factor authentication' });
    await step('wrong-password-turns-nothing-off', async () => {
      expect(await form.getByLabel('Current password').getAttribute('type')).toBe('password');
      expect(await form.getByLabel('Current password').getAttribute('autocomplete')).toBe('current-password');
      // The next time step: the enabling code's step is spent.
      await form.getByLabel('Code to disable').fill(oathtoolCode(secret, new Date(Date.now() + 30_000)));
      await form.getByLabel('Current password').fill('not the current password');
      await form.getByRole('button', { name: 'Disable two-factor authentication' }).click();
      await page.getByRole('alert').filter({ hasText: 'The current password is not correct.' }).waitFor();
      expect(await form.getByLabel('Current password').inputValue()).toBe('');
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpEnabled).toBe(true);
      await page.getByText('Two-factor authentication is on.').waitFor();
    });

    await step('right-password-turns-2fa-off', async () => {
      await form.getByLabel('Current password').fill(TEST_PASSWORD);
      await form.getByRole('button', { name: 'Disable two-factor authentication' }).click();
      await page.getByText('Two-factor authentication is off.').waitFor();
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpEnabled).toBe(false);
    });
  });

  it('an account without a password (GitHub or Google sign-in) is told so by the API, then sees no form; its 2FA needs a recent sign-in', async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'member', 'pw-oauth');
    await step('open-profile', () => signInToProfile(user, TEST_PASSWORD));
    // As an account a provider sign-in activated: no password any more (docs/api.md), the session still valid.
    await w.h.deps.prisma.user.update({ where: { id: user.id }, data: { passwordHash: null } });

    await step('conflict-detail', async () => {
      await fillChangeForm(TEST_PASSWORD, NEW_PASSWORD, NEW_PASSWORD);
      await page.getByRole('alert').filter({ hasText: 'This account has no password: it signs in with GitHub or Google.' }).waitFor();
      await page.getByRole('heading', { name: 'Change password' }).waitFor();
    });

    await step('no-form-once-known', async () => {
      await page.reload();
      await page.getByText('Your account signs in with GitHub or Google: it has no password to change.').waitFor();
      // The way to get one: a reset link by e-mail (the API lets an account without a password set one this way).
      expect(await page.getByRole('link', { name: 'set one by e-mail' }).getAttribute('href')).toBe('/forgot-password');
      expect(await page.getByRole('heading', { name: 'Change password' }).count()).toBe(0);
      expect(await page.getByRole('form', { name: 'Change password' }).count()).toBe(0);
      expect(await page.getByLabel('Current password').count()).toBe(0);
    });

    const session = async () => sessionIdOf((await page.context().cookies()).find((c) => c.name === 'session')!.value);
    const signedInAt = async (at: Date) => w.h.deps.prisma.session.update({ where: { id: await session() }, data: { createdAt: at } });
    const enableForm = () => page.getByRole('form', { name: 'Enable two-factor authentication' });

    const signInAgainLink = (within: Locator | Page) => within.getByRole('link', { name: 'Sign in again' });

    await step('2fa-setup-old-sign-in-asked-to-sign-in-again', async () => {
      // The page's session was signed in longer ago than the window: no password to ask for, so the API asks for a
      // new sign-in before it hands out a secret (a stolen older session must not replace the one the owner turns on).
      await signedInAt(new Date(Date.now() - RECENT_SIGN_IN_WINDOW_MS - 60_000));
      await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
      await page.getByRole('alert').filter({ hasText: /sign in again/ }).waitFor();
      expect(await signInAgainLink(page).getAttribute('href')).toBe('/login?next=%2Fprofile');
      expect(await enableForm().count()).toBe(0);
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpPendingEnc).toBeNull();
    });

    let secret = '';
    await step('2fa-enable-old-sign-in-asked-to-sign-in-again', async () => {
      // Set up from a recent sign-in, but the session ages past the window before the code is typed.
      await signedInAt(new Date());
      await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
      secret = (await page.getByTestId('totp-secret').textContent()) ?? '';
      expect(await enableForm().getByLabel('Current password').count()).toBe(0);
      await signedInAt(new Date(Date.now() - RECENT_SIGN_IN_WINDOW_MS - 60_000));
      await enableForm().getByLabel('Code from the app').fill(oathtoolCode(secret, new Date()));
      await enableForm().getByRole('button', { name: 'Enable' }).click();
      await page.getByRole('alert').filter({ hasText: /sign in again/ }).waitFor();
      expect(await signInAgainLink(enableForm()).getAttribute('href')).toBe('/login?next=%2Fprofile');
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpEnabled).toBe(false);
      await page.getByText('Two-factor authentication is off.').waitFor();
    });

    await step('2fa-recent-sign-in-enables', async () => {
      // As a new sign-in (with GitHub or Google) leaves it: the same form now turns 2FA on.
      await signedInAt(new Date());
      await enableForm().getByRole('button', { name: 'Enable' }).click();
      await page.getByText('Two-factor authentication is on.').waitFor();
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpEnabled).toBe(true);
    });

    const disableForm = page.getByRole('form', { name: 'Disable two-factor authentication' });
    await step('2fa-disable-old-sign-in-asked-to-sign-in-again', async () => {
      // Turning 2FA off needs a recent sign-in too: a stolen older session must not.
      expect(await disableForm.getByLabel('Current password').count()).toBe(0);
      await signedInAt(new Date(Date.now() - RECENT_SIGN_IN_WINDOW_MS - 60_000));
      // The next time step: the enabling code's step is spent.
      await disableForm.getByLabel('Code to disable').fill(oathtoolCode(secret, new Date(Date.now() + 30_000)));
      await disableForm.getByRole('button', { name: 'Disable two-factor authentication' }).click();
      await page.getByRole('alert').filter({ hasText: /sign in again/ }).waitFor();
      expect(await signInAgainLink(disableForm).getAttribute('href')).toBe('/login?next=%2Fprofile');
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpEnabled).toBe(true);
      await page.getByText('Two-factor authentication is on.').waitFor();
    });

    await step('2fa-recent-sign-in-disables', async () => {
      await signedInAt(new Date());
      await disableForm.getByRole('button', { name: 'Disable two-factor authentication' }).click();
      await page.getByText('Two-factor authentication is off.').waitFor();
      expect((await w.h.deps.prisma.user.findUniqueOrThrow({ where: { id: user.id } })).totpEnabled).toBe(false);
    });
  });
});
