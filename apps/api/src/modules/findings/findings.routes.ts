import type { FindingStatus } from '@svc/domain';
import type { Scope } from '@svc/scopes';
import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { inTurnOf } from '../../http/organization-turns';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { exportFindings } from './findings.export';
import { exportFindingsQuery, findingResponse, listFindingsQuery, reassignBody, recordFindingBody, severityBody } from './findings.schemas';
import {
  getFinding,
  listFindings,
  reassignFinding,
  recordFinding,
  setFindingSeverity,
  setFindingStatus,
} from './findings.service';

/** The triage actions that only change the status: path, scope, new status, and what the request does (for a 403). */
const STATUS_ACTIONS: ReadonlyArray<{ action: string; scope: Scope; status: FindingStatus; summary: string; doing: string }> = [
  { action: 'confirm', scope: 'findings:triage', status: 'confirmed', summary: 'Confirm: publishes finding.confirmed and finding.status_changed', doing: 'Triaging findings' },
  { action: 'dismiss', scope: 'findings:triage', status: 'dismissed', summary: 'Dismiss as not an issue', doing: 'Triaging findings' },
  { action: 'mark-fixed', scope: 'findings:triage', status: 'fixed', summary: 'Mark as fixed', doing: 'Triaging findings' },
  { action: 'accept-risk', scope: 'findings:accept_risk', status: 'accepted_risk', summary: 'Accept as a known risk', doing: 'Accepting risks' },
  { action: 'suppress', scope: 'findings:suppress', status: 'suppressed', summary: 'Suppress permanently (final)', doing: 'Suppressing findings' },
];

export function findingRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/assessments/:id/findings',
      scope: 'assessments:update',
      summary: 'Engine: record a finding on a running assessment: 201 when new, 200 when the fingerprint was already recorded (updated)',
      schemas: { body: recordFindingBody },
      response: findingResponse,
      // Creates (201), though it answers 200 for a fingerprint already recorded.
      idempotent: true,
      // The engine's hot path: concurrent requests share their access check and their write (access.service.ts,
      // findingWriter), one statement of each in flight.
      sharesStatements: true,
      handler: async (req, res) => {
        const { created, finding } = await recordFinding(deps, principalOf(req), idParam(req), req.body, inTurnOf(req));
        res.status(created ? 201 : 200).json(finding);
      },
    },
    // Before /findings/:id, which would otherwise take "export" for an id.
    {
      method: 'get',
      path: '/findings/export',
      scope: 'findings:export',
      summary: 'Download the findings you can read: ?format=sarif (application/sarif+json), json (application/json) or csv (text/csv); same filters as the list',
      schemas: { query: exportFindingsQuery },
      responseMediaType: 'application/sarif+json',
      handler: (req, res) => exportFindings(deps, principalOf(req), req.query as never, res),
    },
    {
      method: 'get',
      path: '/findings',
      scope: 'findings:read',
      summary: 'List the findings you can read; filters project_id, assessment_id, severity, status, assignee',
      schemas: { query: listFindingsQuery },
      response: page(findingResponse),
      handler: (req) => listFindings(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/findings/:id',
      scope: 'findings:read',
      summary: 'Read a finding (read access to its assessment required)',
      response: findingResponse,
      handler: (req) => getFinding(deps, principalOf(req), idParam(req)),
    },
    ...STATUS_ACTIONS.map(
      (a): RouteSpec => ({
        method: 'post',
        path: `/findings/:id/${a.action}`,
        scope: a.scope,
        summary: `${a.summary} (write access to the assessment required)`,
        response: findingResponse,
        handler: (req) => setFindingStatus(deps, principalOf(req), idParam(req), a.status, { scope: a.scope, action: a.doing }),
      }),
    ),
    {
      method: 'post',
      path: '/findings/:id/reassign',
      scope: 'findings:triage',
      summary: 'Assign to a member of the organization, or unassign with null (write access required)',
      schemas: { body: reassignBody },
      response: findingResponse,
      handler: (req) => reassignFinding(deps, principalOf(req), idParam(req), req.body),
    },
    {
      method: 'post',
      path: '/findings/:id/severity',
      scope: 'findings:edit_severity',
      summary: 'Override the severity (write access required)',
      schemas: { body: severityBody },
      response: findingResponse,
      handler: (req) => setFindingSeverity(deps, principalOf(req), idParam(req), req.body),
    },
  ];
}
