import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RateLimiters } from '../../http/rate-limit';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import {
  deleteOrganizationBody,
  organizationResponse,
  transferOwnershipBody,
  transferOwnershipResponse,
  updateOrganizationBody,
} from './organizations.schemas';
import { deleteOrganization, getOrganization, transferOwnership, updateOrganization } from './organizations.service';

export function organizationRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/organization',
      scope: 'org:read',
      summary: "Read the caller's organization",
      response: organizationResponse,
      handler: (req) => getOrganization(deps, principalOf(req)),
    },
    {
      method: 'patch',
      path: '/organization',
      scope: 'org:update',
      summary: 'Rename the organization',
      schemas: { body: updateOrganizationBody },
      response: organizationResponse,
      handler: (req) => updateOrganization(deps, principalOf(req), req.body, requestMeta(req)),
    },
    {
      method: 'delete',
      path: '/organization',
      scope: 'org:delete',
      summary:
        'Permanently delete the organization and everything in it; body {confirm: <organization name>}. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED); an owner who transferred ownership while it ran: 403, nothing deleted',
      schemas: { body: deleteOrganizationBody },
      sudoMode: true,
      handler: (req) => deleteOrganization(deps, limiters, principalOf(req), req.body, requestMeta(req)),
    },
    {
      method: 'post',
      path: '/organization/transfer-ownership',
      scope: 'org:transfer_ownership',
      summary:
        'Make an active member the owner; the previous owner becomes an admin. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: transferOwnershipBody },
      sudoMode: true,
      response: transferOwnershipResponse,
      handler: (req) => transferOwnership(deps, limiters, principalOf(req), req.body, requestMeta(req)),
    },
  ];
}
