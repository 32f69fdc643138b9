import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { requestMeta } from '../audit/audit.context';
import { candidatesQuery, candidatesResponse, erasureResponse, fileErasureBody, listErasureQuery } from './erasure.schemas';
import {
  cancelErasure,
  confirmErasure,
  fileErasure,
  getErasure,
  listErasures,
  retryErasure,
  searchErasureCandidates,
} from './erasure.service';

export function erasureRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'get',
      path: '/governance/erasure-candidates',
      scope: 'governance:erase',
      summary: 'Search the people the organization knows (members, former members, invitees, share grantees, notification recipients) by name or e-mail',
      schemas: { query: candidatesQuery },
      response: candidatesResponse,
      handler: (req) => searchErasureCandidates(deps, principalOf(req), String(req.query.q)),
    },
    {
      method: 'post',
      path: '/governance/erasure-requests',
      scope: 'governance:erase',
      summary:
        'File a GDPR erasure request for a person (user_id, or email for a person without an account): 202 previewing; ' +
        'the worker writes the preview and nothing changes until an owner or admin confirms. 409 for the owner',
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
      summary: 'Read an erasure request: status, the preview, and once completed the receipt of what was erased',
      response: erasureResponse,
      handler: (req) => getErasure(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'post',
      path: '/governance/erasure-requests/:id/confirm',
      scope: 'governance:erase',
      summary: 'Confirm a previewed erasure request (owner or admin): the worker erases; 409 unless it awaits confirmation',
      status: 202,
      response: erasureResponse,
      handler: (req) => confirmErasure(deps, principalOf(req), idParam(req), requestMeta(req)),
    },
    {
      method: 'post',
      path: '/governance/erasure-requests/:id/cancel',
      scope: 'governance:erase',
      summary: 'Cancel an erasure request not yet confirmed (previewing or awaiting confirmation); 409 otherwise',
      response: erasureResponse,
      handler: (req) => cancelErasure(deps, principalOf(req), idParam(req), requestMeta(req)),
    },
    {
      method: 'post',
      path: '/governance/erasure-requests/:id/retry',
      scope: 'governance:erase',
      summary: 'Retry a failed erasure request: back to previewing, or, once confirmed, erasing from where it stopped; 409 unless it failed',
      status: 202,
      response: erasureResponse,
      handler: (req) => retryErasure(deps, principalOf(req), idParam(req), requestMeta(req)),
    },
  ];
}
