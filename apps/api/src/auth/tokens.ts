// Session and partial (2FA) JWTs. HS256 is pinned on verify; issuer, audience and maxAge are always checked.
// Partial tokens have their own audience so they can never be used as a session.
import jwt from 'jsonwebtoken';

const ISSUER = 'security-assessment-service';
export const SESSION_AUDIENCE = 'session';
export const PARTIAL_AUDIENCE = 'login-2fa';

export interface TokenClaims {
  sub: string; // user id
  org: string; // organization id
  jti: string;
  exp: number;
}

export function signToken(
  claims: { sub: string; org: string; jti: string },
  audience: string,
  ttlSeconds: number,
  secret: string,
  now: Date,
): { token: string; expiresAt: Date } {
  const token = jwt.sign({ org: claims.org, iat: Math.floor(now.getTime() / 1000) }, secret, {
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
    return { sub: payload.sub, org: payload.org, jti: payload.jti, exp: payload.exp };
  } catch {
    return undefined;
  }
}
