// Projects. Reading and writing go through the access service: owners and admins reach every project of their
// organization, everybody else the projects a user or team grant gives them. The creator of a project who is
// not an owner or admin receives a write grant on it.
import type { Project, Tx } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { forbidden } from '../../http/errors';
import { hasScope } from '@svc/scopes';
import { newId, scopedTo } from '@svc/db';
import { eraseProjectHistory } from '../history-deletion/history-deletion.service';
import { hasOrgWideWrite, readableProjectsFilter, requireProjectAccess, requireStillMayAccess, requireStillMayDelete } from '../access/access.service';
import { presentProjectSource, type ProjectSourceRow } from '../source/project-source.service';
import { deleteStoredObjectsAfterDeletion } from '../source/stored-objects';
import type { Acting } from '../audit/audit.context';
import { principalAsCommitted, RECHECKED_TRANSACTION } from '../access/own-role';
import { DELETION_TRANSACTION, deleteWithSubscriptions, requireMayDeleteSubscriptionsOf } from '../webhooks/subscriptions.service';

/** Every project answer carries its source (null when none is attached). */
const withSource = { source: { include: { archive: true } } } as const;

export function presentProject(p: Project & { source?: ProjectSourceRow | null }) {
  return {
    id: p.id,
    name: p.name,
    description: p.description,
    archived: p.archivedAt !== null,
    archived_at: p.archivedAt?.toISOString() ?? null,
    source: presentProjectSource(p.source ?? null),
    created_at: p.createdAt.toISOString(),
    updated_at: p.updatedAt.toISOString(),
  };
}

export async function createProject(deps: AppDeps, requester: Principal, input: { name: string; description?: string | null }) {
  const project = await scopedTo(deps.prisma, requester).$transaction(async (tx) => {
    // The role as committed decides: a manager demoted to member meanwhile gets no project (and no write grant that
    // would outlive the demotion); an admin demoted to manager gets the grant their new role needs to reach it.
    const principal = await principalAsCommitted(tx, requester, 'projects:create', 'Creating projects');
    const created = await tx.project.create({
      data: {
        id: newId('prj'),
        organizationId: principal.organizationId,
        name: input.name,
        description: input.description || null,
      },
    });
    if (!hasOrgWideWrite(principal)) {
      await tx.accessGrant.create({
        data: {
          id: newId('grant'),
          organizationId: principal.organizationId,
          projectId: created.id,
          assessmentId: null,
          userId: principal.userId,
          access: 'write',
        },
      });
    }
    return created;
  }, RECHECKED_TRANSACTION);
  return presentProject(project);
}

export async function listProjects(deps: AppDeps, principal: Principal, query: PageQuery & { archived?: boolean }) {
  const args = pageArgs(query);
  const readable = await readableProjectsFilter(deps, principal);
  const archived = query.archived === undefined ? {} : { archivedAt: query.archived ? { not: null } : null };
  const rows = await scopedTo(deps.prisma, principal).project.findMany({
    ...args,
    where: { ...args.where, ...readable, ...archived },
    include: withSource,
  });
  return toPage(rows, query, presentProject);
}

export async function getProject(deps: AppDeps, principal: Principal, id: string) {
  const project = await requireProjectAccess(deps, principal, id, 'read');
  const source = await scopedTo(deps.prisma, principal).projectSource.findFirst({ where: { projectId: project.id }, include: { archive: true } });
  return presentProject({ ...project, source });
}

export async function updateProject(
  deps: AppDeps,
  principal: Principal,
  id: string,
  input: { name?: string; description?: string | null; archived?: boolean },
) {
  const current = await requireProjectAccess(deps, principal, id, 'write');
  const data: { name?: string; description?: string | null; archivedAt?: Date | null } = {};
  if (input.name !== undefined) data.name = input.name;
  if (input.description !== undefined) data.description = input.description || null;
  // Archiving an archived project keeps its first archive time; unarchiving clears it.
  if (input.archived === true && !current.archivedAt) data.archivedAt = deps.clock.now();
  if (input.archived === false) data.archivedAt = null;
  const project = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayAccess(tx, principal, { kind: 'project', id: current.id }, { scope: 'projects:update', action: 'Editing projects', need: 'write', hold: true });
    return tx.project.update({ where: { id: current.id }, data, include: withSource });
  }, RECHECKED_TRANSACTION);
  return presentProject(project);
}

/**
 * Deleting a project deletes its assessments and their findings: with any, the caller needs assessments:delete as
 * well as projects:delete (SPEC: managers have every project scope but that one).
 */
async function requireMayDeleteAssessmentsOf(db: Pick<Tx, 'assessment'>, principal: Principal, projectId: string): Promise<void> {
  if (hasScope(principal.scopes, 'assessments:delete')) return;
  const assessments = await db.assessment.count({ where: { projectId } });
  if (assessments === 0) return;
  throw forbidden(
    `Missing required scope: assessments:delete. Deleting this project would delete its ${assessments} assessment${assessments === 1 ? '' : 's'} and their findings.`,
  );
}

const DELETING_PROJECTS = 'Deleting projects';

/**
 * Deletes the project with its assessments, grants and webhook subscriptions (cascade; each live subscription audited
 * as deleted; with any of those, the caller needs assessments:delete and webhooks:delete too); its subscriptions' deliveries go first, in bounded batches (history-deletion.service.ts), and its
 * stored source objects after the rows.
 */
export async function deleteProject(deps: AppDeps, by: Acting, id: string): Promise<void> {
  await requireProjectAccess(deps, by.principal, id, 'write');
  const db = scopedTo(deps.prisma, by.principal);
  // Before its history goes; and again under the project's row lock, which an assessment created meanwhile waits for.
  // With the caller's role as committed (own-role.ts), both times: erasing a large history takes a while, and an
  // admin demoted to manager meanwhile keeps projects:delete but not assessments:delete or webhooks:delete.
  const before = await db.$transaction((tx) => principalAsCommitted(tx, by.principal, 'projects:delete', DELETING_PROJECTS), RECHECKED_TRANSACTION);
  await requireMayDeleteAssessmentsOf(db, before, id);
  await requireMayDeleteSubscriptionsOf(db, before, { projectId: id });
  await eraseProjectHistory(deps.prisma, before.organizationId, id, { liveToo: hasScope(before.scopes, 'webhooks:delete') });
  const deleted = await db.$transaction(async (tx) => {
    // The membership before the project's row and its subscriptions: a role change holds it, then disables the
    // routes its member configured (their subscriptions' rows).
    const principal = await principalAsCommitted(tx, by.principal, 'projects:delete', DELETING_PROJECTS);
    return deleteWithSubscriptions(tx, { projectId: id }, { ...by, principal }, deps.clock.now(), async () => {
      // A manager's write grant (or team) taken away meanwhile: the project stays (404).
      await requireStillMayDelete(tx, principal, { kind: 'project', id });
      await requireMayDeleteAssessmentsOf(tx, principal, id);
      return (await tx.project.deleteMany({ where: { id } })).count === 1;
    });
  }, DELETION_TRANSACTION);
  if (deleted) await deleteStoredObjectsAfterDeletion(deps, { organizationId: by.principal.organizationId, projectId: id });
}
