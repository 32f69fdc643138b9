import Joi from 'joi';
import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { list } from '../../http/responses';
import { requestMeta } from '../audit/audit.context';
import { disconnect, listConnections } from './source-connections.service';

export const connectionResponse = Joi.object({
  provider: Joi.string().valid('github'),
  login: Joi.string(),
  account_id: Joi.string(),
  scopes: Joi.array().items(Joi.string()).description('What the provider granted, e.g. ["repo", "read:user"]'),
  connected_at: Joi.string().isoDate(),
});

export function sourceConnectionRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/profile/source-connections',
      scope: 'profile:read',
      summary: 'Your personal source-host connections (never the token); connect with GET /profile/source-connections/github/connect',
      response: list(connectionResponse),
      handler: (req) => listConnections(deps, principalOf(req)),
    },
    {
      method: 'delete',
      path: '/profile/source-connections/:provider',
      scope: 'profile:update',
      summary: 'Disconnect your personal GitHub account: the sealed token is deleted',
      schemas: { params: Joi.object({ provider: Joi.string().valid('github').required() }) },
      handler: (req) => disconnect(deps, principalOf(req), req.params.provider as string, requestMeta(req)),
    },
  ];
}
