// Helpers for the authentication tests: signup through the API, reading the outbox, cookies, and TOTP codes
// from oathtool (an implementation independent of the service's speakeasy).
import { spawnSync } from 'node:child_process';
import request from 'supertest';
import type { Harness } from './harness';
import { uniqueSuffix } from './harness';

export const SIGNUP_PASSWORD = 'a sufficiently long passphrase';

export interface SignedUp {
  email: string;
  password: string;
  userId: string;
  organizationId: string;
  organizationName: string;
}

export async function signupViaApi(h: Harness, overrides: Partial<{ email: string; password: string }> = {}): Promise<SignedUp> {
  const email = overrides.email ?? `user-${uniqueSuffix()}@example.test`;
  const password = overrides.password ?? SIGNUP_PASSWORD;
  const organizationName = `Org ${uniqueSuffix()}`;
  const res = await request(h.app)
    .post('/api/v1/auth/signup')
    .send({ email, password, name: 'Test Person', organization_name: organizationName });
  if (res.status !== 201) throw new Error(`signup failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { email, password, userId: res.body.user_id, organizationId: res.body.organization_id, organizationName };
}

/** The verification token in the newest mail sent to `email`. */
export function verificationTokenFor(h: Harness, email: string): string {
  const mails = h.mail().filter((m) => m.to === email);
  if (mails.length === 0) throw new Error(`no mail for ${email} in the outbox`);
  const match = /\/verify-email\?token=([A-Za-z0-9_%-]+)/.exec(mails[mails.length - 1].text);
  if (!match) throw new Error(`no verification link in the mail to ${email}`);
  return decodeURIComponent(match[1]);
}

export const RESET_MAIL_SUBJECT = 'Reset your password';

/** The password-reset mails sent to `email` so far, oldest first. */
export function resetMailsTo(h: Pick<Harness, 'mail'>, email: string) {
  return h.mail().filter((m) => m.to === email && m.subject === RESET_MAIL_SUBJECT);
}

/**
 * The link of the `nth` (1-based) password-reset mail to `email`, waiting for it: the mail is sent after the API has
 * answered. The token is in the link's fragment (`/reset-password#token=...`).
 */
export async function resetLinkFor(h: Pick<Harness, 'mail'>, email: string, nth = 1, timeoutMs = 10_000): Promise<{ link: string; token: string }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const mails = resetMailsTo(h, email);
    if (mails.length >= nth) {
      const match = /(\S+\/reset-password#token=([A-Za-z0-9_%-]+))/.exec(mails[nth - 1]!.text);
      if (!match) throw new Error(`no reset link in the mail to ${email}`);
      return { link: match[1]!, token: decodeURIComponent(match[2]!) };
    }
    if (Date.now() > deadline) throw new Error(`no password-reset mail number ${nth} for ${email} in the outbox`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export async function signupAndVerify(h: Harness): Promise<SignedUp> {
  const account = await signupViaApi(h);
  const res = await request(h.app).post('/api/v1/auth/verify-email').send({ token: verificationTokenFor(h, account.email), password: account.password });
  if (res.status !== 200) throw new Error(`verify-email failed: ${res.status} ${JSON.stringify(res.body)}`);
  return account;
}

export function loginRequest(h: Harness, body: Record<string, unknown>) {
  return request(h.app).post('/api/v1/auth/login').send(body);
}

/** Logs in (no 2FA) and returns the session token and CSRF token. */
export async function loginViaApi(h: Harness, email: string, password: string): Promise<{ token: string; csrfToken: string }> {
  const res = await loginRequest(h, { email, password });
  if (res.status !== 200 || !res.body.token) throw new Error(`login failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { token: res.body.token, csrfToken: res.body.csrf_token };
}

/** The session id a session token names (its jti), to find its row. */
export function sessionIdOf(token: string): string {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).jti as string;
}

/** Set-Cookie headers of a response, by cookie name: the value and the attributes (lowercased names). */
export function setCookies(res: { headers: Record<string, unknown> }): Map<string, { value: string; attributes: Map<string, string> }> {
  const raw = res.headers['set-cookie'];
  const lines = Array.isArray(raw) ? (raw as string[]) : typeof raw === 'string' ? [raw] : [];
  const out = new Map<string, { value: string; attributes: Map<string, string> }>();
  for (const line of lines) {
    const [pair, ...attrs] = line.split(';').map((s) => s.trim());
    const eq = pair.indexOf('=');
    const attributes = new Map<string, string>();
    for (const attr of attrs) {
      const i = attr.indexOf('=');
      attributes.set((i < 0 ? attr : attr.slice(0, i)).toLowerCase(), i < 0 ? '' : attr.slice(i + 1));
    }
    out.set(pair.slice(0, eq), { value: decodeURIComponent(pair.slice(eq + 1)), attributes });
  }
  return out;
}

/**
 * A TOTP code for `secret` at time `at`, computed by oathtool. Missing oathtool is a test FAILURE, never a skip:
 * the 2FA tests exist to check the service against an independent implementation.
 */
export function oathtoolCode(secret: string, at: Date): string {
  const result = spawnSync('oathtool', ['--totp', '-b', '--now', `@${Math.floor(at.getTime() / 1000)}`, secret], {
    encoding: 'utf8',
  });
  if (result.error) {
    throw new Error(
      `oathtool is required for the 2FA tests but could not be run (${result.error.message}). ` +
        'Install it: apt-get install -y oathtool',
    );
  }
  if (result.status !== 0) throw new Error(`oathtool failed (${result.status}): ${result.stderr}`);
  const code = result.stdout.trim();
  if (!/^\d{6}$/.test(code)) throw new Error(`oathtool printed an unexpected code: ${JSON.stringify(code)}`);
  return code;
}

/** A 6-digit code that is not the code of any step in the +-1 window around `at`. */
export function wrongCode(secret: string, at: Date): string {
  const valid = new Set([-30_000, 0, 30_000].map((d) => oathtoolCode(secret, new Date(at.getTime() + d))));
  for (let n = 0; ; n++) {
    const candidate = String((123456 + n * 7919) % 1_000_000).padStart(6, '0');
    if (!valid.has(candidate)) return candidate;
  }
}
