// The idempotency_keys table: one row per (organization, credential, key). Raw SQL, each statement naming the
// organization, credential and key; the claim is one INSERT ... ON CONFLICT, so of two concurrent requests with one
// key exactly one wins it. Response bodies are sealed at rest (they may carry a one-time secret: an API key value,
// a signing secret, a share URL).
import { randomBytes } from 'node:crypto';
import { Prisma, queryRows, seal, unseal, utcTimestamp, type Db, type PgPool } from '@svc/db';
import { IDEMPOTENCY_KEY_TTL_MS, IDEMPOTENCY_LOCK_TIMEOUT_MS, type StoredIdempotencyKey } from '@svc/domain';

export interface IdempotencyScope {
  organizationId: string;
  /** `key:<api key id>`, `user:<user id>`, or `session:<session id>` on a sudo-mode route (http/idempotency.ts scopeOf). */
  credential: string;
  key: string;
}

export interface StoredResponse {
  status: number;
  /** The JSON body, or null for a response without one (204). */
  body: unknown;
}

export type ClaimResult =
  | { won: true; lockToken: string }
  | { won: false; row: StoredIdempotencyKey & { response: StoredResponse | null } };

const where = (s: IdempotencyScope) =>
  Prisma.sql`organization_id = ${s.organizationId} AND credential = ${s.credential} AND key = ${s.key}`;

/**
 * Takes the key for this request: a new row, or an expired one (older than 24 h), or an in-flight row of the same
 * request whose holder died (locked longer than the lock timeout). Otherwise returns the live row as it stands.
 */
export async function claimIdempotencyKey(
  prisma: Db,
  scope: IdempotencyScope,
  requestHash: string,
  now: Date,
  encryptionKey: Buffer,
): Promise<ClaimResult> {
  const lockToken = randomBytes(16).toString('hex');
  const expiredBefore = new Date(now.getTime() - IDEMPOTENCY_KEY_TTL_MS);
  const staleBefore = new Date(now.getTime() - IDEMPOTENCY_LOCK_TIMEOUT_MS);
  // A row deleted between the failed claim and the read (its first request failed with a 5xx) is claimed again.
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const claimed = await queryRows<{ lock_token: string }>(prisma, Prisma.sql`
      INSERT INTO idempotency_keys (organization_id, credential, key, request_hash, state, lock_token, locked_at, created_at)
      VALUES (${scope.organizationId}, ${scope.credential}, ${scope.key}, ${requestHash}, 'in_flight', ${lockToken},
              ${utcTimestamp(now)}, ${utcTimestamp(now)})
      ON CONFLICT (organization_id, credential, key) DO UPDATE
        SET request_hash = EXCLUDED.request_hash, state = 'in_flight', lock_token = EXCLUDED.lock_token,
            locked_at = EXCLUDED.locked_at, created_at = EXCLUDED.created_at, response_status = NULL, response_body_enc = NULL
        WHERE idempotency_keys.created_at <= ${utcTimestamp(expiredBefore)}
           OR (idempotency_keys.state = 'in_flight' AND idempotency_keys.locked_at <= ${utcTimestamp(staleBefore)}
               AND idempotency_keys.request_hash = EXCLUDED.request_hash)
      RETURNING lock_token`);
    if (claimed[0]?.lock_token === lockToken) return { won: true, lockToken };
    const [row] = await queryRows<{ request_hash: string; state: string; response_status: number | null; response_body_enc: string | null }>(
      prisma,
      Prisma.sql`SELECT request_hash, state, response_status, response_body_enc FROM idempotency_keys WHERE ${where(scope)}`,
    );
    if (!row) continue;
    const response =
      row.state === 'completed' && row.response_status !== null
        ? { status: row.response_status, body: row.response_body_enc === null ? null : JSON.parse(unseal(row.response_body_enc, encryptionKey)) }
        : null;
    return { won: false, row: { requestHash: row.request_hash, state: row.state === 'completed' ? 'completed' : 'in_flight', response } };
  }
  throw new Error('Idempotency key claim did not settle');
}

/** Logged when a request's answer could not be stored because a retry had taken its key (never the key or body). */
export const ANSWER_NOT_STORED = 'The answer of an idempotent request was not stored: its key had been taken by a retry after its lock went stale';

/**
 * Stores the first request's response; only the request holding the lock can. False: the key is not this request's
 * any more (its lock went stale and a retry took it, or it expired), so nothing was stored.
 */
export async function completeIdempotencyKey(
  prisma: Db,
  scope: IdempotencyScope,
  lockToken: string,
  response: StoredResponse,
  encryptionKey: Buffer,
): Promise<boolean> {
  const sealed = response.body === null ? null : seal(JSON.stringify(response.body), encryptionKey);
  const stored = await prisma.$executeRaw`
    UPDATE idempotency_keys SET state = 'completed', response_status = ${response.status}, response_body_enc = ${sealed},
           lock_token = NULL, locked_at = NULL
     WHERE ${where(scope)} AND lock_token = ${lockToken}`;
  return stored > 0;
}

// locked_at holds UTC wall time, as every timestamp(3) column. Each key by its own organization, credential, key and
// lock token: a renewal never touches another request's key. A row locked right now (its answer being stored, a
// retry's claim, an organization being deleted) is skipped, not waited for: one slow row must not hold up the
// renewal of every other key, and it is renewed with the next round (the lock timeout is twelve rounds away).
// `ours`: still this request's key as last committed, renewed or not this time.
const RENEW_SQL = `
  WITH v AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS v(organization_id, credential, key, lock_token)
  ), free AS (
    SELECT k.organization_id, k.credential, k.key
      FROM idempotency_keys k JOIN v USING (organization_id, credential, key)
     WHERE k.lock_token = v.lock_token AND k.state = 'in_flight'
       FOR UPDATE OF k SKIP LOCKED
  ), renewed AS (
    UPDATE idempotency_keys k SET locked_at = ($1::timestamptz AT TIME ZONE 'UTC')
      FROM free
     WHERE k.organization_id = free.organization_id AND k.credential = free.credential AND k.key = free.key
    RETURNING k.lock_token
  )
  SELECT v.lock_token,
         v.lock_token IN (SELECT lock_token FROM renewed) OR EXISTS (
           SELECT 1 FROM idempotency_keys k
            WHERE k.organization_id = v.organization_id AND k.credential = v.credential AND k.key = v.key
              AND k.lock_token = v.lock_token AND k.state = 'in_flight') AS ours
    FROM v`;

/**
 * Renews the locks of requests still running, all in one statement (on the connection held-keys.ts keeps for it);
 * answers the lock tokens that are still theirs, renewed now or skipped for a row locked at this moment.
 */
export async function renewIdempotencyLocks(
  pool: Pick<PgPool, 'query'>,
  held: Array<{ scope: IdempotencyScope; lockToken: string }>,
  now: Date,
): Promise<Set<string>> {
  const column = (of: (h: { scope: IdempotencyScope; lockToken: string }) => string) => held.map(of);
  const { rows } = await pool.query<{ lock_token: string; ours: boolean }>(RENEW_SQL, [
    now.toISOString(),
    column((h) => h.scope.organizationId),
    column((h) => h.scope.credential),
    column((h) => h.scope.key),
    column((h) => h.lockToken),
  ]);
  return new Set(rows.filter((r) => r.ours).map((r) => r.lock_token));
}

/** Forgets a key whose first request failed with a 5xx: the same key may be retried. */
export async function releaseIdempotencyKey(prisma: Db, scope: IdempotencyScope, lockToken: string): Promise<void> {
  await prisma.$executeRaw`DELETE FROM idempotency_keys WHERE ${where(scope)} AND lock_token = ${lockToken} AND state = 'in_flight'`;
}
