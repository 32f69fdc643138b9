// Read or write grants on a project or an assessment, to a user or a team of the same organization.
// A project grant has projectId set and assessmentId NULL; an assessment grant the reverse (the access service
// relies on it). One grant per subject and target: granting again replaces the access level. Each change is
// audited (access_grant.created, _updated, _deleted) in its transaction, with the project or assessment as target.
import { Prisma, scopedTo, type AccessGrant, type Scoped, type Tx } from '@svc/db';
import type { Role } from '@svc/scopes';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { forbidden, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId } from '@svc/db';
import { requireAssessmentAccess, requireCommittedAccess, requireProjectAccess, requireStillMayAccess, type Access } from '../access/access.service';
import { recordAs, type AuditEvent, type RequestMeta } from '../audit/audit.context';
import { holdMember } from '../members/members.service';
import { lockOwnRole, lockOwnRoleAndMember, RECHECKED_TRANSACTION } from '../access/own-role';
import { holdTeam } from '../teams/teams.service';

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

/** Managing access needs write access to the target; a target the caller cannot see at all is 404. Its project's id. */
async function requireTarget(deps: AppDeps, principal: Principal, target: GrantTarget): Promise<string> {
  if (target.kind === 'project') return (await requireProjectAccess(deps, principal, target.id, 'write')).id;
  return (await requireAssessmentAccess(deps, principal, target.id, 'write')).projectId;
}

/**
 * The grants of a project and of its assessments change one transaction at a time, first thing in it: no unique index
 * can express "one grant per subject and target" over nullable columns, and a manager's change holds the grants their
 * own access rests on (heldAccess) while it changes another's, so two managers changing each other's grants at once
 * would otherwise deadlock. A transaction-scoped advisory lock, taken before the memberships (own-role.ts).
 */
/**
 * Who may still manage access to the target, as the change commits: demoted, or their own grant or team taken away,
 * while the request ran, they need the scope and, below admin, write access through what is left.
 */
const MANAGING_ACCESS = { scope: 'assessments:manage_access', action: 'Managing access', need: 'write', hold: true } as const;

async function lockGrantsOf(tx: Pick<Tx, '$executeRaw'>, projectId: string): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`grants:project:${projectId}`}, 0))`;
}

function targetWhere(target: GrantTarget) {
  return target.kind === 'project' ? { projectId: target.id, assessmentId: null } : { assessmentId: target.id, projectId: null };
}

/** The audit entry of a change to a grant: the target is the project or assessment, the subject in the metadata. */
function grantEvent(
  action: 'access_grant.created' | 'access_grant.updated' | 'access_grant.deleted',
  target: GrantTarget,
  grant: Pick<AccessGrant, 'id' | 'userId' | 'teamId'>,
  access: Record<string, string>,
): AuditEvent {
  const subject = grant.userId ? { subject_type: 'user', user_id: grant.userId } : { subject_type: 'team', team_id: grant.teamId };
  return { action, target: { type: target.kind, id: target.id }, metadata: { grant_id: grant.id, ...subject, ...access } };
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
  meta: RequestMeta,
): Promise<{ created: boolean; grant: ReturnType<typeof presentGrant> }> {
  const projectId = await requireTarget(deps, principal, target);
  // Access held through a team or a role ends with it; a grant to oneself would outlive both (leave the team, be
  // demoted, keep write). Someone else grants it, or nobody: not to a team one is in either (checked below, under
  // the team's lock), and nobody adds themselves to a team (teams.service.ts).
  if (input.user_id === principal.userId) throw forbidden('You cannot grant access to yourself: ask someone else who may manage access.');
  const subject = input.user_id !== undefined ? { userId: input.user_id, teamId: null } : { userId: null, teamId: input.team_id! };
  const where = { ...targetWhere(target), ...subject };

  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await lockGrantsOf(tx, projectId);
    // Read after the lock: the entries of concurrent changes to one grant are dated in the order they were made.
    const now = deps.clock.now();
    // The caller's membership and a user subject's are held until the commit (in one statement, lockOwnRoleAndMember):
    // a demotion of the caller waits or went first and is seen here; a subject removed from the organization (or
    // deleted, for a team) meanwhile takes this grant along, or went first and this is a 404.
    const committedRole = subject.userId
      ? (await lockOwnRoleAndMember(tx, principal, subject.userId, 'SHARE')).own
      : await lockOwnRole(tx, principal);
    if (subject.userId) await holdMember(tx, subject.userId);
    else {
      await holdTeam(tx, subject.teamId!, 'KEY SHARE');
      if (await tx.teamMember.count({ where: { teamId: subject.teamId!, userId: principal.userId } })) {
        throw forbidden('You cannot grant access to a team you are in: ask someone else who may manage access.');
      }
    }
    // After the team's lock: a team's deletion locks the team and then its members' rows, which this check holds.
    await requireCommittedAccess(tx, principal, committedRole, target, MANAGING_ACCESS);
    const existing = await tx.accessGrant.findFirst({ where });
    if (existing) {
      if (existing.access === input.access) return { created: false, grant: presentGrant(existing) };
      const grant = await tx.accessGrant.update({ where: { id: existing.id }, data: { access: input.access } });
      await recordAs(tx, principal, meta, now, grantEvent('access_grant.updated', target, grant, { previous_access: existing.access, access: grant.access }));
      return { created: false, grant: presentGrant(grant) };
    }
    const grant = await tx.accessGrant.create({ data: { id: newId('grant'), organizationId: principal.organizationId, ...where, access: input.access } });
    await recordAs(tx, principal, meta, now, grantEvent('access_grant.created', target, grant, { access: grant.access }));
    return { created: true, grant: presentGrant(grant) };
  }, RECHECKED_TRANSACTION);
}

function targetSql(target: GrantTarget): Prisma.Sql {
  return target.kind === 'project'
    ? Prisma.sql`project_id = ${target.id} AND assessment_id IS NULL`
    : Prisma.sql`assessment_id = ${target.id} AND project_id IS NULL`;
}

export async function deleteGrant(
  deps: AppDeps,
  principal: Principal,
  target: GrantTarget,
  grantId: string,
  meta: RequestMeta,
): Promise<void> {
  const projectId = await requireTarget(deps, principal, target);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await lockGrantsOf(tx, projectId);
    await requireStillMayAccess(tx, principal, target, MANAGING_ACCESS);
    // The row as it was deleted (a re-grant may have changed its level meanwhile); of two concurrent deletes one
    // gets it, the other nothing (404, no entry). Raw SQL is not scoped: the organization is named here.
    const [gone] = await tx.$queryRaw<Array<{ id: string; user_id: string | null; team_id: string | null; access: string }>>`
      DELETE FROM access_grants
       WHERE id = ${grantId} AND organization_id = ${principal.organizationId} AND ${targetSql(target)}
      RETURNING id, user_id, team_id, access::text AS access`;
    if (!gone) throw notFound('Grant');
    const grant = { id: gone.id, userId: gone.user_id, teamId: gone.team_id };
    await recordAs(tx, principal, meta, now, grantEvent('access_grant.deleted', target, grant, { access: gone.access }));
  }, RECHECKED_TRANSACTION);
}
