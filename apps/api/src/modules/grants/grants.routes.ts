import type { Request } from 'express';
import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { page } from '../../http/responses';
import { createGrantBody, grantResponseFor, listGrantsQuery } from './grants.schemas';
import { deleteGrant, listGrants, upsertGrant, type GrantTarget } from './grants.service';

const SCOPE = 'assessments:manage_access';

export function grantRoutes(deps: AppDeps): RouteSpec[] {
  const routes: RouteSpec[] = [];
  for (const kind of ['project', 'assessment'] as const) {
    const base = `/${kind}s/:id/access`;
    const target = (req: Request): GrantTarget => ({ kind, id: req.params.id as string });
    routes.push(
      {
        method: 'get',
        path: base,
        scope: SCOPE,
        summary: `List the grants on a ${kind} (write access to it required)`,
        schemas: { query: listGrantsQuery },
        response: page(grantResponseFor(kind)),
        handler: (req) => listGrants(deps, principalOf(req), target(req), req.query as never),
      },
      {
        method: 'post',
        path: base,
        scope: SCOPE,
        summary: `Grant read or write access on a ${kind} to a user or a team: 201 when new, 200 when it replaces the subject's grant; to yourself or a team you are in: 403; a caller demoted while it runs is checked again with the role left`,
        schemas: { body: createGrantBody },
        status: 201,
        // Documents the 201; a grant that replaces the subject's existing one answers 200 with the same shape.
        response: grantResponseFor(kind),
        handler: async (req, res) => {
          const { created, grant } = await upsertGrant(deps, principalOf(req), target(req), req.body, requestMeta(req));
          res.status(created ? 201 : 200).json(grant);
        },
      },
      {
        method: 'delete',
        path: `${base}/:grant_id`,
        scope: SCOPE,
        summary: `Remove a grant from a ${kind}`,
        handler: (req) => deleteGrant(deps, principalOf(req), target(req), req.params.grant_id as string, requestMeta(req)),
      },
    );
  }
  return routes;
}
