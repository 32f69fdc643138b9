import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { keyPolicyResponse, updateKeyPolicyBody } from './key-policy.schemas';
import { getKeyPolicy, updateKeyPolicy } from './key-policy.service';

export function keyPolicyRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/organization/api-key-policy',
      scope: 'org:read',
      summary: "Read the organization's API-key lifecycle policy",
      response: keyPolicyResponse,
      handler: (req) => getKeyPolicy(deps, principalOf(req)),
    },
    {
      method: 'put',
      path: '/organization/api-key-policy',
      scope: 'org:update',
      summary: 'Set the API-key lifecycle policy: {enabled, require_expiration?, max_lifetime_days?, warn_days_before?, inactivity_days?}',
      schemas: { body: updateKeyPolicyBody },
      response: keyPolicyResponse,
      handler: (req) => updateKeyPolicy(deps, principalOf(req), req.body, requestMeta(req)),
    },
  ];
}
