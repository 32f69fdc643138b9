// Teams of the caller's organization and their members. A team's members must be members of the organization.
// Each change is audited (team.created, _updated, _deleted, _member_added, _member_removed) in its transaction.
import { Prisma, isUniqueViolation, organizationOf, type Scoped, type Team, type Tx } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { HttpError, conflict, forbidden, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import { holdMember } from '../members/members.service';
import { lockOwnRoleAndMember, RECHECKED_TRANSACTION, requireCommittedScope, requireStillHolds } from '../access/own-role';

export function presentTeam(team: Team) {
  return {
    id: team.id,
    name: team.name,
    description: team.description,
    created_at: team.createdAt.toISOString(),
    updated_at: team.updatedAt.toISOString(),
  };
}

async function uniqueName<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!(err instanceof HttpError) && isUniqueViolation(err)) throw conflict('A team with this name already exists.');
    throw err;
  }
}

export async function findTeam(deps: AppDeps, principal: Principal, id: string): Promise<Team> {
  const team = await scopedTo(deps.prisma, principal).team.findFirst({ where: { id } });
  if (!team) throw notFound('Team');
  return team;
}

const teamTarget = (id: string) => ({ type: 'team', id });

const described = (team: Pick<Team, 'name' | 'description'>) => ({ name: team.name, description: team.description });

/**
 * The team, locked until the transaction ends, or a 404. KEY SHARE (adding a member) only keeps it from being
 * deleted; NO KEY UPDATE (an edit) serialises edits; UPDATE (its deletion) waits for both and holds up both.
 */
export async function holdTeam(tx: Scoped<Tx>, id: string, mode: 'KEY SHARE' | 'NO KEY UPDATE' | 'UPDATE'): Promise<Team> {
  // Raw SQL is not scoped: the organization is named here.
  const [held] = await tx.$queryRaw<Array<{ id: string }>>`
    SELECT id FROM teams WHERE id = ${id} AND organization_id = ${organizationOf(tx)} FOR ${Prisma.raw(mode)}`;
  const team = held && (await tx.team.findFirst({ where: { id } }));
  if (!team) throw notFound('Team');
  return team;
}

export async function createTeam(
  deps: AppDeps,
  principal: Principal,
  input: { name: string; description?: string | null },
  meta: RequestMeta,
) {
  const now = deps.clock.now();
  const team = await uniqueName(() =>
    scopedTo(deps.prisma, principal).$transaction(async (tx) => {
      await requireStillHolds(tx, principal, 'teams:create', 'Creating teams');
      const row = await tx.team.create({
        data: { id: newId('team'), organizationId: principal.organizationId, name: input.name, description: input.description || null },
      });
      await recordAs(tx, principal, meta, now, { action: 'team.created', target: teamTarget(row.id), metadata: described(row) });
      return row;
    }, RECHECKED_TRANSACTION),
  );
  return presentTeam(team);
}

export async function listTeams(deps: AppDeps, principal: Principal, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).team.findMany({ ...args, where: args.where });
  return toPage(rows, query, presentTeam);
}

export async function getTeam(deps: AppDeps, principal: Principal, id: string) {
  return presentTeam(await findTeam(deps, principal, id));
}

export async function updateTeam(
  deps: AppDeps,
  principal: Principal,
  id: string,
  input: { name?: string; description?: string | null },
  meta: RequestMeta,
) {
  const now = deps.clock.now();
  const team = await uniqueName(() =>
    scopedTo(deps.prisma, principal).$transaction(async (tx) => {
      await requireStillHolds(tx, principal, 'teams:update', 'Editing teams');
      // Held until the commit: a concurrent edit waits, so the entry's "before" is what this one replaced.
      const current = await holdTeam(tx, id, 'NO KEY UPDATE');
      const before = described(current);
      const after = {
        name: input.name ?? before.name,
        description: input.description !== undefined ? input.description || null : before.description,
      };
      if (after.name === before.name && after.description === before.description) return current;
      const row = await tx.team.update({ where: { id }, data: after });
      await recordAs(tx, principal, meta, now, { action: 'team.updated', target: teamTarget(id), metadata: { before, after } });
      return row;
    }, RECHECKED_TRANSACTION),
  );
  return presentTeam(team);
}

/**
 * Deleting a team removes its memberships, the grants given to it and its integration bindings. They are deleted
 * here rather than left to the cascade so that the entry counts exactly what went: the team is held first, so a
 * member or grant being added meanwhile either commits before (and is counted) or finds the team gone.
 */
export async function deleteTeam(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta): Promise<void> {
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'teams:delete', 'Deleting teams');
    const team = await holdTeam(tx, id, 'UPDATE');
    const members = await tx.teamMember.deleteMany({ where: { teamId: id } });
    const grants = await tx.accessGrant.deleteMany({ where: { teamId: id } });
    const integrations = await tx.teamIntegration.deleteMany({ where: { teamId: id } });
    await tx.team.deleteMany({ where: { id } });
    await recordAs(tx, principal, meta, now, {
      action: 'team.deleted',
      target: teamTarget(id),
      metadata: { name: team.name, members_removed: members.count, grants_removed: grants.count, integrations_unbound: integrations.count },
    });
  }, RECHECKED_TRANSACTION);
}

// Team members page by user id (time-sortable like every id), newest user first.
export async function listTeamMembers(deps: AppDeps, principal: Principal, teamId: string, query: PageQuery) {
  await findTeam(deps, principal, teamId);
  const rows = await scopedTo(deps.prisma, principal).teamMember.findMany({
    where: {
      teamId,
      ...(query.cursor ? { userId: { lt: query.cursor } } : {}),
    },
    orderBy: { userId: 'desc' },
    take: query.limit + 1,
    include: { user: { select: { email: true, name: true } } },
  });
  return toPage(
    rows.map((r) => ({ ...r, id: r.userId })),
    query,
    (r) => ({ user_id: r.userId, email: r.user.email, name: r.user.name, added_at: r.createdAt.toISOString() }),
  );
}

/** Idempotent: adding someone already in the team answers the same as adding them the first time (and records nothing). */
export async function addTeamMember(deps: AppDeps, principal: Principal, teamId: string, userId: string, meta: RequestMeta) {
  const now = deps.clock.now();
  return scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // A team's access is its grants: joining one yourself would be granting yourself access (grants.service.ts).
    if (userId === principal.userId) throw forbidden('You cannot add yourself to a team: ask someone else who may manage team members.');
    // The caller's role as committed now, and the member's row, held in one statement, before the team's row (the
    // order of own-role.ts). All held until the commit: a concurrent team deletion counts this member, a concurrent
    // removal from the organization takes this team membership along (or went first, and this is a 404).
    const { own } = await lockOwnRoleAndMember(tx, principal, userId, 'SHARE');
    requireCommittedScope(own, 'teams:manage_members', 'Adding team members');
    await holdTeam(tx, teamId, 'KEY SHARE');
    const user = await holdMember(tx, userId);
    const { count } = await tx.teamMember.createMany({ data: [{ teamId, userId }], skipDuplicates: true });
    const row = await tx.teamMember.findFirstOrThrow({ where: { teamId, userId } });
    if (count === 1) {
      await recordAs(tx, principal, meta, now, { action: 'team.member_added', target: teamTarget(teamId), metadata: { user_id: userId, email: user.email } });
    }
    return { user_id: userId, email: user.email, name: user.name, added_at: row.createdAt.toISOString() };
  }, RECHECKED_TRANSACTION);
}

export async function removeTeamMember(deps: AppDeps, principal: Principal, teamId: string, userId: string, meta: RequestMeta): Promise<void> {
  await findTeam(deps, principal, teamId);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'teams:manage_members', 'Removing team members');
    const { count } = await tx.teamMember.deleteMany({ where: { teamId, userId } });
    if (count === 0) throw notFound('Team member');
    const user = await tx.user.findUnique({ where: { id: userId }, select: { email: true } });
    await recordAs(tx, principal, meta, now, {
      action: 'team.member_removed',
      target: teamTarget(teamId),
      metadata: { user_id: userId, email: user?.email ?? null },
    });
  }, RECHECKED_TRANSACTION);
}
