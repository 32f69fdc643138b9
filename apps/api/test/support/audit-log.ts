// Reading the audit log the way its users do: GET /audit-events with a credential of the organization.
import request from 'supertest';
import type { Harness } from './harness';
import { bearer } from './fixtures';

/** One entry as GET /audit-events answers it. */
export interface ListedAuditEntry {
  id: string;
  action: string;
  actor_type: string;
  actor_id: string | null;
  actor_label: string | null;
  target_type: string | null;
  target_id: string | null;
  metadata: Record<string, unknown> | null;
}

/** The first page (up to 100 entries, newest first) of the audit log its organization shows to `token`; filters as the route takes them. */
export async function auditLog(h: Harness, token: string, filters: Record<string, string> = {}): Promise<ListedAuditEntry[]> {
  const res = await request(h.app).get('/api/v1/audit-events').query({ limit: 100, ...filters }).set(bearer(token));
  if (res.status !== 200) throw new Error(`GET /audit-events answered ${res.status}: ${res.text}`);
  return res.body.data;
}
