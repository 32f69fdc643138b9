// Browsers that signed in before (OWASP "Slow Down Online Guessing Attacks with Device Cookies"). The login limit
// counts sign-ins per e-mail, so a flood of wrong passwords for an e-mail, from anywhere, would lock its owner out
// too. A successful sign-in leaves an httpOnly cookie vouching for that e-mail; a sign-in that brings it back for
// the same e-mail is counted on its own (per cookie), apart from every other sign-in of the e-mail. The cookie is no
// credential: it only chooses which count a sign-in uses. A stolen one gives a guesser one more count of the login
// limit's size, no more. It names the password it was earned with too: whoever had the password could collect any
// number of cookies (each sign-in leaves a new one), so once the password changes they all count as no cookie.
import type { Response } from 'express';
import type { AppDeps } from '../../app-deps';
import { passwordFingerprint, signLoginDeviceToken, verifyLoginDeviceToken } from '../../auth/tokens';
import { hmacHex, randomToken } from '../../lib/crypto';

export const LOGIN_DEVICE_COOKIE = 'login_device';
const LOGIN_DEVICE_TTL_SECONDS = 365 * 24 * 3600;

type DeviceDeps = Pick<AppDeps, 'config' | 'clock'>;

/** The e-mail as the cookie names it: keyed with the JWT secret, so the cookie does not carry the address. */
function signInName(deps: DeviceDeps, email: string): string {
  return hmacHex(deps.config.jwtSecret, `login-device:${email}`).slice(0, 32);
}

/** A device cookie a sign-in brought: its id, and the password it was earned with (a fingerprint). */
export interface KnownDevice {
  id: string;
  pwf: string;
}

/** The device cookie a sign-in brings, when it is valid and was issued for this e-mail; else undefined. */
export function knownDeviceOf(deps: DeviceDeps, email: string, cookie: unknown): KnownDevice | undefined {
  if (typeof cookie !== 'string' || cookie.length > 1024) return undefined;
  const claims = verifyLoginDeviceToken(cookie, LOGIN_DEVICE_TTL_SECONDS, deps.config.jwtSecret, deps.clock.now());
  return claims && claims.sub === signInName(deps, email) ? { id: claims.jti, pwf: claims.pwf } : undefined;
}

/** Whether the cookie was earned with the account's current password (false for a changed one, or no account). */
export function deviceStillHolds(deps: DeviceDeps, device: KnownDevice, account: { passwordHash: string | null } | null): boolean {
  return account !== null && device.pwf === passwordFingerprint(account.passwordHash, deps.config.jwtSecret);
}

/** The key a known device's sign-ins are counted under in the login limiter. */
export function deviceLimiterKey(deviceId: string): string {
  return `device:${deviceId}`;
}

/** The sign-in routes as the browser sees their path (PUBLIC_BASE_URL may carry a path prefix). */
function loginDeviceCookiePath(publicBaseUrl: string): string {
  return new URL(`${publicBaseUrl}/api/v1/auth/login`).pathname;
}

/**
 * After a sign-in that ended in a session: the browser is known for this e-mail, while its password is the one
 * checked (`passwordHash`, as the session was issued under), from now on (a new id each time).
 */
export function rememberLoginDevice(res: Response, deps: DeviceDeps, account: { email: string; passwordHash: string | null }): void {
  const token = signLoginDeviceToken(
    { sub: signInName(deps, account.email), jti: randomToken(16), pwf: passwordFingerprint(account.passwordHash, deps.config.jwtSecret) },
    LOGIN_DEVICE_TTL_SECONDS,
    deps.config.jwtSecret,
    deps.clock.now(),
  );
  res.cookie(LOGIN_DEVICE_COOKIE, token, {
    httpOnly: true,
    secure: deps.config.cookieSecure,
    sameSite: 'strict',
    path: loginDeviceCookiePath(deps.config.publicBaseUrl),
    maxAge: LOGIN_DEVICE_TTL_SECONDS * 1000,
  });
}
