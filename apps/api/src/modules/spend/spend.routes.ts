import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import {
  balanceResponse,
  createLimitBody,
  limitResponse,
  listLimitsQuery,
  listUsageQuery,
  recordUsageBody,
  updateLimitBody,
  usageResponse,
} from './spend.schemas';
import {
  createLimit,
  deleteLimit,
  getBalance,
  getLimit,
  listLimits,
  listUsage,
  recordUsage,
  updateLimit,
} from './spend.service';

export function spendRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/usage',
      scope: 'billing:manage',
      summary: 'Engine: record credits spent {project_id?, credits, description?}; may publish spend.threshold_crossed / spend.cap_reached',
      schemas: { body: recordUsageBody },
      status: 201,
      response: usageResponse,
      handler: (req) => recordUsage(deps, principalOf(req), req.body),
    },
    {
      method: 'get',
      path: '/billing/usage',
      scope: 'billing:read',
      summary: 'Usage records, newest first (?project_id=, ?since=, ?until=)',
      schemas: { query: listUsageQuery },
      response: page(usageResponse),
      handler: (req) => listUsage(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/billing/balance',
      scope: 'billing:read',
      summary: 'Credits spent by the organization and per project, and whether a cap stops launches',
      response: balanceResponse,
      handler: (req) => getBalance(deps, principalOf(req)),
    },
    {
      method: 'get',
      path: '/billing/limits',
      scope: 'billing:read',
      summary: 'Spend thresholds and caps (?project_id=, ?kind=)',
      schemas: { query: listLimitsQuery },
      response: page(limitResponse),
      handler: (req) => listLimits(deps, principalOf(req), req.query as never),
    },
    {
      method: 'post',
      path: '/billing/limits',
      scope: 'billing:manage',
      summary: 'Create a threshold or cap {project_id?, kind: threshold | cap, credits}; one cap per scope',
      schemas: { body: createLimitBody },
      status: 201,
      response: limitResponse,
      handler: (req) => createLimit(deps, principalOf(req), req.body),
    },
    {
      method: 'get',
      path: '/billing/limits/:id',
      scope: 'billing:read',
      summary: 'Read a spend limit',
      response: limitResponse,
      handler: (req) => getLimit(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'patch',
      path: '/billing/limits/:id',
      scope: 'billing:manage',
      summary: 'Change the amount {credits}: above the current spend re-arms the limit (a raised cap allows launches again)',
      schemas: { body: updateLimitBody },
      response: limitResponse,
      handler: (req) => updateLimit(deps, principalOf(req), idParam(req), req.body),
    },
    {
      method: 'delete',
      path: '/billing/limits/:id',
      scope: 'billing:manage',
      summary: 'Delete a spend limit',
      handler: (req) => deleteLimit(deps, principalOf(req), idParam(req)),
    },
  ];
}
