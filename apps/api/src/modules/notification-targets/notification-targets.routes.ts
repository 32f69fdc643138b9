// Notification targets (Slack, Microsoft Teams, e-mail) of the caller's organization.
import { EVENT_CATALOGUE } from '@svc/webhooks';
import type { AppDeps } from '../../app-deps';
import { principalOf, tenantOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import type { RateLimiters } from '../../http/rate-limit';
import { page } from '../../http/responses';
import { acting } from '../audit/audit.context';
import { requestConfirmer, withoutCurrentPassword } from '../auth/reauthentication';
import { requireOrgWideRouting } from '../access/event-routing';
import { createTarget, listTargets, readTarget, revokeTarget, sendTestMessage, updateTarget } from './notification-targets.service';
import { createTargetBody, eventTypesResponse, listQuery, targetParams, targetResponse, testMessageResponse, updateTargetBody } from './notification-targets.schemas';

const BASE = '/notification-targets';

export function notificationTargetRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [
    {
      // The same catalogue as GET /webhooks/events, for those who configure targets without webhook access.
      method: 'get', path: `${BASE}/events`, scope: 'notification_targets:read', summary: 'List the event types a target can receive',
      response: eventTypesResponse,
      handler: () => ({ data: EVENT_CATALOGUE.map((e) => ({ type: e.type, description: e.description })) }),
    },
    {
      method: 'post', path: BASE, scope: 'notification_targets:configure', status: 201,
      summary:
        'Create a notification target (Slack, Teams or e-mail); a chat URL must pass the public-address rule. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: createTargetBody }, response: targetResponse,
      sudoMode: true,
      handler: (req) => {
        requireOrgWideRouting(principalOf(req), 'Notification targets');
        return createTarget(deps, tenantOf(req), withoutCurrentPassword(req.body), acting(req), requestConfirmer(deps, limiters, req));
      },
    },
    {
      method: 'get', path: BASE, scope: 'notification_targets:read', summary: 'List notification targets with their delivery status',
      schemas: { query: listQuery }, response: page(targetResponse),
      handler: (req) => listTargets(deps, tenantOf(req), req.query as never),
    },
    {
      method: 'get', path: `${BASE}/:id`, scope: 'notification_targets:read', summary: 'Read one notification target with its delivery status',
      schemas: { params: targetParams }, response: targetResponse,
      handler: (req) => readTarget(deps, tenantOf(req), idParam(req)),
    },
    {
      method: 'patch', path: `${BASE}/:id`, scope: 'notification_targets:configure',
      summary:
        'Update name, URL or recipients, events, severity filter or active status. A new URL, a recipient not already one, or turning a disabled target back on, from a session signed in more than 10 minutes ago needs current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { params: targetParams, body: updateTargetBody }, response: targetResponse,
      sudoMode: true,
      handler: (req) => {
        requireOrgWideRouting(principalOf(req), 'Notification targets');
        return updateTarget(deps, tenantOf(req), idParam(req), withoutCurrentPassword(req.body), acting(req), requestConfirmer(deps, limiters, req));
      },
    },
    {
      method: 'delete', path: `${BASE}/:id`, scope: 'notification_targets:configure', summary: 'Revoke a notification target',
      schemas: { params: targetParams },
      handler: (req) => revokeTarget(deps, tenantOf(req), idParam(req), acting(req)),
    },
    {
      method: 'post', path: `${BASE}/:id/test`, scope: 'notification_targets:test', status: 202,
      summary: 'Send a test message to this target through the delivery pipeline (409 when the target is disabled)',
      schemas: { params: targetParams }, response: testMessageResponse,
      handler: (req) => sendTestMessage(deps, tenantOf(req), idParam(req), acting(req)),
    },
  ];
}
