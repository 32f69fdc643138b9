import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { putSlaBody, slaPolicyResponse } from './governance.schemas';
import { getSlaPolicy, putSlaPolicy } from './governance.service';

export function governanceRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/governance/sla',
      scope: 'governance:read',
      summary: 'The remediation SLA policy: days per finding severity (null = no SLA)',
      response: slaPolicyResponse,
      handler: (req) => getSlaPolicy(deps, principalOf(req)),
    },
    {
      method: 'put',
      path: '/governance/sla',
      scope: 'governance:manage',
      summary: 'Replace the remediation SLA policy: {critical, high, medium, low, info}, each days (1..3650) or null',
      schemas: { body: putSlaBody },
      response: slaPolicyResponse,
      handler: (req) => putSlaPolicy(deps, principalOf(req), req.body, requestMeta(req)),
    },
  ];
}
