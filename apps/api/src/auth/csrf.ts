// Cross-site request forgery protection for cookie sessions: the session cookie is SameSite=Strict, and a
// state-changing request authenticated by the cookie alone must also echo the session's CSRF token (returned
// at login and set as the readable `csrf_token` cookie) in the X-CSRF-Token header. Bearer requests need none:
// a browser never adds an Authorization header on its own.
import { hmacHex, safeEqual } from '../lib/crypto';

export const CSRF_HEADER = 'x-csrf-token';
export const CSRF_COOKIE = 'csrf_token';
export const SESSION_COOKIE = 'session';

export function csrfTokenFor(sessionId: string, secret: string): string {
  return hmacHex(secret, `csrf:${sessionId}`);
}

export function isValidCsrfToken(presented: string | undefined, sessionId: string, secret: string): boolean {
  return typeof presented === 'string' && safeEqual(presented, csrfTokenFor(sessionId, secret));
}

export function isSafeMethod(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS';
}
