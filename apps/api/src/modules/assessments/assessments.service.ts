// Assessments inside a project. Creating one needs write access to the project (which also covers the new
// assessment, so its creator gets no grant of its own); reading one needs read access to it or its project.
// Lifecycle transitions belong to a later issue.
import type { Assessment } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId } from '../../lib/ids';
import { readableAssessmentsFilter, requireAssessmentAccess, requireProjectAccess } from '../access/access.service';

export function presentAssessment(a: Assessment) {
  return {
    id: a.id,
    project_id: a.projectId,
    name: a.name,
    status: a.status,
    created_by_id: a.createdById,
    created_at: a.createdAt.toISOString(),
    updated_at: a.updatedAt.toISOString(),
  };
}

export async function createAssessment(deps: AppDeps, principal: Principal, projectId: string, input: { name: string }) {
  const project = await requireProjectAccess(deps, principal, projectId, 'write');
  if (project.archivedAt) throw conflict('The project is archived: unarchive it to add assessments.');
  const assessment = await deps.prisma.assessment.create({
    data: {
      id: newId('asm'),
      organizationId: principal.organizationId,
      projectId: project.id,
      name: input.name,
      status: 'draft',
      createdById: principal.userId,
    },
  });
  return presentAssessment(assessment);
}

export async function listAssessments(deps: AppDeps, principal: Principal, query: PageQuery & { project_id?: string }) {
  const args = pageArgs(query);
  const readable = await readableAssessmentsFilter(deps, principal);
  const rows = await deps.prisma.assessment.findMany({
    ...args,
    where: { ...args.where, ...readable, ...(query.project_id ? { projectId: query.project_id } : {}) },
  });
  return toPage(rows, query, presentAssessment);
}

export async function getAssessment(deps: AppDeps, principal: Principal, id: string) {
  return presentAssessment(await requireAssessmentAccess(deps, principal, id, 'read'));
}
