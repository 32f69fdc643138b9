import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RouteSpec } from '../../http/route';
import { acting } from '../audit/audit.context';
import { page } from '../../http/responses';
import { createProjectBody, listProjectsQuery, projectResponse, updateProjectBody } from './projects.schemas';
import { createProject, deleteProject, getProject, listProjects, updateProject } from './projects.service';

export function projectRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/projects',
      scope: 'projects:create',
      summary: 'Create a project; a creator below admin receives a write grant on it',
      schemas: { body: createProjectBody },
      status: 201,
      response: projectResponse,
      handler: (req) => createProject(deps, principalOf(req), req.body),
    },
    {
      method: 'get',
      path: '/projects',
      scope: 'projects:read',
      summary: 'List the projects you can read (optional ?archived=true|false)',
      schemas: { query: listProjectsQuery },
      response: page(projectResponse),
      handler: (req) => listProjects(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/projects/:id',
      scope: 'projects:read',
      summary: 'Read a project (read access required)',
      response: projectResponse,
      handler: (req) => getProject(deps, principalOf(req), req.params.id as string),
    },
    {
      method: 'patch',
      path: '/projects/:id',
      scope: 'projects:update',
      summary: 'Edit name or description, archive or unarchive (write access required)',
      schemas: { body: updateProjectBody },
      response: projectResponse,
      handler: (req) => updateProject(deps, principalOf(req), req.params.id as string, req.body),
    },
    {
      method: 'delete',
      path: '/projects/:id',
      scope: 'projects:delete',
      summary: 'Permanently delete a project with its assessments (write access required)',
      handler: (req) => deleteProject(deps, acting(req), req.params.id as string),
    },
  ];
}
