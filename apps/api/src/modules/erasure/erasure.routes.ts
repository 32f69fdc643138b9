import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { requestMeta } from '../audit/audit.context';
import { erasureResponse, fileErasureBody, listErasureQuery } from './erasure.schemas';
import { cancelErasure, fileErasure, getErasure, listErasures, retryErasure } from './erasure.service';

export function erasureRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/governance/erasure-requests',
      scope: 'governance:erase',
      summary: 'File a GDPR erasure request for a member or former member: 202, pending until the worker erases; 409 for the owner',
      schemas: { body: fileErasureBody },
      status: 202,
      response: erasureResponse,
      handler: (req) => fileErasure(deps, principalOf(req), req.body, requestMeta(req)),
    },
    {
      method: 'get',
      path: '/governance/erasure-requests',
      scope: 'governance:read',
      summary: 'List erasure requests, newest first (?status=)',
      schemas: { query: listErasureQuery },
      response: page(erasureResponse),
      handler: (req) => listErasures(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/governance/erasure-requests/:id',
      scope: 'governance:read',
      summary: 'Read an erasure request: status and, once completed, the receipt of what was erased',
      response: erasureResponse,
      handler: (req) => getErasure(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'post',
      path: '/governance/erasure-requests/:id/cancel',
      scope: 'governance:erase',
      summary: 'Cancel a pending erasure request; 409 once it completed, failed or was cancelled',
      response: erasureResponse,
      handler: (req) => cancelErasure(deps, principalOf(req), idParam(req), requestMeta(req)),
    },
    {
      method: 'post',
      path: '/governance/erasure-requests/:id/retry',
      scope: 'governance:erase',
      summary: 'Retry a failed erasure request (back to pending); 409 unless it failed',
      status: 202,
      response: erasureResponse,
      handler: (req) => retryErasure(deps, principalOf(req), idParam(req), requestMeta(req)),
    },
  ];
}
