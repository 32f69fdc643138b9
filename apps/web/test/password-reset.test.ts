// A forgotten password in Chromium: "Forgot password?" on the login page, the e-mail form (the same neutral message
// for an address with an account and one without), the link read from the mail outbox as the person would open it,
// the new password set on /reset-password (with a code from the authenticator when the account has 2FA on), and the
// way back to the login page, where the new password signs in and the old one no longer does. The token travels in
// the link's fragment: no request the browser makes carries it in its URL or Referer, and the page drops it from the
// address bar.
import type { Page, Request } from 'playwright-core';
import { bearer, createUserInOrg, TEST_PASSWORD, type TestUser } from '../../api/test/support/fixtures';
import { oathtoolCode, resetLinkFor, wrongCode } from '../../api/test/support/auth-helpers';
import { uniqueSuffix } from '../../api/test/support/harness';
import { enableTotp } from '../../api/test/support/oauth-flow';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';

const NEW_PASSWORD = 'a freshly chosen passphrase';
const STEP_MS = 30_000;

let b: BrowserWorld;
let page: Page;

beforeAll(async () => {
  b = await startBrowserWorld();
}, 60_000);
beforeEach(async () => {
  page = await b.page();
});
afterAll(() => b?.close());

const apiSessionAlive = async (token: string) => (await b.w.api().get('/api/v1/auth/me').set(bearer(token))).status === 200;

/** Every request the page makes, to check where the token went. */
function requestsOf(p: Page): Request[] {
  const seen: Request[] = [];
  p.on('request', (r) => seen.push(r));
  return seen;
}

/** From the login page, "Forgot password?", then the e-mail form; returns the message the page shows. */
async function askForLink(email: string): Promise<string> {
  await page.goto(`${b.base}/login`);
  await page.getByRole('link', { name: 'Forgot password?' }).click();
  const form = page.getByRole('form', { name: 'Forgot password' });
  await form.getByLabel('E-mail').fill(email);
  await form.getByRole('button', { name: 'Send reset link' }).click();
  const status = page.getByRole('status');
  await status.waitFor();
  return (await status.textContent()) ?? '';
}

async function fillNewPassword(password: string, confirmation = password): Promise<void> {
  const form = page.getByRole('form', { name: 'Reset password' });
  await form.getByLabel('New password', { exact: true }).fill(password);
  await form.getByLabel('Confirm new password').fill(confirmation);
}

const submitReset = () => page.getByRole('form', { name: 'Reset password' }).getByRole('button', { name: 'Set new password' }).click();

/** Whether the login page signs `email` in with `password` (the signed-in dashboard), asks for a code, or refuses. */
async function signIn(email: string, password: string): Promise<'signed-in' | 'totp' | 'refused'> {
  page = await b.page();
  await b.logIn(email, password);
  const signedIn = page.getByRole('link', { name: 'Profile' });
  const totp = page.getByRole('heading', { name: 'Two-factor authentication' });
  const refused = page.getByRole('alert').filter({ hasText: 'Invalid e-mail or password.' });
  await signedIn.or(totp).or(refused).first().waitFor();
  if (await signedIn.isVisible()) return 'signed-in';
  return (await totp.isVisible()) ? 'totp' : 'refused';
}

describe('forgotten password in the dashboard', () => {
  it('asks for a link, opens it from the mail, sets a new password, and signs in with it; every session ended', async () => {
    const { w, step } = b;
    // Its token is a session of its own, opened before the reset (another device).
    const user: TestUser = await createUserInOrg(w.h, w.org.id, 'member', 'pw-reset');
    const unknown = `nobody-${uniqueSuffix()}@example.test`;

    await step('neutral-message', async () => {
      const forUser = await askForLink(user.email);
      expect(forUser).toContain(`If an account with the address ${user.email} exists, we sent it a link to reset the password.`);
      page = await b.page();
      const forNobody = await askForLink(unknown);
      expect(forNobody.replace(unknown, '<address>')).toBe(forUser.replace(user.email, '<address>'));
    });

    const { link, token } = await resetLinkFor(w.h, user.email);
    expect(link).toBe(`${b.base}/reset-password#token=${token}`);
    expect(w.h.mail().filter((m) => m.to === unknown)).toEqual([]);

    page = await b.page();
    const requests = requestsOf(page);
    await step('open-link', async () => {
      await page.goto(link);
      await page.getByRole('heading', { name: 'Reset password' }).waitFor();
      // The fragment is gone from the address bar, and no request so far carried the token.
      await page.waitForFunction('window.location.hash === ""');
      expect(page.url()).toBe(`${b.base}/reset-password`);
      expect(await page.getByLabel('Authentication code').count()).toBe(0);
    });

    await step('mismatch-sends-nothing', async () => {
      await fillNewPassword(NEW_PASSWORD, `${NEW_PASSWORD}!`);
      await submitReset();
      await page.getByRole('alert').filter({ hasText: 'The new password and its confirmation do not match.' }).waitFor();
      expect(requests.filter((r) => r.method() === 'POST')).toEqual([]);
    });

    await step('reset', async () => {
      await fillNewPassword(NEW_PASSWORD);
      await submitReset();
      await page.getByRole('heading', { name: 'Log in' }).waitFor();
      await page.getByRole('status').filter({ hasText: 'Your password was reset' }).waitFor();
    });

    await step('token-only-in-the-confirmation-body', async () => {
      const confirmations = requests.filter((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/api/v1/auth/password-reset/confirm');
      expect(confirmations).toHaveLength(1);
      expect(JSON.parse(confirmations[0]!.postData() ?? '{}')).toEqual({ token, new_password: NEW_PASSWORD });
      for (const r of requests) {
        expect(r.url().split('#')[0]).not.toContain(token);
        expect((await r.allHeaders())['referer'] ?? '').not.toContain(token);
      }
    });

    await step('sessions-ended', async () => expect(await apiSessionAlive(user.token)).toBe(false));
    await step('old-password-refused', async () => expect(await signIn(user.email, TEST_PASSWORD)).toBe('refused'));
    await step('new-password-signs-in', async () => expect(await signIn(user.email, NEW_PASSWORD)).toBe('signed-in'));

    await step('link-spent', async () => {
      page = await b.page();
      await page.goto(link);
      await fillNewPassword(`${NEW_PASSWORD} again`);
      await submitReset();
      await page.getByRole('alert').filter({ hasText: 'Invalid, expired or already used password-reset link: ask for a new one.' }).waitFor();
      await page.getByRole('link', { name: 'Ask for a new link' }).waitFor();
    });
  });

  it('an account with 2FA on is asked for a code after the first try; a wrong code is refused, a current one resets', async () => {
    const { w, step } = b;
    const user = await createUserInOrg(w.h, w.org.id, 'member', 'pw-reset-2fa');
    const secret = await enableTotp(w.h, user.token, TEST_PASSWORD);

    await step('ask', () => askForLink(user.email));
    const { link } = await resetLinkFor(w.h, user.email);
    page = await b.page();
    await page.goto(link);

    await step('asked-for-code', async () => {
      await fillNewPassword(NEW_PASSWORD);
      await submitReset();
      await page.getByRole('alert').filter({ hasText: 'Your account has two-factor authentication on' }).waitFor();
      await page.getByLabel('Authentication code').waitFor();
    });

    await step('wrong-code', async () => {
      await page.getByLabel('Authentication code').fill(wrongCode(secret, w.h.clock.now()));
      await submitReset();
      await page.getByRole('alert').filter({ hasText: 'Invalid two-factor code.' }).waitFor();
      expect(await apiSessionAlive(user.token)).toBe(true);
    });

    await step('current-code', async () => {
      // The next time step: the enabling code's step is spent (replay protection).
      await page.getByLabel('Authentication code').fill(oathtoolCode(secret, new Date(w.h.clock.now().getTime() + STEP_MS)));
      await submitReset();
      await page.getByRole('status').filter({ hasText: 'Your password was reset' }).waitFor();
    });

    await step('still-2fa', async () => {
      expect(await apiSessionAlive(user.token)).toBe(false);
      expect(await signIn(user.email, NEW_PASSWORD)).toBe('totp');
    });
  });

  it('without the link (no fragment, or a made-up token) the page says so and offers a new link', async () => {
    const { step } = b;
    await step('no-fragment', async () => {
      await page.goto(`${b.base}/reset-password`);
      await page.getByRole('alert').filter({ hasText: 'This page needs the link from the password-reset e-mail.' }).waitFor();
      await page.getByRole('link', { name: 'Ask for a new link' }).click();
      await page.getByRole('heading', { name: 'Forgot password' }).waitFor();
    });
    await step('made-up-token', async () => {
      await page.goto(`${b.base}/reset-password#token=${'A'.repeat(43)}`);
      await fillNewPassword(NEW_PASSWORD);
      await submitReset();
      await page.getByRole('alert').filter({ hasText: 'Invalid, expired or already used password-reset link' }).waitFor();
    });
  });
});
