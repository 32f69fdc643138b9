import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { completeFixVerificationBody, fixVerificationResponse, listFixVerificationsQuery } from './fix-verifications.schemas';
import {
  completeFixVerification,
  getFixVerification,
  listFixVerifications,
  startFixVerification,
} from './fix-verifications.service';

// The catalogue has no fix-verification scope: the engine's calls use `assessments:update`, the scope its key
// already holds to report progress and record findings; reading uses findings:read.
export function fixVerificationRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/findings/:id/fix-verifications',
      scope: 'assessments:update',
      summary: 'Engine: start a fix verification run on a finding (write access to its assessment required)',
      status: 201,
      response: fixVerificationResponse,
      handler: (req) => startFixVerification(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'get',
      path: '/findings/:id/fix-verifications',
      scope: 'findings:read',
      summary: "List a finding's fix verification runs (read access required)",
      schemas: { query: listFixVerificationsQuery },
      response: page(fixVerificationResponse),
      handler: (req) => listFixVerifications(deps, principalOf(req), idParam(req), req.query as never),
    },
    {
      method: 'get',
      path: '/fix-verifications/:id',
      scope: 'findings:read',
      summary: 'Read a fix verification run (read access to its assessment required)',
      response: fixVerificationResponse,
      handler: (req) => getFixVerification(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'post',
      path: '/fix-verifications/:id/complete',
      scope: 'assessments:update',
      summary: 'Engine: complete a run with {result: fixed | still_present}; publishes fix_verify.completed (write access required)',
      schemas: { body: completeFixVerificationBody },
      response: fixVerificationResponse,
      handler: (req) => completeFixVerification(deps, principalOf(req), idParam(req), req.body),
    },
  ];
}
