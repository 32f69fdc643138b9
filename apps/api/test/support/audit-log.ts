// Reading the audit log as an organization's user does (GET /audit-events), and sending a request while a second
// database connection holds rows in an open transaction, to see what the request does when it runs into them.
import pg from 'pg';
import request from 'supertest';
import { pgFields } from '@svc/db';
import { bearer } from './fixtures';
import type { Harness } from './harness';
import { untilBlockedBy } from './row-locks';

export interface ListedAuditEvent {
  id: string;
  action: string;
  actor_type: string;
  actor_id: string | null;
  actor_label: string | null;
  target_type: string | null;
  target_id: string | null;
  metadata: Record<string, unknown> | null;
}

/** The caller's organization's audit events matching the filters (action, target_id, ...), newest first. */
export async function auditLog(h: Harness, token: string, filters: Record<string, string> = {}): Promise<ListedAuditEvent[]> {
  const res = await request(h.app).get(`/api/v1/audit-events?${new URLSearchParams({ limit: '100', ...filters })}`).set(bearer(token));
  if (res.status !== 200) throw new Error(`GET /audit-events answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.data as ListedAuditEvent[];
}

/**
 * Runs `statements` in a transaction of a second connection, sends the request, and commits once the request waits
 * for that transaction (or has answered without waiting). Answers the request's response.
 */
export async function sentWhileHeld<R>(h: Harness, statements: Array<[string, unknown[]]>, send: () => PromiseLike<R>): Promise<R> {
  const holder = new pg.Client(pgFields(h.config.databaseUrl));
  await holder.connect();
  try {
    await holder.query('BEGIN');
    for (const [sql, params] of statements) await holder.query(sql, params);
    const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
    let answered = false;
    const response = Promise.resolve(send()).finally(() => (answered = true));
    await untilBlockedBy(h, pid, 1, { orDone: () => answered });
    await holder.query('COMMIT');
    return await response;
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
}
