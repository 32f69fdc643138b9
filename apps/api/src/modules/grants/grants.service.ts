// Read or write grants on a project or an assessment, to a user or a team of the same organization.
// A project grant has projectId set and assessmentId NULL; an assessment grant the reverse (the access service
// relies on it). One grant per subject and target: granting again replaces the access level.
import { scopedTo, type AccessGrant } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId } from '@svc/db';
import { requireAssessmentAccess, requireProjectAccess, type Access } from '../access/access.service';

export type GrantTarget = { kind: 'project'; id: string } | { kind: 'assessment'; id: string };

export function presentGrant(g: AccessGrant) {
  return {
    id: g.id,
    project_id: g.projectId,
    assessment_id: g.assessmentId,
    subject_type: g.userId ? 'user' : 'team',
    user_id: g.userId,
    team_id: g.teamId,
    access: g.access,
    created_at: g.createdAt.toISOString(),
  };
}

/** Managing access needs write access to the target; a target the caller cannot see at all is 404. */
async function requireTarget(deps: AppDeps, principal: Principal, target: GrantTarget): Promise<void> {
  if (target.kind === 'project') await requireProjectAccess(deps, principal, target.id, 'write');
  else await requireAssessmentAccess(deps, principal, target.id, 'write');
}

function targetWhere(target: GrantTarget) {
  return target.kind === 'project' ? { projectId: target.id, assessmentId: null } : { assessmentId: target.id, projectId: null };
}

export async function listGrants(deps: AppDeps, principal: Principal, target: GrantTarget, query: PageQuery) {
  await requireTarget(deps, principal, target);
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).accessGrant.findMany({ ...args, where: { ...args.where, ...targetWhere(target) } });
  return toPage(rows, query, presentGrant);
}

export async function upsertGrant(
  deps: AppDeps,
  principal: Principal,
  target: GrantTarget,
  input: { user_id?: string; team_id?: string; access: Access },
): Promise<{ created: boolean; grant: ReturnType<typeof presentGrant> }> {
  await requireTarget(deps, principal, target);
  const db = scopedTo(deps.prisma, principal);
  if (input.user_id !== undefined) {
    const member = await db.membership.findFirst({ where: { userId: input.user_id } });
    if (!member) throw notFound('Member');
  } else {
    const team = await db.team.findFirst({ where: { id: input.team_id } });
    if (!team) throw notFound('Team');
  }
  const subject = input.user_id !== undefined ? { userId: input.user_id, teamId: null } : { userId: null, teamId: input.team_id! };
  const where = { ...targetWhere(target), ...subject };
  const lockKey = `grant:${target.kind}:${target.id}:${subject.userId ?? ''}:${subject.teamId ?? ''}`;

  return db.$transaction(async (tx) => {
    // No unique index can express "one grant per subject and target" over nullable columns, so concurrent
    // grants for the same pair are serialised with a transaction-scoped advisory lock.
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey}, 0))`;
    const existing = await tx.accessGrant.findFirst({ where });
    if (existing) {
      const grant = existing.access === input.access
        ? existing
        : await tx.accessGrant.update({ where: { id: existing.id }, data: { access: input.access } });
      return { created: false, grant: presentGrant(grant) };
    }
    const grant = await tx.accessGrant.create({ data: { id: newId('grant'), organizationId: principal.organizationId, ...where, access: input.access } });
    return { created: true, grant: presentGrant(grant) };
  });
}

export async function deleteGrant(deps: AppDeps, principal: Principal, target: GrantTarget, grantId: string): Promise<void> {
  await requireTarget(deps, principal, target);
  const { count } = await scopedTo(deps.prisma, principal).accessGrant.deleteMany({ where: { id: grantId, ...targetWhere(target) } });
  if (count === 0) throw notFound('Grant');
}
