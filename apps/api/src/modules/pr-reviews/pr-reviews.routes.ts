import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { listPrReviewsQuery, prReviewResponse, recordPrReviewBody } from './pr-reviews.schemas';
import { getPrReview, listPrReviews, recordPrReview } from './pr-reviews.service';

// Recording is the engine's call: `assessments:update`, like its other reports (a PR review is an assessment of a
// change), rather than `projects:manage_source`, which is about attaching the source itself.
export function prReviewRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/projects/:id/pr-reviews',
      scope: 'assessments:update',
      summary: 'Engine: record a posted PR security review; publishes pr_review.completed (write access to the project required)',
      schemas: { body: recordPrReviewBody },
      status: 201,
      response: prReviewResponse,
      handler: (req) => recordPrReview(deps, principalOf(req), idParam(req), req.body),
    },
    {
      method: 'get',
      path: '/projects/:id/pr-reviews',
      scope: 'projects:read',
      summary: "List a project's PR reviews (?repository=, ?verdict=; read access required)",
      schemas: { query: listPrReviewsQuery },
      response: page(prReviewResponse),
      handler: (req) => listPrReviews(deps, principalOf(req), idParam(req), req.query as never),
    },
    {
      method: 'get',
      path: '/pr-reviews/:id',
      scope: 'projects:read',
      summary: 'Read a PR review (read access to its project required)',
      response: prReviewResponse,
      handler: (req) => getPrReview(deps, principalOf(req), idParam(req)),
    },
  ];
}
