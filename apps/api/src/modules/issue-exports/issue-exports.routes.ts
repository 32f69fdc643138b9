// Issue export targets (GitHub Issues, Jira) of the caller's organization, and the export of a finding to one.
import type { AppDeps } from '../../app-deps';
import { principalOf, tenantOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import type { RateLimiters } from '../../http/rate-limit';
import { list, page } from '../../http/responses';
import { acting } from '../audit/audit.context';
import { requestConfirmer, withoutCurrentPassword } from '../auth/reauthentication';
import {
  createIssueTarget,
  exportFinding,
  findIssueTarget,
  listFindingExports,
  listIssueTargets,
  presentIssueTarget,
  revokeIssueTarget,
  updateIssueTarget,
} from './issue-exports.service';
import {
  createIssueTargetBody,
  exportFindingBody,
  findingParams,
  issueExportResponse,
  issueTargetParams,
  issueTargetResponse,
  listQuery,
  updateIssueTargetBody,
} from './issue-exports.schemas';

const BASE = '/issue-export-targets';

export function issueExportRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [
    {
      method: 'post', path: BASE, scope: 'issue_exports:configure', status: 201,
      summary:
        'Create a GitHub Issues or Jira target; credentials are write-only and sealed. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: createIssueTargetBody }, response: issueTargetResponse,
      sudoMode: true,
      handler: (req) => createIssueTarget(deps, tenantOf(req), withoutCurrentPassword(req.body), acting(req), requestConfirmer(deps, limiters, req)),
    },
    {
      method: 'get', path: BASE, scope: 'issue_exports:read', summary: 'List issue export targets with their status',
      schemas: { query: listQuery }, response: page(issueTargetResponse),
      handler: (req) => listIssueTargets(deps, tenantOf(req), req.query as never),
    },
    {
      method: 'get', path: `${BASE}/:id`, scope: 'issue_exports:read', summary: 'Read one issue export target',
      schemas: { params: issueTargetParams }, response: issueTargetResponse,
      handler: async (req) => presentIssueTarget(await findIssueTarget(deps, tenantOf(req), idParam(req))),
    },
    {
      method: 'patch', path: `${BASE}/:id`, scope: 'issue_exports:configure',
      summary:
        'Update name, URL, repository or project, issue type, or replace the credentials. A new URL, repository or project from a session signed in more than 10 minutes ago needs current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { params: issueTargetParams, body: updateIssueTargetBody }, response: issueTargetResponse,
      sudoMode: true,
      handler: (req) => updateIssueTarget(deps, tenantOf(req), idParam(req), withoutCurrentPassword(req.body), acting(req), requestConfirmer(deps, limiters, req)),
    },
    {
      method: 'delete', path: `${BASE}/:id`, scope: 'issue_exports:configure', summary: 'Revoke an issue export target (its credentials are erased)',
      schemas: { params: issueTargetParams },
      handler: (req) => revokeIssueTarget(deps, tenantOf(req), idParam(req), acting(req)),
    },
    {
      method: 'post', path: '/findings/:id/issue-exports', scope: 'findings:export_issue', status: 202,
      summary: 'Export a finding to an issue tracker (202 queued; 200 with the existing export when already exported or queued)',
      schemas: { params: findingParams, body: exportFindingBody }, response: issueExportResponse,
      handler: async (req, res) => {
        const { status, body } = await exportFinding(deps, acting(req), idParam(req), req.body.target_id);
        res.status(status).json(body);
      },
    },
    {
      method: 'get', path: '/findings/:id/issue-exports', scope: 'findings:read', summary: "A finding's issue exports: status, external key and URL",
      schemas: { params: findingParams }, response: list(issueExportResponse),
      handler: (req) => listFindingExports(deps, principalOf(req), idParam(req)),
    },
  ];
}
