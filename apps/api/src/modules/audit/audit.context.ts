// What the API knows about who acted and from where, turned into audit events. Services receive the request's
// RequestMeta (client address, user agent) from their routes and record through recordAs (the principal acted)
// or recordIn*Organizations (sign-in, before there is a principal), inside the transaction of the change they
// describe.
import type { Request } from 'express';
import { recordAuditMany, type AuditAction, type AuditActor, type AuditEntry } from '@svc/audit';
import type { Tx } from '@svc/db';
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

/** Records the events in every organization the user belongs to (sign-in failures, second-factor changes). */
export async function recordInUserOrganizations(
  db: AuditDb & Pick<Tx, 'membership'>,
  actor: Extract<AuditActor, { type: 'user' }>,
  meta: RequestMeta,
  at: Date,
  events: AuditEvent | AuditEvent[],
): Promise<void> {
  // Unscoped: a user's own events (before or outside any one organization's request) go to each of theirs.
  const memberships = await db.membership.findMany({ where: { userId: actor.id }, select: { organizationId: true } });
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
