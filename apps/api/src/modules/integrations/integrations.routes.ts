import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RateLimiters } from '../../http/rate-limit';
import type { RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { requestMeta } from '../audit/audit.context';
import { requestConfirmer, withoutCurrentPassword } from '../auth/reauthentication';
import { connectIntegrationBody, integrationResponse, listIntegrationsQuery, projectIntegrationsResponse } from './integrations.schemas';
import {
  bindTeam,
  connectIntegration,
  disconnectIntegration,
  getIntegration,
  listIntegrations,
  projectIntegrations,
  unbindTeam,
} from './integrations.service';

export function integrationRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  const p = (req: { params: Record<string, unknown> }, name: string) => req.params[name] as string;
  return [
    {
      method: 'post',
      path: '/integrations',
      scope: 'integrations:manage',
      summary:
        'Connect an integration: GitHub {kind, name, token | app_installation_id, base_url?} or Slack {kind, name, bot_token, workspace_id}; credentials are write-only. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: connectIntegrationBody },
      status: 201,
      response: integrationResponse,
      sudoMode: true,
      handler: (req) =>
        connectIntegration(deps, principalOf(req), withoutCurrentPassword(req.body), requestMeta(req), requestConfirmer(deps, limiters, req)),
    },
    {
      method: 'get',
      path: '/integrations',
      scope: 'integrations:read',
      summary: 'List the organization\'s integrations with their status and team bindings (?kind=)',
      schemas: { query: listIntegrationsQuery },
      response: page(integrationResponse),
      handler: (req) => listIntegrations(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/integrations/:id',
      scope: 'integrations:read',
      summary: 'Read an integration (never its credential)',
      response: integrationResponse,
      handler: (req) => getIntegration(deps, principalOf(req), p(req, 'id')),
    },
    {
      method: 'delete',
      path: '/integrations/:id',
      scope: 'integrations:manage',
      summary: 'Disconnect an integration: its sealed credential and team bindings are deleted',
      handler: (req) => disconnectIntegration(deps, principalOf(req), p(req, 'id'), requestMeta(req)),
    },
    {
      method: 'put',
      path: '/integrations/:id/teams/:team_id',
      scope: 'integrations:bind_team',
      summary: 'Make the integration the default of its kind for the team\'s projects (replaces the team\'s previous one)',
      response: integrationResponse,
      handler: (req) => bindTeam(deps, principalOf(req), p(req, 'id'), p(req, 'team_id'), requestMeta(req)),
    },
    {
      method: 'delete',
      path: '/integrations/:id/teams/:team_id',
      scope: 'integrations:bind_team',
      summary: 'Remove the team binding',
      response: integrationResponse,
      handler: (req) => unbindTeam(deps, principalOf(req), p(req, 'id'), p(req, 'team_id'), requestMeta(req)),
    },
    {
      method: 'get',
      path: '/projects/:id/integrations',
      scope: 'integrations:read',
      summary: 'The integration of each kind the project uses by default: a team binding, else the organization\'s only one (read access required)',
      response: projectIntegrationsResponse,
      handler: (req) => projectIntegrations(deps, principalOf(req), p(req, 'id')),
    },
  ];
}
