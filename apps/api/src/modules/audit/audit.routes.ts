import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { auditEventResponse, exportAuditEventsQuery, listAuditEventsQuery } from './audit.schemas';
import { exportAuditEvents, listAuditEvents } from './audit.service';

export function auditRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/audit-events',
      scope: 'audit:read',
      summary: "List the organization's audit events, newest first; filters action, actor_id, target_id, since, until",
      schemas: { query: listAuditEventsQuery },
      response: page(auditEventResponse),
      handler: (req) => listAuditEvents(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/audit-events/export',
      scope: 'audit:export',
      summary: 'Download the audit events (oldest first) as JSON Lines (format=jsonl, default) or CSV (format=csv, text/csv); same filters as the list',
      schemas: { query: exportAuditEventsQuery },
      responseMediaType: 'application/jsonl',
      handler: (req, res) => exportAuditEvents(deps, principalOf(req), req.query as never, res),
    },
  ];
}
