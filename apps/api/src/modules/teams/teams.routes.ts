import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { page } from '../../http/responses';
import {
  createTeamBody,
  listTeamMembersQuery,
  listTeamsQuery,
  teamMemberResponse,
  teamResponse,
  updateTeamBody,
} from './teams.schemas';
import {
  addTeamMember, createTeam, deleteTeam, getTeam, listTeamMembers, listTeams, removeTeamMember, updateTeam,
} from './teams.service';

export function teamRoutes(deps: AppDeps): RouteSpec[] {
  const id = (v: unknown) => v as string;
  return [
    {
      method: 'get',
      path: '/teams',
      scope: 'teams:read',
      summary: 'List teams',
      schemas: { query: listTeamsQuery },
      response: page(teamResponse),
      handler: (req) => listTeams(deps, principalOf(req), req.query as never),
    },
    {
      method: 'post',
      path: '/teams',
      scope: 'teams:create',
      summary: 'Create a team (name unique in the organization)',
      schemas: { body: createTeamBody },
      status: 201,
      response: teamResponse,
      handler: (req) => createTeam(deps, principalOf(req), req.body, requestMeta(req)),
    },
    {
      method: 'get',
      path: '/teams/:id',
      scope: 'teams:read',
      summary: 'Read a team',
      response: teamResponse,
      handler: (req) => getTeam(deps, principalOf(req), id(req.params.id)),
    },
    {
      method: 'patch',
      path: '/teams/:id',
      scope: 'teams:update',
      summary: "Edit a team's name or description",
      schemas: { body: updateTeamBody },
      response: teamResponse,
      handler: (req) => updateTeam(deps, principalOf(req), id(req.params.id), req.body, requestMeta(req)),
    },
    {
      method: 'delete',
      path: '/teams/:id',
      scope: 'teams:delete',
      summary: 'Delete a team with its memberships and grants',
      handler: (req) => deleteTeam(deps, principalOf(req), id(req.params.id), requestMeta(req)),
    },
    {
      method: 'get',
      path: '/teams/:id/members',
      scope: 'teams:read',
      summary: "List a team's members",
      schemas: { query: listTeamMembersQuery },
      response: page(teamMemberResponse),
      handler: (req) => listTeamMembers(deps, principalOf(req), id(req.params.id), req.query as never),
    },
    {
      method: 'put',
      path: '/teams/:id/members/:user_id',
      scope: 'teams:manage_members',
      summary: 'Add an organization member to a team (idempotent); adding yourself, or a caller demoted while it runs: 403',
      response: teamMemberResponse,
      handler: (req) => addTeamMember(deps, principalOf(req), id(req.params.id), id(req.params.user_id), requestMeta(req)),
    },
    {
      method: 'delete',
      path: '/teams/:id/members/:user_id',
      scope: 'teams:manage_members',
      summary: 'Remove a member from a team',
      handler: (req) => removeTeamMember(deps, principalOf(req), id(req.params.id), id(req.params.user_id), requestMeta(req)),
    },
  ];
}
