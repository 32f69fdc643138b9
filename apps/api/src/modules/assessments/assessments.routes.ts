import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { createAssessmentBody, listAssessmentsQuery } from './assessments.schemas';
import { createAssessment, getAssessment, listAssessments } from './assessments.service';

export function assessmentRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/projects/:id/assessments',
      scope: 'assessments:create',
      summary: 'Create a draft assessment in a project (write access to the project required)',
      schemas: { body: createAssessmentBody },
      status: 201,
      handler: (req) => createAssessment(deps, principalOf(req), req.params.id as string, req.body),
    },
    {
      method: 'get',
      path: '/assessments',
      scope: 'assessments:read',
      summary: 'List the assessments you can read (optional ?project_id=)',
      schemas: { query: listAssessmentsQuery },
      handler: (req) => listAssessments(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/assessments/:id',
      scope: 'assessments:read',
      summary: 'Read an assessment (read access required)',
      handler: (req) => getAssessment(deps, principalOf(req), req.params.id as string),
    },
  ];
}
