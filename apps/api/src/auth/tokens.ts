// Session, partial (2FA) and login-device JWTs. HS256 is pinned on verify; issuer, audience and maxAge are always checked.
// Partial and login-device tokens have their own audiences so they can never be used as a session.
import { createHmac } from 'node:crypto';
import jwt from 'jsonwebtoken';

const ISSUER = 'security-assessment-service';
export const SESSION_AUDIENCE = 'session';
export const PARTIAL_AUDIENCE = 'login-2fa';
export const LOGIN_DEVICE_AUDIENCE = 'login-device';

export interface TokenClaims {
  sub: string; // user id
  org: string; // organization id
  jti: string;
  exp: number;
  /** A partial token whose first factor was the password: which password (passwordFingerprint). */
  pwf?: string;
}

/** Every token of the service: HS256, the service as issuer, a subject, an id, an audience and a lifetime. */
function signJwt(claims: Record<string, unknown>, sub: string, jti: string, audience: string, ttlSeconds: number, secret: string, now: Date): string {
  return jwt.sign({ ...claims, iat: Math.floor(now.getTime() / 1000) }, secret, {
    algorithm: 'HS256',
    subject: sub,
    jwtid: jti,
    issuer: ISSUER,
    audience,
    expiresIn: ttlSeconds,
  });
}

/** The payload of a valid token of `audience` with a subject, an id and an expiry; undefined for anything else. */
function verifyJwt(token: string, audience: string, maxAgeSeconds: number, secret: string, now: Date): (jwt.JwtPayload & { sub: string; jti: string; exp: number }) | undefined {
  try {
    const payload = jwt.verify(token, secret, {
      clockTimestamp: Math.floor(now.getTime() / 1000),
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience,
      maxAge: maxAgeSeconds,
    }) as jwt.JwtPayload;
    if (typeof payload.sub !== 'string' || typeof payload.jti !== 'string' || typeof payload.exp !== 'number') return undefined;
    return payload as jwt.JwtPayload & { sub: string; jti: string; exp: number };
  } catch {
    return undefined;
  }
}

export function signToken(
  claims: { sub: string; org: string; jti: string; pwf?: string },
  audience: string,
  ttlSeconds: number,
  secret: string,
  now: Date,
): { token: string; expiresAt: Date } {
  const token = signJwt({ org: claims.org, ...(claims.pwf && { pwf: claims.pwf }) }, claims.sub, claims.jti, audience, ttlSeconds, secret, now);
  const { exp } = jwt.decode(token) as { exp: number };
  return { token, expiresAt: new Date(exp * 1000) };
}

/** Returns the claims, or undefined for any token that is malformed, forged, expired or of another audience. */
export function verifyToken(token: string, audience: string, maxAgeSeconds: number, secret: string, now: Date): TokenClaims | undefined {
  const payload = verifyJwt(token, audience, maxAgeSeconds, secret, now);
  if (!payload || typeof payload.org !== 'string') return undefined;
  const pwf = typeof payload.pwf === 'string' ? { pwf: payload.pwf } : {};
  return { sub: payload.sub, org: payload.org, jti: payload.jti, exp: payload.exp, ...pwf };
}

/** A browser that signed in before (modules/auth/login-devices.ts): the sign-in name it vouches for and its own id. */
export interface LoginDeviceClaims {
  /** A keyed digest of the e-mail (never the address). */
  sub: string;
  jti: string;
  /** The password the sign-in was checked against (passwordFingerprint). */
  pwf: string;
}

export function signLoginDeviceToken(claims: LoginDeviceClaims, ttlSeconds: number, secret: string, now: Date): string {
  return signJwt({ pwf: claims.pwf }, claims.sub, claims.jti, LOGIN_DEVICE_AUDIENCE, ttlSeconds, secret, now);
}

/** The claims, or undefined for anything malformed, forged, expired or of another audience (a session, say). */
export function verifyLoginDeviceToken(token: string, maxAgeSeconds: number, secret: string, now: Date): LoginDeviceClaims | undefined {
  const payload = verifyJwt(token, LOGIN_DEVICE_AUDIENCE, maxAgeSeconds, secret, now);
  if (!payload || typeof payload.pwf !== 'string') return undefined;
  return { sub: payload.sub, jti: payload.jti, pwf: payload.pwf };
}

/**
 * Names the password a partial token (or a login-device cookie) was earned with, without revealing anything of it
 * (keyed with the JWT secret): the second step refuses the token, and sign-in the cookie, once the password has changed.
 */
export function passwordFingerprint(passwordHash: string | null, secret: string): string {
  return createHmac('sha256', secret).update(`partial-token-password:${passwordHash ?? ''}`).digest('base64url').slice(0, 22);
}
