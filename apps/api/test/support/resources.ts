// Projects and assessments arranged directly in the database, for tests of features that hang on them.
import { newId } from '@svc/db';
import type { Harness } from './harness';

export async function createProject(h: Harness, organizationId: string, name = 'Project') {
  return h.deps.prisma.project.create({ data: { id: newId('prj'), organizationId, name } });
}

export async function createAssessment(h: Harness, organizationId: string, projectId: string, name = 'Assessment') {
  return h.deps.prisma.assessment.create({ data: { id: newId('asm'), organizationId, projectId, name } });
}
