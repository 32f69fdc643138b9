// Turns the request's credential into a Principal, or answers 401. API keys are looked up by their HMAC (no
// bcrypt on the request path); sessions by their jti, so logout and member removal take effect at once.
// Queries use the raw client: they establish the principal, and with it the organization everything else is scoped to.
import type { Request, RequestHandler } from 'express';
import { effectiveKeyScopes, roleBundle, type Role } from '@svc/scopes';
import type { AppDeps } from '../app-deps';
import { forbidden, unauthorized } from '../http/errors';
import { hasValidChecksum, hashApiKey, looksLikeApiKey } from './api-key-material';
import { CSRF_HEADER, SESSION_COOKIE, isSafeMethod, isValidCsrfToken } from './csrf';
import type { Principal } from './principal';
import { SESSION_AUDIENCE, verifyToken } from './tokens';

// last_used_at is refreshed at most this often, so authenticating a key does not write on every request.
const LAST_USED_REFRESH_MS = 5 * 60 * 1000;

interface Credential {
  value: string;
  fromCookie: boolean;
}

function readCredential(req: Request): Credential | undefined {
  const header = req.headers.authorization;
  if (header !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw unauthorized('Malformed Authorization header: expected "Bearer <credential>".');
    return { value: match[1], fromCookie: false };
  }
  const cookie = req.cookies?.[SESSION_COOKIE];
  return typeof cookie === 'string' && cookie ? { value: cookie, fromCookie: true } : undefined;
}

async function principalFromApiKey(deps: AppDeps, value: string): Promise<Principal> {
  if (!hasValidChecksum(value)) throw unauthorized('Invalid API key.');
  const key = await deps.prisma.apiKey.findUnique({
    where: { keyHash: hashApiKey(value, deps.config.apiKeyPepper) },
    include: { user: { select: { status: true } } },
  });
  if (!key || key.revokedAt) throw unauthorized('Invalid API key.');
  const now = deps.clock.now();
  if (key.expiresAt && key.expiresAt <= now) throw unauthorized('API key expired.');
  const membership = await deps.prisma.membership.findUnique({
    where: { organizationId_userId: { organizationId: key.organizationId, userId: key.userId } },
  });
  if (!membership || key.user.status !== 'active') throw unauthorized('Invalid API key.');
  if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() > LAST_USED_REFRESH_MS) {
    deps.prisma.apiKey
      .update({ where: { id: key.id }, data: { lastUsedAt: now } })
      .catch((err: unknown) => deps.logger.warn('Could not record API key use', { error: String(err) }));
  }
  return {
    kind: 'api_key',
    userId: key.userId,
    organizationId: key.organizationId,
    role: membership.role as Role,
    scopes: new Set(effectiveKeyScopes(key.scopes, membership.role as Role)),
    apiKeyId: key.id,
    apiKeyPrefix: key.displayPrefix,
  };
}

async function principalFromSession(deps: AppDeps, token: string): Promise<Principal> {
  const now = deps.clock.now();
  const claims = verifyToken(token, SESSION_AUDIENCE, deps.config.sessionTtlSeconds, deps.config.jwtSecret, now);
  if (!claims) throw unauthorized('Invalid or expired session.');
  const session = await deps.prisma.session.findUnique({ where: { id: claims.jti } });
  if (!session || session.revokedAt || session.expiresAt <= now || session.userId !== claims.sub) {
    throw unauthorized('Invalid or expired session.');
  }
  const membership = await deps.prisma.membership.findUnique({
    where: { organizationId_userId: { organizationId: session.organizationId, userId: session.userId } },
    include: { user: { select: { status: true } } },
  });
  if (!membership || membership.user.status !== 'active') throw unauthorized('Invalid or expired session.');
  return {
    kind: 'session',
    userId: session.userId,
    organizationId: session.organizationId,
    role: membership.role as Role,
    scopes: roleBundle(membership.role as Role),
    sessionId: session.id,
  };
}

export function authenticate(deps: AppDeps): RequestHandler {
  return async (req, _res, next) => {
    const credential = readCredential(req);
    if (!credential) throw unauthorized();
    const principal = looksLikeApiKey(credential.value)
      ? await principalFromApiKey(deps, credential.value)
      : await principalFromSession(deps, credential.value);
    if (credential.fromCookie && !isSafeMethod(req.method)) {
      const presented = req.headers[CSRF_HEADER];
      if (!isValidCsrfToken(typeof presented === 'string' ? presented : undefined, principal.sessionId!, deps.config.jwtSecret)) {
        throw forbidden('CSRF token missing or invalid: send the X-CSRF-Token header with cookie sessions.');
      }
    }
    req.principal = principal;
    next();
  };
}
