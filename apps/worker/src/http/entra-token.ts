// Microsoft Entra ID access tokens for microsoft_sentinel subscriptions: the OAuth 2.0 client-credentials grant at
// `<AZURE_AUTHORITY_HOST>/<tenant>/oauth2/v2.0/token`, scope https://monitor.azure.com/.default.
// A token is cached per subscription in Redis, sealed, shared by every worker, and expires there shortly before it
// does at Entra ID. One worker at a time fetches (a Redis lock); the others wait for its token instead of asking too.
// The token endpoint is reached like a receiver: its address resolved and checked (URL-safety rule), the connection
// pinned to it and pooled, through the egress proxy when there is one.
import { createHash, randomUUID } from 'node:crypto';
import type { SecureContext } from 'node:tls';
import type { Redis } from 'ioredis';
import { seal, unseal } from '@svc/db';
import { describeTargetRejection, resolveWebhookTarget, type DnsSettings, type Lookup } from '@svc/net';
import { ConnectionPool, type EgressProxyOptions } from './agents';
import { loadGot } from './got';
import { pinnedLookup } from './pinned-lookup';

export const MONITOR_SCOPE = 'https://monitor.azure.com/.default';
/** A cached token is dropped this long before it expires, at most (and at most a fifth of its lifetime). */
const MAX_REFRESH_MARGIN_MS = 5 * 60 * 1000;
const WAIT_STEP_MS = 50;
const ERROR_TEXT_LIMIT = 300;

export interface AzureCredentials {
  tenant_id: string;
  client_id: string;
  client_secret: string;
}

/** The token endpoint refused or could not be reached; the message says what it answered, never a secret. */
export class TokenError extends Error {
  override name = 'TokenError';
}

export interface EntraToken {
  accessToken: string;
  /** The cached entry it came from, to drop exactly that one after a 401. */
  entry: string;
}

export interface EntraTokens {
  /** A valid token for this subscription's credentials (sealed value); throws TokenError. */
  token(subscriptionId: string, credentialsEnc: string): Promise<EntraToken>;
  /** Forgets a token the receiver refused (only if it is still the cached one). */
  drop(subscriptionId: string, credentialsEnc: string, token: EntraToken): Promise<void>;
  close(): Promise<void>;
}

export interface EntraTokenOptions {
  authorityHost: string;
  timeoutMs: number;
  /** The receivers' trust (WEBHOOK_EXTRA_CA_FILE applies to the token endpoint too). */
  secureContext?: SecureContext;
  proxy?: EgressProxyOptions;
  /** WEBHOOK_ALLOWED_HOSTS and the DNS override (tests), as for receivers. */
  allowedHosts: readonly string[];
  lookup?: Lookup;
  /** How the token endpoint's name is resolved, as for receivers (WEBHOOK_DNS_*). */
  dns?: DnsSettings;
  redis: () => Redis;
  redisPrefix: string;
  key: Buffer;
}

/** How long a token may stay cached: its lifetime less a margin, so no request leaves with one about to expire. */
export function cacheLifetimeMs(expiresInSeconds: number): number {
  const lifetime = expiresInSeconds * 1000;
  return Math.max(0, lifetime - Math.min(MAX_REFRESH_MARGIN_MS, lifetime / 5));
}

export function tokenEndpoint(authorityHost: string, tenantId: string): string {
  return `${authorityHost}/${encodeURIComponent(tenantId)}/oauth2/v2.0/token`;
}

/** The token endpoint's answer in words: status and OAuth error, with anything secret taken out. */
export function describeTokenAnswer(status: number, body: string, credentials: AzureCredentials): string {
  let detail = body.trim();
  try {
    const json = JSON.parse(body) as { error?: unknown; error_description?: unknown };
    if (typeof json.error === 'string') {
      const description = typeof json.error_description === 'string' ? json.error_description.split('\n')[0] : '';
      detail = description ? `${json.error}: ${description}` : json.error;
    }
  } catch {
    // not JSON: keep the text
  }
  detail = detail.split(credentials.client_secret).join('[redacted]').slice(0, ERROR_TEXT_LIMIT);
  return `token endpoint answered HTTP ${status}${detail ? `: ${detail}` : ''}`;
}

const RELEASE_IF_OURS = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`;

export function createEntraTokens(options: EntraTokenOptions): EntraTokens {
  let connection: Redis | null = null;
  const pool = new ConnectionPool({
    secureContext: options.secureContext,
    maxSocketsPerAddress: 4,
    idleTimeoutMs: 30_000,
    maxPools: 16,
    proxy: options.proxy,
  });
  const redis = () => (connection ??= options.redis());
  const cacheKey = (subscriptionId: string, credentialsEnc: string) => {
    const version = createHash('sha256').update(credentialsEnc).digest('hex').slice(0, 16);
    return `${options.redisPrefix}:entra-token:${subscriptionId}:${version}`;
  };

  async function cached(key: string): Promise<EntraToken | null> {
    const entry = await redis().get(key);
    return entry ? { accessToken: unseal(entry, options.key), entry } : null;
  }

  async function fetchToken(credentials: AzureCredentials): Promise<{ accessToken: string; expiresIn: number }> {
    const got = await loadGot();
    const url = tokenEndpoint(options.authorityHost, credentials.tenant_id);
    const check = await resolveWebhookTarget(url, { allowedHosts: options.allowedHosts, lookup: options.lookup, dns: options.dns });
    if (!check.ok) throw new TokenError(`token endpoint refused: ${describeTargetRejection(check.reason)}`);
    const { address, family } = check.target;
    const agent = pool.agentFor({ hostname: check.target.url.hostname, port: Number(check.target.url.port || 443), address, family });
    let response: { statusCode: number; body: string };
    try {
      response = await got.post(url, {
        form: {
          grant_type: 'client_credentials',
          client_id: credentials.client_id,
          client_secret: credentials.client_secret,
          scope: MONITOR_SCOPE,
        },
        timeout: { request: options.timeoutMs },
        retry: { limit: 0 },
        followRedirect: false,
        throwHttpErrors: false,
        responseType: 'text',
        dnsLookup: pinnedLookup(address, family),
        agent: { https: agent },
      });
    } catch (err) {
      const error = err as Error & { code?: string };
      throw new TokenError(`token endpoint unreachable: ${error.code ?? error.name}: ${error.message}`.slice(0, ERROR_TEXT_LIMIT));
    }
    const json = parseJson(response.body);
    const accessToken = json?.access_token;
    if (response.statusCode !== 200 || typeof accessToken !== 'string' || accessToken === '') {
      throw new TokenError(describeTokenAnswer(response.statusCode, response.body, credentials));
    }
    const expiresIn = Number(json?.expires_in);
    return { accessToken, expiresIn: Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn : 3600 };
  }

  /** Fetches and caches a token while holding the lock; null when another worker holds it. */
  async function fetchUnderLock(key: string, credentials: AzureCredentials): Promise<EntraToken | null> {
    const lockKey = `${key}:lock`;
    const owner = randomUUID();
    const locked = await redis().set(lockKey, owner, 'PX', options.timeoutMs + 1000, 'NX');
    if (locked !== 'OK') return null;
    try {
      const again = await cached(key); // another worker may have stored one just before we locked
      if (again) return again;
      const fresh = await fetchToken(credentials);
      const entry = seal(fresh.accessToken, options.key);
      const ttl = cacheLifetimeMs(fresh.expiresIn);
      if (ttl > 0) await redis().set(key, entry, 'PX', Math.floor(ttl));
      return { accessToken: fresh.accessToken, entry };
    } finally {
      await redis().eval(RELEASE_IF_OURS, 1, lockKey, owner);
    }
  }

  return {
    async token(subscriptionId, credentialsEnc) {
      const credentials = JSON.parse(unseal(credentialsEnc, options.key)) as AzureCredentials;
      const key = cacheKey(subscriptionId, credentialsEnc);
      const deadline = Date.now() + options.timeoutMs + 1000;
      for (;;) {
        const hit = await cached(key);
        if (hit) return hit;
        const fetched = await fetchUnderLock(key, credentials);
        if (fetched) return fetched;
        if (Date.now() > deadline) throw new TokenError('timed out waiting for another worker to fetch the token');
        await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
      }
    },
    async drop(subscriptionId, credentialsEnc, token) {
      await redis().eval(RELEASE_IF_OURS, 1, cacheKey(subscriptionId, credentialsEnc), token.entry);
    },
    async close() {
      pool.close();
      if (connection) await connection.quit().catch(() => connection?.disconnect());
      connection = null;
    },
  };
}

function parseJson(body: string): Record<string, unknown> | null {
  try {
    const value = JSON.parse(body) as unknown;
    return value !== null && typeof value === 'object' ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
