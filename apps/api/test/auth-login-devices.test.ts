// Sign-in from a browser that signed in before (OWASP "device cookies"): a flood of sign-ins for an e-mail, from
// anywhere, must not lock its owner out. A successful sign-in leaves an httpOnly `login_device` cookie naming that
// e-mail; a sign-in that brings it back is counted on its own, apart from the e-mail's other sign-ins. Confirming a
// change with the current password is counted per session, apart from both.
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer } from './support/fixtures';
import { loginViaApi, oathtoolCode, setCookies, signupAndVerify, type SignedUp } from './support/auth-helpers';

const LIMIT = 3;
let h: Harness;

beforeAll(async () => {
  // TRUST_PROXY lets the test pose as several client addresses through X-Forwarded-For.
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: String(LIMIT), TRUST_PROXY: 'true' });
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

let nextAddress = 1;
/** A client address of its own for each attempt, so that only the e-mail's and the device's counts are in play. */
const freshAddress = () => `198.18.${Math.floor(nextAddress / 250)}.${(nextAddress++ % 250) + 1}`;

const signIn = (email: string, password: string, device?: string) => {
  const req = request(h.app).post('/api/v1/auth/login').set('X-Forwarded-For', freshAddress());
  if (device !== undefined) req.set('Cookie', `login_device=${encodeURIComponent(device)}`);
  return req.send({ email, password });
};

/** Wrong passwords for `email` from other clients (no device cookie) until the e-mail's count is spent. */
async function flood(email: string): Promise<void> {
  for (let i = 0; i <= LIMIT; i++) {
    const res = await signIn(email, `wrong guess ${i}`);
    if (res.status === 429) return;
    expect(res.status).toBe(401);
  }
  throw new Error("the e-mail's count was never spent");
}

/** Signs in (no 2FA) and returns the device cookie the answer set. */
async function deviceOf(account: SignedUp): Promise<string> {
  const res = await signIn(account.email, account.password);
  expect(res.status).toBe(200);
  const cookie = setCookies(res).get('login_device');
  expect(cookie).toBeDefined();
  return cookie!.value;
}

describe('the login_device cookie', () => {
  it('is set by a successful sign-in only: httpOnly, Secure, SameSite=Strict, sent to the sign-in routes alone, for a year', async () => {
    const account = await signupAndVerify(h);
    const failed = await signIn(account.email, 'not the password');
    expect(failed.status).toBe(401);
    expect(setCookies(failed).has('login_device')).toBe(false);

    const res = await signIn(account.email, account.password);
    expect(res.status).toBe(200);
    const cookie = setCookies(res).get('login_device')!;
    expect(cookie.attributes.has('httponly')).toBe(true);
    expect(cookie.attributes.has('secure')).toBe(true);
    expect(cookie.attributes.get('samesite')).toBe('Strict');
    expect(cookie.attributes.get('path')).toBe('/api/v1/auth/login');
    expect(Number(cookie.attributes.get('max-age'))).toBe(365 * 24 * 3600);
    // It names the e-mail only through a keyed digest: the address is not in it.
    expect(Buffer.from(cookie.value.split('.')[1]!, 'base64url').toString()).not.toContain(account.email);
  });

  it("lets the owner's browser sign in while a flood of wrong passwords for the e-mail is refused with 429", async () => {
    const account = await signupAndVerify(h);
    const device = await deviceOf(account);
    await flood(account.email);
    // Another client with the right password is refused too: the e-mail's count is spent.
    expect((await signIn(account.email, account.password)).status).toBe(429);
    const owner = await signIn(account.email, account.password, device);
    expect(owner.status).toBe(200);
    expect(owner.body.token).toEqual(expect.any(String));
  });

  it("counts a known browser's own wrong passwords apart: past the limit it gets 429, and the e-mail's other sign-ins go on", async () => {
    const account = await signupAndVerify(h);
    const device = await deviceOf(account);
    for (let i = 0; i < LIMIT; i++) expect((await signIn(account.email, `typo ${i}`, device)).status).toBe(401);
    const limited = await signIn(account.email, account.password, device);
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ detail: `Rate limit exceeded. Retry after ${limited.headers['retry-after']}s.` });
    expect((await signIn(account.email, account.password)).status).toBe(200);
  });

  it("is no help for another e-mail, nor when forged, altered or expired: those sign-ins count with the e-mail's", async () => {
    const owner = await signupAndVerify(h);
    const victim = await signupAndVerify(h);
    const device = await deviceOf(owner);
    await flood(victim.email);
    // The owner's cookie, brought to a sign-in as the victim: 429 even with the victim's right password.
    expect((await signIn(victim.email, victim.password, device)).status).toBe(429);
    // An altered signature, a token of another kind (a session) and garbage: all counted with the e-mail.
    const [head, body, signature] = device.split('.');
    const altered = `${head}.${body}.${signature!.startsWith('A') ? 'B' : 'A'}${signature!.slice(1)}`;
    const session = (await loginViaApi(h, owner.email, owner.password)).token;
    for (const forged of [altered, session, 'not-a-token']) {
      expect((await signIn(victim.email, victim.password, forged)).status).toBe(429);
    }

    const later = await signupAndVerify(h);
    const old = await deviceOf(later);
    await flood(later.email);
    h.clock.advance(366 * 24 * 3600 * 1000);
    expect((await signIn(later.email, later.password, old)).status).toBe(429);
  });

  it('no longer vouches once the password has changed: one who had the old password cannot keep counts to guess the new one', async () => {
    const account = await signupAndVerify(h);
    const first = await signIn(account.email, account.password);
    expect(first.status).toBe(200);
    // Whoever has the password collects cookies: every sign-in leaves a new one, each with a count of its own.
    const hoarded = [setCookies(first).get('login_device')!.value];
    for (let i = 0; i < LIMIT; i++) {
      const res = await signIn(account.email, account.password, hoarded[0]);
      expect(res.status).toBe(200);
      hoarded.push(setCookies(res).get('login_device')!.value);
    }

    const newPassword = `a new passphrase ${uniqueSuffix()}`;
    const change = await request(h.app)
      .post('/api/v1/auth/password')
      .set(bearer(first.body.token))
      .send({ current_password: account.password, new_password: newPassword });
    expect(change.status).toBe(200);
    // The owner signs in with the new password: that browser is known again.
    const again = await signIn(account.email, newPassword);
    expect(again.status).toBe(200);
    const current = setCookies(again).get('login_device')!.value;

    await flood(account.email);
    // Every cookie issued before the change counts with the e-mail's sign-ins: 429 even with the right password.
    for (const old of hoarded) expect((await signIn(account.email, newPassword, old)).status).toBe(429);
    expect((await signIn(account.email, newPassword, current)).status).toBe(200);
    // The browser that made the change is known with the new password from its answer on: an owner who changes a
    // password they think is known to someone is not held back by that someone's flood.
    const fromChange = setCookies(change).get('login_device');
    expect(fromChange?.attributes.get('path')).toBe('/api/v1/auth/login');
    expect((await signIn(account.email, newPassword, fromChange!.value)).status).toBe(200);
  });

  it('is set when a sign-in with 2FA completes, not at its password step', async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    const setup = await request(h.app).post('/api/v1/auth/2fa/setup').set(bearer(token));
    const enable = await request(h.app)
      .post('/api/v1/auth/2fa/enable')
      .set(bearer(token))
      .send({ code: oathtoolCode(setup.body.secret, h.clock.now()), current_password: account.password });
    expect(enable.status).toBe(200);
    h.clock.advance(30_000);

    const first = await signIn(account.email, account.password);
    expect(first.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
    expect(setCookies(first).has('login_device')).toBe(false);
    const second = await request(h.app)
      .post('/api/v1/auth/login/2fa')
      .send({ partial_token: first.body.partial_token, code: oathtoolCode(setup.body.secret, h.clock.now()) });
    expect(second.status).toBe(200);
    const device = setCookies(second).get('login_device')!.value;

    await flood(account.email);
    const again = await signIn(account.email, account.password, device);
    expect(again.body).toEqual({ requires_2fa: true, partial_token: expect.any(String) });
  });
});

describe('confirming a change with the current password', () => {
  const changePassword = (token: string, current_password: string) =>
    request(h.app)
      .post('/api/v1/auth/password')
      .set(bearer(token))
      .send({ current_password, new_password: `a new passphrase ${uniqueSuffix()}` });

  it('is counted per session: a flood of sign-ins for the e-mail does not block it', async () => {
    const account = await signupAndVerify(h);
    const device = await deviceOf(account);
    const first = await signIn(account.email, account.password, device);
    await flood(account.email);
    for (let i = 0; i < LIMIT; i++) expect((await changePassword(first.body.token, `typo ${i}`)).status).toBe(400);
    // The session's own count is spent: 429 even with the right password, and nothing changed.
    expect((await changePassword(first.body.token, account.password)).status).toBe(429);
    // Another session of the owner, signed in from their browser during the flood, confirms with the right password.
    const second = await signIn(account.email, account.password, device);
    expect(second.status).toBe(200);
    expect((await changePassword(second.body.token, account.password)).status).toBe(200);
  });

  it("does not spend the e-mail's sign-ins: a session's wrong passwords leave the owner free to sign in anywhere", async () => {
    const account = await signupAndVerify(h);
    const { token } = await loginViaApi(h, account.email, account.password);
    for (let i = 0; i < LIMIT + 2; i++) expect((await changePassword(token, `typo ${i}`)).status).toBe(i < LIMIT ? 400 : 429);
    expect((await signIn(account.email, account.password)).status).toBe(200);
    expect((await signIn(account.email, account.password)).status).toBe(200);
  });
});
