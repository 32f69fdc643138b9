// The GDPR erasure job (governance:erase). Each run takes the pending erasure requests, oldest first, and erases
// each one in ONE transaction that also marks it completed: a worker killed midway rolls everything back and the
// request is still pending for the next run (restarts lose nothing). A request the job cannot complete (the person
// now owns the organization, a database error) is marked failed with the reason and waits for a retry.
//
// What one erasure does, in the request's organization:
// - a current member is removed (membership, team memberships, direct grants; sessions and API keys revoked);
// - every text, JSON and text-array column of every table with an organization_id has the person's e-mail and
//   name replaced with the request's pseudonym in that organization's rows (found through information_schema, so
//   tables added later are covered without changing this job);
// - when the person belongs to no other organization, the account itself is erased: the users row takes the
//   pseudonym, its password, 2FA secret, sign-in identities, personal source connections and tokens go, and the tables without an
//   organization_id are swept too. A person still a member elsewhere keeps their account there: those
//   organizations' records are theirs to erase.
// Audit entries stay (the log is append-only and not hash-chained): only the identifying text in them changes.
// The erasure is recorded as `erasure.completed` by `system`, naming the request and the pseudonym only.
import { recordAudit, SYSTEM_ACTOR } from '@svc/audit';
import { Prisma, type Tx } from '@svc/db';
import { erasureReplacements, type TextReplacement } from '@svc/domain';
import { bumpAuthEpochs } from '@svc/queue';
import type { WorkerDeps } from './deps';

/** Requests taken per run; the next run takes the rest. */
const BATCH_SIZE = 20;
/** One erasure scans every text column of the organization: give it time. */
const ERASURE_TRANSACTION_TIMEOUT_MS = 5 * 60 * 1000;

export class ErasureRefused extends Error {}

interface TextColumn {
  table: string;
  column: string;
  kind: 'text' | 'json' | 'jsonb' | 'text_array';
  organizationScoped: boolean;
}

export interface ErasureReceipt {
  membership_removed: boolean;
  account_erased: boolean;
  sessions_revoked: number;
  api_keys_revoked: number;
  /** Rows changed per table and column, e.g. {table: 'audit_events', column: 'actor_label', rows: 3}. */
  replaced: Array<{ table: string; column: string; rows: number }>;
}

const quote = (identifier: string) => `"${identifier.replace(/"/g, '""')}"`;

/** Every column of the current schema that can hold text, with whether its table has an organization_id. */
async function textColumns(tx: Tx): Promise<TextColumn[]> {
  const rows = await tx.$queryRaw<Array<{ table_name: string; column_name: string; data_type: string; udt_name: string; org: boolean }>>`
    SELECT c.table_name, c.column_name, c.data_type, c.udt_name,
           EXISTS (SELECT 1 FROM information_schema.columns o
                   WHERE o.table_schema = c.table_schema AND o.table_name = c.table_name AND o.column_name = 'organization_id') AS org
    FROM information_schema.columns c
    JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
    WHERE c.table_schema = current_schema()
      AND c.table_name <> '_prisma_migrations'
      AND (c.data_type IN ('text', 'character varying', 'json', 'jsonb')
           OR (c.data_type = 'ARRAY' AND c.udt_name IN ('_text', '_varchar')))
    ORDER BY c.table_name, c.column_name`;
  return rows.map((r) => ({
    table: r.table_name,
    column: r.column_name,
    kind: r.data_type === 'ARRAY' ? 'text_array' : r.data_type === 'json' || r.data_type === 'jsonb' ? (r.data_type as 'json' | 'jsonb') : 'text',
    organizationScoped: r.org,
  }));
}

/** One UPDATE replacing a pattern in one column; returns the rows changed. */
async function replaceInColumn(tx: Tx, col: TextColumn, r: TextReplacement, organizationId: string | null): Promise<number> {
  const c = quote(col.column);
  const inOrg = organizationId === null ? '' : ' AND "organization_id" = $3';
  const params: unknown[] = [col.kind === 'json' || col.kind === 'jsonb' ? r.jsonPattern : r.pattern, r.replacement];
  if (organizationId !== null) params.push(organizationId);
  let set: string;
  let match: string;
  switch (col.kind) {
    case 'text':
      set = `regexp_replace(${c}, $1, $2, 'gi')`;
      match = `${c} ~* $1`;
      break;
    case 'json':
    case 'jsonb':
      set = `regexp_replace(${c}::text, $1, $2, 'gi')::${col.kind}`;
      match = `${c}::text ~* $1`;
      break;
    case 'text_array':
      set = `ARRAY(SELECT regexp_replace(x, $1, $2, 'gi') FROM unnest(${c}) WITH ORDINALITY AS u(x, n) ORDER BY n)`;
      match = `array_to_string(${c}, chr(10)) ~* $1`;
      break;
  }
  return tx.$executeRawUnsafe(`UPDATE ${quote(col.table)} SET ${c} = ${set} WHERE ${match}${inOrg}`, ...params);
}

async function sweep(tx: Tx, replacements: TextReplacement[], organizationId: string, wholeDatabase: boolean) {
  const replaced = new Map<string, number>();
  for (const col of await textColumns(tx)) {
    if (!col.organizationScoped && !wholeDatabase) continue;
    for (const r of replacements) {
      const rows = await replaceInColumn(tx, col, r, col.organizationScoped ? organizationId : null);
      if (rows > 0) {
        const key = `${col.table}.${col.column}`;
        replaced.set(key, (replaced.get(key) ?? 0) + rows);
      }
    }
  }
  return [...replaced].map(([key, rows]) => {
    const [table, column] = key.split('.');
    return { table, column, rows };
  });
}

/** Removes a current member from the organization, as DELETE /members/:id does. */
async function removeMembership(tx: Tx, organizationId: string, userId: string, now: Date) {
  const { count } = await tx.membership.deleteMany({ where: { organizationId, userId } });
  await tx.teamMember.deleteMany({ where: { userId, team: { organizationId } } });
  await tx.accessGrant.deleteMany({ where: { organizationId, userId } });
  const sessions = await tx.session.updateMany({ where: { organizationId, userId, revokedAt: null }, data: { revokedAt: now } });
  const keys = await tx.apiKey.updateMany({
    where: { organizationId, userId, revokedAt: null },
    data: { revokedAt: now, revokedReason: 'member_erased' },
  });
  return { removed: count > 0, sessions: sessions.count, apiKeys: keys.count };
}

/** The account goes: no credential, no sign-in identity, no token is left; the row keeps only the pseudonym. */
async function eraseAccount(tx: Tx, userId: string, pseudonym: { name: string; email: string }, now: Date) {
  await tx.oAuthIdentity.deleteMany({ where: { userId } });
  await tx.personalSourceConnection.deleteMany({ where: { userId } });
  await tx.emailToken.deleteMany({ where: { userId } });
  const sessions = await tx.session.updateMany({ where: { userId, revokedAt: null }, data: { revokedAt: now } });
  await tx.user.update({
    where: { id: userId },
    data: {
      name: pseudonym.name,
      email: pseudonym.email,
      passwordHash: null,
      totpSecretEnc: null,
      totpPendingEnc: null,
      totpEnabled: false,
      totpLastStep: null,
    },
  });
  return sessions.count;
}

interface ClaimedRequest {
  id: string;
  organization_id: string;
  subject_user_id: string;
  pseudonym_name: string;
  pseudonym_email: string;
}

/** Erases one request in one transaction; false when another worker took it or it is no longer pending. */
async function eraseOne(deps: WorkerDeps, requestId: string): Promise<{ done: boolean; userId?: string; organizationId?: string }> {
  return deps.prisma.$transaction(
    async (tx) => {
      // The row lock holds off a concurrent cancel and any other worker until this erasure commits or rolls back.
      const [req] = await tx.$queryRaw<ClaimedRequest[]>`
        SELECT id, organization_id, subject_user_id, pseudonym_name, pseudonym_email FROM erasure_requests
        WHERE id = ${requestId} AND status = 'pending' FOR UPDATE SKIP LOCKED`;
      if (!req) return { done: false };
      const now = deps.clock.now();
      const pseudonym = { name: req.pseudonym_name, email: req.pseudonym_email };
      const membership = await tx.membership.findFirst({ where: { organizationId: req.organization_id, userId: req.subject_user_id } });
      if (membership?.role === 'owner') {
        throw new ErasureRefused('The person owns the organization: transfer ownership, then retry the erasure.');
      }
      const user = await tx.user.findUnique({ where: { id: req.subject_user_id }, select: { name: true, email: true } });
      const removal = await removeMembership(tx, req.organization_id, req.subject_user_id, now);
      const elsewhere = await tx.membership.count({ where: { userId: req.subject_user_id } });
      const accountErased = user !== null && elsewhere === 0;
      const replaced = user ? await sweep(tx, erasureReplacements(user, pseudonym), req.organization_id, accountErased) : [];
      const accountSessions = accountErased ? await eraseAccount(tx, req.subject_user_id, pseudonym, now) : 0;
      const receipt: ErasureReceipt = {
        membership_removed: removal.removed,
        account_erased: accountErased,
        sessions_revoked: removal.sessions + accountSessions,
        api_keys_revoked: removal.apiKeys,
        replaced,
      };
      await tx.erasureRequest.update({
        where: { id: req.id },
        data: { status: 'completed', receipt: receipt as unknown as Prisma.InputJsonValue, completedAt: now, error: null, attempts: { increment: 1 } },
      });
      await recordAudit(tx, {
        organizationId: req.organization_id,
        actor: SYSTEM_ACTOR,
        action: 'erasure.completed',
        target: { type: 'erasure_request', id: req.id },
        metadata: { subject_user_id: req.subject_user_id, pseudonym: pseudonym.name, tables: replaced.length, account_erased: accountErased },
        at: now,
      });
      return { done: true, userId: req.subject_user_id, organizationId: req.organization_id };
    },
    { timeout: ERASURE_TRANSACTION_TIMEOUT_MS, maxWait: 30_000 },
  );
}

async function markFailed(deps: WorkerDeps, requestId: string, err: unknown): Promise<void> {
  const now = deps.clock.now();
  const reason = err instanceof ErasureRefused ? err.message : 'The erasure could not be completed; retry it.';
  deps.logger.error('Erasure failed', { erasure_request_id: requestId, error: err instanceof Error ? err.message : String(err) });
  await deps.prisma.$transaction(async (tx) => {
    const { count } = await tx.erasureRequest.updateMany({
      where: { id: requestId, status: 'pending' },
      data: { status: 'failed', error: reason, attempts: { increment: 1 } },
    });
    if (count !== 1) return;
    const req = await tx.erasureRequest.findUniqueOrThrow({ where: { id: requestId }, select: { organizationId: true, subjectUserId: true } });
    await recordAudit(tx, {
      organizationId: req.organizationId,
      actor: SYSTEM_ACTOR,
      action: 'erasure.failed',
      target: { type: 'erasure_request', id: requestId },
      metadata: { subject_user_id: req.subjectUserId, reason },
      at: now,
    });
  });
}

export interface ErasureRunResult {
  completed: number;
  failed: number;
}

/** One run of the erasure job: every pending request of the batch, each on its own. */
export async function runErasures(deps: WorkerDeps): Promise<ErasureRunResult> {
  const pending = await deps.prisma.erasureRequest.findMany({
    where: { status: 'pending' },
    select: { id: true },
    orderBy: { createdAt: 'asc' },
    take: BATCH_SIZE,
  });
  const result: ErasureRunResult = { completed: 0, failed: 0 };
  let redis: ReturnType<WorkerDeps['redis']> | undefined;
  try {
    for (const { id } of pending) {
      let outcome: Awaited<ReturnType<typeof eraseOne>>;
      try {
        outcome = await eraseOne(deps, id);
      } catch (err) {
        result.failed += 1;
        await markFailed(deps, id, err);
        continue;
      }
      if (!outcome.done) continue;
      result.completed += 1;
      deps.logger.info('Erasure completed', { erasure_request_id: id });
      // API instances cache principals: new epochs refuse the erased member's keys and sessions at once.
      try {
        redis ??= deps.redis();
        await bumpAuthEpochs(redis, deps.config.redisPrefix, { organizationIds: [outcome.organizationId!], userIds: [outcome.userId!] });
      } catch (err) {
        deps.logger.error('Could not bump the authentication epochs after an erasure; API caches expire within their TTL', {
          erasure_request_id: id,
          error: String(err),
        });
      }
    }
  } finally {
    await redis?.quit().catch(() => undefined);
  }
  return result;
}
