import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import type { RateLimiters } from '../../http/rate-limit';
import { acting, requestMeta } from '../audit/audit.context';
import { page } from '../../http/responses';
import {
  acceptInvitationBody,
  acceptedInvitationResponse,
  createInvitationBody,
  invitationResponse,
  listInvitationsQuery,
} from './invitations.schemas';
import { acceptInvitation, createInvitation, listInvitations, revokeInvitation } from './invitations.service';
import { inTurnOf } from '../../http/organization-turns';

export function invitationRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/invitations',
      scope: 'members:invite',
      summary:
        'Invite an e-mail address with a role (not above yours, never owner); mails an accept link valid 7 days. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: createInvitationBody },
      status: 201,
      response: invitationResponse,
      sudoMode: true,
      handler: (req) => createInvitation(deps, limiters, acting(req), req.body),
    },
    {
      method: 'get',
      path: '/invitations',
      scope: 'members:read',
      summary: "List the organization's invitations (pending, accepted, expired)",
      schemas: { query: listInvitationsQuery },
      response: page(invitationResponse),
      handler: (req) => listInvitations(deps, principalOf(req), req.query as never),
    },
    {
      method: 'post',
      path: '/invitations/accept',
      scope: 'public',
      summary: 'Accept an invitation with the mailed token: new e-mail -> active user with the password; existing user -> password check',
      schemas: { body: acceptInvitationBody },
      response: acceptedInvitationResponse,
      // Its claim waits for the inviting organization's deletion: in a turn of that organization (inTurnOf).
      handler: (req) => acceptInvitation(deps, limiters, req.body, requestMeta(req), (organizationId) => inTurnOf(req, organizationId)),
    },
    {
      method: 'delete',
      path: '/invitations/:id',
      scope: 'members:invite',
      summary: 'Revoke a pending invitation',
      handler: (req) => revokeInvitation(deps, acting(req), req.params.id as string),
    },
  ];
}
