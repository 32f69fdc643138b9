import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RateLimiters } from '../../http/rate-limit';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { page } from '../../http/responses';
import { changeRoleBody, listMembersQuery, memberResponse } from './members.schemas';
import { changeRole, listMembers, removeMember } from './members.service';

export function memberRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/members',
      scope: 'members:read',
      summary: 'List the members of the organization with their role and user details',
      schemas: { query: listMembersQuery },
      response: page(memberResponse),
      handler: (req) => listMembers(deps, principalOf(req), req.query as never),
    },
    {
      method: 'patch',
      path: '/members/:user_id',
      scope: 'members:change_role',
      summary:
        "Change a member's role (never above your own; the owner role moves by transfer-ownership). Raising it from a session signed in more than 10 minutes ago needs current_password (else 403 REAUTHENTICATION_REQUIRED); a caller demoted while it runs: 403; a lowering that the role as committed makes a raise (lowered further meanwhile): 409, send it again",
      schemas: { body: changeRoleBody },
      response: memberResponse,
      sudoMode: true,
      handler: (req) => changeRole(deps, limiters, principalOf(req), req.params.user_id as string, req.body, requestMeta(req)),
    },
    {
      method: 'delete',
      path: '/members/:user_id',
      scope: 'members:remove',
      summary: 'Remove a member; their sessions and API keys in this organization stop working; a caller demoted while it runs: 403',
      handler: (req) => removeMember(deps, principalOf(req), req.params.user_id as string, requestMeta(req)),
    },
  ];
}
