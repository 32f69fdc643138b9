// Session and partial (2FA) JWTs. HS256 is pinned on verify; issuer, audience and maxAge are always checked.
// Partial tokens have their own audience so they can never be used as a session.
import { createHmac } from 'node:crypto';
import jwt from 'jsonwebtoken';

const ISSUER = 'security-assessment-service';
export const SESSION_AUDIENCE = 'session';
export const PARTIAL_AUDIENCE = 'login-2fa';

export interface TokenClaims {
  sub: string; // user id
  org: string; // organization id
  jti: string;
  exp: number;
  /** A partial token whose first factor was the password: which password (passwordFingerprint). */
  pwf?: string;
}

export function signToken(
  claims: { sub: string; org: string; jti: string; pwf?: string },
  audience: string,
  ttlSeconds: number,
  secret: string,
  now: Date,
): { token: string; expiresAt: Date } {
  const token = jwt.sign({ org: claims.org, iat: Math.floor(now.getTime() / 1000), ...(claims.pwf && { pwf: claims.pwf }) }, secret, {
    algorithm: 'HS256',
    subject: claims.sub,
    jwtid: claims.jti,
    issuer: ISSUER,
    audience,
    expiresIn: ttlSeconds,
  });
  const { exp } = jwt.decode(token) as { exp: number };
  return { token, expiresAt: new Date(exp * 1000) };
}

/** Returns the claims, or undefined for any token that is malformed, forged, expired or of another audience. */
export function verifyToken(
  token: string,
  audience: string,
  maxAgeSeconds: number,
  secret: string,
  now: Date,
): TokenClaims | undefined {
  try {
    const payload = jwt.verify(token, secret, {
      clockTimestamp: Math.floor(now.getTime() / 1000),
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience,
      maxAge: maxAgeSeconds,
    }) as jwt.JwtPayload;
    if (typeof payload.sub !== 'string' || typeof payload.org !== 'string' || typeof payload.jti !== 'string') return undefined;
    if (typeof payload.exp !== 'number') return undefined;
    const pwf = typeof payload.pwf === 'string' ? { pwf: payload.pwf } : {};
    return { sub: payload.sub, org: payload.org, jti: payload.jti, exp: payload.exp, ...pwf };
  } catch {
    return undefined;
  }
}

/**
 * Names the password a partial token was earned with, without revealing anything of it (keyed with the JWT secret):
 * the second step refuses the token once the password has changed.
 */
export function passwordFingerprint(passwordHash: string | null, secret: string): string {
  return createHmac('sha256', secret).update(`partial-token-password:${passwordHash ?? ''}`).digest('base64url').slice(0, 22);
}
