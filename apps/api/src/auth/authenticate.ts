// Turns the request's credential into a Principal, or answers 401. API keys are looked up by their HMAC (no
// bcrypt on the request path); sessions by their jti, so logout and member removal take effect at once.
// Queries use the raw client: they establish the principal, and with it the organization everything else is scoped to.
// A key's resolved state (key row, member role, user status) is kept in-process for API_KEY_CACHE_TTL_SECONDS;
// each request compares the organization's and the user's auth epochs in Redis (one MGET, @svc/queue
// auth-epoch.ts) with the ones the entry was read under, so a revocation, a removal or a role change made through
// any instance (or the worker) refuses the key on the very next request everywhere.
import type { Request, RequestHandler } from 'express';
import { effectiveKeyScopes, roleBundle, type Role } from '@svc/scopes';
import { Coalescer, coalescerOf, Prisma, queryRows } from '@svc/db';
import { readAuthEpochs } from '@svc/queue';
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

/** What one statement reads for an API key: the key, its user's status and its creator's membership role. */
interface KeyRow {
  id: string;
  organization_id: string;
  user_id: string;
  display_prefix: string;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
  user_status: string;
  role: string | null;
}

/** A usable key as the database showed it, with the epochs read before the database was. */
interface CachedKey {
  key: { id: string; organizationId: string; userId: string; displayPrefix: string; expiresAt: Date | null };
  /** null: the key's creator is no longer a member (then also not cached). */
  role: Role | null;
  userActive: boolean;
  scopes: ReadonlySet<string>;
  lastUsedAt: Date | null;
  epochs: { organization: string; user: string };
  /** Process-clock deadline (ms) after which the database is read again whatever the epochs say. */
  freshUntil: number;
}

/** One cache per API instance (per createApp): key hash -> resolved key, plus the (immutable) owner of each key. */
export class ApiKeyCache {
  private readonly entries = new Map<string, CachedKey>();
  /** A key's organization and user never change; knowing them lets the epochs be read before the database. */
  private readonly owners = new Map<string, { organizationId: string; userId: string }>();
  constructor(
    readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(hash: string): CachedKey | undefined {
    return this.entries.get(hash);
  }
  owner(hash: string) {
    return this.owners.get(hash);
  }
  rememberOwner(hash: string, owner: { organizationId: string; userId: string }): void {
    if (this.owners.size >= this.maxEntries) this.owners.delete(this.owners.keys().next().value!);
    this.owners.set(hash, owner);
  }
  set(hash: string, entry: CachedKey): void {
    if (!this.owners.has(hash)) this.rememberOwner(hash, { organizationId: entry.key.organizationId, userId: entry.key.userId });
    this.entries.delete(hash);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(hash, entry);
  }
  drop(hash: string): void {
    this.entries.delete(hash);
  }
}

/** On the pg pool (queryRows), whose type parser reads timestamp(3) columns as UTC Dates. */
async function loadKey(deps: AppDeps, hash: string): Promise<KeyRow | undefined> {
  const rows = await queryRows<KeyRow>(
    deps.prisma,
    Prisma.sql`
    SELECT k.id, k.organization_id, k.user_id, k.display_prefix, k.scopes, k.expires_at, k.revoked_at, k.last_used_at,
           u.status::text AS user_status, m.role::text AS role
    FROM api_keys k
    JOIN users u ON u.id = k.user_id
    LEFT JOIN memberships m ON m.organization_id = k.organization_id AND m.user_id = k.user_id
    WHERE k.key_hash = ${hash}`,
    'api_load_key',
  );
  return rows[0];
}

/**
 * The current epochs, or undefined when Redis cannot say: then nothing is read from or written to the cache. Not
 * logged per request: the API's Redis connection logs the outage once (connections.ts).
 */
function currentEpochs(deps: AppDeps, owner: Owner) {
  return epochReader(deps).run(owner).catch(() => undefined);
}

type Owner = { organizationId: string; userId: string };
type Epochs = { organization: string; user: string };

/**
 * Per Redis connection, the epoch reads of concurrent requests together: a request waits for the read in flight (if
 * any) and is answered by the next one, which was sent after it arrived, so it still sees every bump committed
 * before it. The requests of one batch that share an owner share its read (32 engines publishing with one key read
 * the same two keys 32 times).
 */
function epochReader(deps: AppDeps): Coalescer<Owner, Epochs> {
  return coalescerOf(deps.redis, 'auth-epochs', () =>
    new Coalescer(async (owners: Owner[]) => {
      const keyOf = (o: Owner) => `${o.organizationId} ${o.userId}`;
      const distinct = new Map(owners.map((o) => [keyOf(o), o]));
      const read = new Map(
        await Promise.all(
          [...distinct].map(async ([key, o]) => [key, await readAuthEpochs(deps.redis, deps.config.redisPrefix, o.organizationId, o.userId)] as const),
        ),
      );
      return owners.map((o) => read.get(keyOf(o))!);
    }),
  );
}

/**
 * The key's resolved state: from the cache when the entry is younger than the TTL and neither its organization's
 * nor its user's epoch moved since it was read, else from the database (one statement). Refusals are not cached.
 */
async function resolveKey(deps: AppDeps, cache: ApiKeyCache, hash: string): Promise<CachedKey> {
  const owner = cache.ttlMs > 0 ? cache.owner(hash) : undefined;
  const epochs = owner ? await currentEpochs(deps, owner) : undefined;
  const cached = cache.get(hash);
  if (cached && epochs && cached.freshUntil > Date.now() && cached.epochs.organization === epochs.organization && cached.epochs.user === epochs.user) {
    return cached;
  }
  if (cached) cache.drop(hash);
  const row = await loadKey(deps, hash);
  if (!row || row.revoked_at !== null) throw unauthorized('Invalid API key.');
  const role = row.role as Role | null;
  const resolved: CachedKey = {
    key: {
      id: row.id,
      organizationId: row.organization_id,
      userId: row.user_id,
      displayPrefix: row.display_prefix,
      expiresAt: row.expires_at,
    },
    role,
    userActive: row.user_status === 'active',
    scopes: new Set(role ? effectiveKeyScopes(row.scopes, role) : []),
    lastUsedAt: row.last_used_at,
    epochs: epochs ?? { organization: '', user: '' },
    freshUntil: Date.now() + cache.ttlMs,
  };
  if (cache.ttlMs > 0) {
    // Cached only with epochs read before this database read: a change committed after it moved them since.
    // A key that will be refused is not cached.
    if (epochs && role && resolved.userActive) cache.set(hash, resolved);
    else cache.rememberOwner(hash, { organizationId: row.organization_id, userId: row.user_id });
  }
  return resolved;
}

async function principalFromApiKey(deps: AppDeps, cache: ApiKeyCache, value: string): Promise<Principal> {
  if (!hasValidChecksum(value)) throw unauthorized('Invalid API key.');
  const hash = hashApiKey(value, deps.config.apiKeyPepper);
  const resolved = await resolveKey(deps, cache, hash);
  const { key } = resolved;
  const now = deps.clock.now();
  if (key.expiresAt && key.expiresAt <= now) throw unauthorized('API key expired.');
  if (!resolved.role || !resolved.userActive) throw unauthorized('Invalid API key.');
  const role = resolved.role;
  if (!resolved.lastUsedAt || now.getTime() - resolved.lastUsedAt.getTime() > LAST_USED_REFRESH_MS) {
    resolved.lastUsedAt = now;
    // Not awaited: the request does not wait for this bookkeeping, nor fail with it.
    deps.afterAnswer.run('record API key use', () => deps.prisma.apiKey.update({ where: { id: key.id }, data: { lastUsedAt: now } }), { level: 'warn' });
  }
  return {
    kind: 'api_key',
    userId: key.userId,
    organizationId: key.organizationId,
    role,
    scopes: resolved.scopes,
    apiKeyId: key.id,
    apiKeyPrefix: key.displayPrefix,
    apiKeyExpiresAt: key.expiresAt,
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

/**
 * The authentication middleware. Every route of one app shares `cache` (one per mountRoutes, so per createApp).
 */
export function authenticate(deps: AppDeps, cache: ApiKeyCache): RequestHandler {
  return async (req, _res, next) => {
    const credential = readCredential(req);
    if (!credential) throw unauthorized();
    const principal = looksLikeApiKey(credential.value)
      ? await principalFromApiKey(deps, cache, credential.value)
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
