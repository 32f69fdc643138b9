// Reading the audit log of the caller's organization: a filtered, cursor-paginated list, and exports as JSON Lines
// or CSV streamed in batches (oldest first), with the same filters.
import { once } from 'node:events';
import type { Response } from 'express';
import { AUDIT_ACTIONS, isAuditAction } from '@svc/audit';
import { scopedTo, type AuditEvent, type Prisma } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { csvField } from '../../http/csv';

export interface AuditFilters {
  action?: string;
  actor_id?: string;
  target_id?: string;
  since?: Date;
  until?: Date;
}

export const AUDIT_EXPORT_FORMATS = ['jsonl', 'csv'] as const;
export type AuditExportFormat = (typeof AUDIT_EXPORT_FORMATS)[number];

export function presentAuditEvent(e: AuditEvent) {
  return {
    id: e.id,
    created_at: e.createdAt.toISOString(),
    action: e.action,
    actor_type: e.actorType,
    actor_id: e.actorId,
    actor_label: e.actorLabel,
    target_type: e.targetType,
    target_id: e.targetId,
    ip: e.ip,
    user_agent: e.userAgent,
    metadata: (e.metadata ?? null) as Record<string, unknown> | null,
  };
}

export type PresentedAuditEvent = ReturnType<typeof presentAuditEvent>;

/** The filters; always queried through scopedTo(deps.prisma, principal), so another organization's events are never selected. */
function auditWhere(filters: AuditFilters): Prisma.AuditEventWhereInput {
  if (filters.action !== undefined && !isAuditAction(filters.action)) {
    throw unprocessable(`action must be one of ${AUDIT_ACTIONS.join(', ')}.`);
  }
  return {
    ...(filters.action && { action: filters.action }),
    ...(filters.actor_id && { actorId: filters.actor_id }),
    ...(filters.target_id && { targetId: filters.target_id }),
    ...((filters.since || filters.until) && {
      createdAt: { ...(filters.since && { gte: filters.since }), ...(filters.until && { lt: filters.until }) },
    }),
  };
}

export async function listAuditEvents(deps: AppDeps, principal: Principal, query: PageQuery & AuditFilters) {
  const where = auditWhere(query);
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).auditEvent.findMany({ ...args, where: { ...where, ...args.where } });
  return toPage(rows, query, presentAuditEvent);
}

// ---------------------------------------------------------------------------------------------------------------
// CSV (RFC 4180)

export const AUDIT_CSV_COLUMNS = [
  'id', 'created_at', 'action', 'actor_type', 'actor_id', 'actor_label', 'target_type', 'target_id', 'ip', 'user_agent', 'metadata',
] as const satisfies ReadonlyArray<keyof PresentedAuditEvent>;


export function auditCsvRecord(e: PresentedAuditEvent): string {
  const cell = (c: (typeof AUDIT_CSV_COLUMNS)[number]) => (c === 'metadata' ? (e.metadata ? JSON.stringify(e.metadata) : '') : e[c]);
  return `${AUDIT_CSV_COLUMNS.map((c) => csvField(cell(c))).join(',')}\r\n`;
}

// ---------------------------------------------------------------------------------------------------------------
// Export

const EXPORT_BATCH = 1000;

async function write(res: Response, chunk: string): Promise<void> {
  if (!res.write(chunk)) await once(res, 'drain');
}

export async function exportAuditEvents(
  deps: AppDeps,
  principal: Principal,
  query: AuditFilters & { format: AuditExportFormat },
  res: Response,
): Promise<void> {
  const db = scopedTo(deps.prisma, principal);
  const where = auditWhere(query);
  const stamp = deps.clock.now().toISOString().slice(0, 10);
  const csv = query.format === 'csv';
  // attachment() first: it sets a type from the file extension, which .type() then replaces.
  res
    .status(200)
    .attachment(`audit-events-${stamp}.${query.format}`)
    .type(csv ? 'text/csv; charset=utf-8' : 'application/jsonl; charset=utf-8');
  try {
    if (csv) await write(res, `${AUDIT_CSV_COLUMNS.join(',')}\r\n`);
    // Oldest first, read in batches along the (time-ordered) id: an export never holds one huge query or body.
    for (let cursor: string | undefined; ; ) {
      const rows = await db.auditEvent.findMany({
        where: { ...where, ...(cursor && { id: { gt: cursor } }) },
        orderBy: { id: 'asc' },
        take: EXPORT_BATCH,
      });
      const text = rows.map((row) => (csv ? auditCsvRecord(presentAuditEvent(row)) : `${JSON.stringify(presentAuditEvent(row))}\n`));
      if (text.length > 0) await write(res, text.join(''));
      if (rows.length < EXPORT_BATCH) break;
      cursor = rows[rows.length - 1].id;
    }
    res.end();
  } catch (err) {
    // The status line is gone already: cut the body short so the client sees an incomplete download.
    deps.logger.error('Audit export failed mid-stream', { error: err instanceof Error ? err.message : String(err) });
    res.destroy(err instanceof Error ? err : undefined);
  }
}
