// The login page in Chromium while someone floods the sign-ins of the person's e-mail with wrong passwords: the
// browser the person signed in with before keeps its own count (the login_device cookie) and signs in; a browser
// that never signed in with that e-mail is refused with the rate limit's message, like the flood.
import type { Page } from 'playwright-core';
import { createUserInOrg, TEST_PASSWORD } from '../../api/test/support/fixtures';
import { logIn } from './support/browser';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';

let b: BrowserWorld;

beforeAll(async () => {
  b = await startBrowserWorld({ env: { LOGIN_RATE_LIMIT_PER_MINUTE: '3', TRUST_PROXY: 'true' } });
}, 60_000);
afterAll(() => b?.close());

/** Waits for the page to land signed in (true) or to show an alert (false). */
async function signedIn(page: Page): Promise<boolean> {
  const profile = page.getByRole('link', { name: 'Profile' });
  await profile.or(page.getByRole('alert')).first().waitFor();
  return profile.isVisible();
}

it("signs the person in from the browser they used before while their e-mail's sign-ins are flooded; a new browser is refused", async () => {
  const user = await createUserInOrg(b.w.h, b.w.org.id, 'member', 'flooded');
  const known = await b.step('first-sign-in', async () => {
    const page = await b.page();
    await logIn(page, b.base, user.email, TEST_PASSWORD);
    expect(await signedIn(page)).toBe(true);
    const cookie = (await page.context().cookies(`${b.base}/api/v1/auth/login`)).find((c) => c.name === 'login_device');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/api/v1/auth/login' });
    // Script on the page never sees it.
    expect(await page.evaluate('document.cookie')).not.toContain('login_device');
    return page.context();
  });

  await b.step('flood', async () => {
    let status = 0;
    for (let i = 0; i < 10 && status !== 429; i++) {
      const res = await b.w
        .api()
        .post('/api/v1/auth/login')
        .set('X-Forwarded-For', `203.0.113.${i + 1}`)
        .send({ email: user.email, password: `a wrong guess ${i}` });
      status = res.status;
    }
    expect(status).toBe(429);
  });

  await b.step('known-browser-signs-in', async () => {
    const page = await known.newPage();
    await logIn(page, b.base, user.email, TEST_PASSWORD);
    expect(await signedIn(page)).toBe(true);
  });

  await b.step('new-browser-refused', async () => {
    const page = await b.page();
    await logIn(page, b.base, user.email, TEST_PASSWORD);
    expect(await signedIn(page)).toBe(false);
    await page.getByRole('alert').filter({ hasText: 'Rate limit exceeded' }).waitFor();
  });
}, 90_000); // four sign-ins in two browsers and a flood: 17 s alone, past 30 s in the full suite on 2 cores
