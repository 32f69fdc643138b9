// Writing audit events. Callers pass their transaction client, so the event commits (or rolls back) with the
// change it describes; the API and the worker share this one writer.
import { newId, type Tx } from '@svc/db';
import type { AuditAction, AuditActor } from './actions';
import { redactMetadata } from './redact';

/** Anything with the auditEvent delegate: the Prisma client or a transaction client. */
export type AuditWriter = Pick<Tx, 'auditEvent'>;

export interface AuditEntry {
  organizationId: string;
  actor: AuditActor;
  action: AuditAction;
  target?: { type: string; id: string } | null;
  /** Client address and user agent of the request, when there was one. */
  ip?: string | null;
  userAgent?: string | null;
  /** Public facts about the change (names, roles, changed fields): never a secret, token or key value. */
  metadata?: Record<string, unknown>;
  /** When it happened (the caller's clock); now by default. */
  at?: Date;
}

const MAX_USER_AGENT = 512;
const MAX_IP = 64;

function row(entry: AuditEntry) {
  const at = entry.at ?? new Date();
  return {
    id: newId('aud', at.getTime()),
    organizationId: entry.organizationId,
    actorType: entry.actor.type,
    actorId: entry.actor.type === 'system' ? null : entry.actor.id,
    actorLabel: entry.actor.type === 'system' ? 'system' : entry.actor.label,
    action: entry.action,
    targetType: entry.target?.type ?? null,
    targetId: entry.target?.id ?? null,
    ip: entry.ip ? entry.ip.slice(0, MAX_IP) : null,
    userAgent: entry.userAgent ? entry.userAgent.slice(0, MAX_USER_AGENT) : null,
    metadata: entry.metadata ? (redactMetadata(entry.metadata) as object) : undefined,
    createdAt: at,
  };
}

export async function recordAudit(db: AuditWriter, entry: AuditEntry): Promise<string> {
  const data = row(entry);
  await db.auditEvent.create({ data });
  return data.id;
}

/** Several events at once (a failed login recorded in each organization of the user). */
export async function recordAuditMany(db: AuditWriter, entries: AuditEntry[]): Promise<void> {
  if (entries.length > 0) await db.auditEvent.createMany({ data: entries.map(row) });
}
