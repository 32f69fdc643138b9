// What the API knows about who acted and from where, turned into audit events. Services receive the request's
// RequestMeta (client address, user agent) from their routes and record through recordAs (the principal acted)
// or recordIn*Organizations (sign-in, before there is a principal), inside the transaction of the change they
// describe.
import type { Request } from 'express';
import { recordAuditMany, type AuditAction, type AuditActor, type AuditEntry } from '@svc/audit';
import type { Db, Tx } from '@svc/db';
import { principalOf, type Principal } from '../../auth/principal';

/** Where a request came from: the client address (as `trust proxy` resolves it) and its user agent. */
export interface RequestMeta {
  ip?: string | null;
  userAgent?: string | null;
}

export function requestMeta(req: Request): RequestMeta {
  return { ip: req.ip ?? null, userAgent: req.get('user-agent') ?? null };
}

/** Enough of a Prisma client (or transaction) to resolve the actor and write the event. */
export type AuditDb = Pick<Tx, 'auditEvent' | 'user'>;

export interface AuditEvent {
  action: AuditAction;
  target?: { type: string; id: string } | null;
  metadata?: Record<string, unknown>;
}

/** A session acts as its user (labelled with the e-mail); an API key as itself (labelled with its prefix). */
export async function actorOf(db: AuditDb, principal: Principal): Promise<AuditActor> {
  if (principal.kind === 'api_key' && principal.apiKeyId) {
    return { type: 'api_key', id: principal.apiKeyId, label: principal.apiKeyPrefix ?? '' };
  }
  return userActor(db, principal.userId);
}

export async function userActor(db: AuditDb, userId: string): Promise<Extract<AuditActor, { type: 'user' }>> {
  const user = await db.user.findUnique({ where: { id: userId }, select: { email: true } });
  return { type: 'user', id: userId, label: user?.email ?? null };
}

/** Records one event (or several) done by the principal in its organization. */
export async function recordAs(
  db: AuditDb,
  principal: Principal,
  meta: RequestMeta,
  at: Date,
  events: AuditEvent | AuditEvent[],
): Promise<void> {
  const actor = await actorOf(db, principal);
  await recordInOrganizations(db, [principal.organizationId], actor, meta, at, events);
}

/** Records the events in each of the organizations (a user's failed login, which belongs to no session yet). */
export async function recordInOrganizations(
  db: AuditDb,
  organizationIds: string[],
  actor: AuditActor,
  meta: RequestMeta,
  at: Date,
  events: AuditEvent | AuditEvent[],
): Promise<void> {
  const list = Array.isArray(events) ? events : [events];
  const entries: AuditEntry[] = organizationIds.flatMap((organizationId) =>
    list.map((event) => ({ organizationId, actor, ip: meta.ip, userAgent: meta.userAgent, at, ...event })),
  );
  await recordAuditMany(db, entries);
}

/** A client or a transaction: enough to lock the user's row, read their memberships and write the events. */
export type UserAuditDb = AuditDb & Pick<Tx, 'membership' | '$queryRaw'> & { $transaction?: Db['$transaction'] };

/**
 * Records the events in every organization the user belongs to (sign-in failures, second-factor changes), as the
 * user labelled with the e-mail their row holds then (read under the lock: a label read earlier may predate an erasure).
 *
 * Under the user's row FOR SHARE: a GDPR erasure takes that row before it removes a membership (apps/worker
 * erasure.ts), so an entry is committed either before the person leaves an organization (and the erasure scrubs it
 * with their other entries) or after, when that organization is no longer read here; never one read before and
 * written after. Outside a transaction it runs in a short one of its own; inside one, the lock lasts until its commit.
 */
export async function recordInUserOrganizations(
  db: UserAuditDb,
  userId: string,
  meta: RequestMeta,
  at: Date,
  events: AuditEvent | AuditEvent[],
): Promise<void> {
  const record = (tx: UserAuditDb) => recordUnderUserLock(tx, userId, meta, at, events);
  // Not on an answer's path (or inside the caller's own transaction): a wait behind an erasure step must not lose the entry.
  if (db.$transaction) await db.$transaction(record, { maxWait: 10_000, timeout: 30_000 });
  else await record(db);
}

async function recordUnderUserLock(db: UserAuditDb, userId: string, meta: RequestMeta, at: Date, events: AuditEvent | AuditEvent[]): Promise<void> {
  const [user] = await db.$queryRaw<Array<{ email: string }>>`SELECT email FROM users WHERE id = ${userId} FOR SHARE`;
  if (!user) return;
  // A statement of its own after the lock: it sees what an erasure committed while the lock was waited for (one
  // statement joining the memberships would re-check only the user's row).
  // Unscoped: a user's own events (before or outside any one organization's request) go to each of theirs.
  const memberships = await db.membership.findMany({ where: { userId }, select: { organizationId: true } });
  const actor = { type: 'user' as const, id: userId, label: user.email };
  await recordInOrganizations(db, memberships.map((m) => m.organizationId), actor, meta, at, events);
}

/** The principal and where its request came from: what a service needs to audit what it does for the request. */
export interface Acting {
  principal: Principal;
  meta: RequestMeta;
}

export function acting(req: Request): Acting {
  return { principal: principalOf(req), meta: requestMeta(req) };
}
