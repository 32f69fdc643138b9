// Teams of the caller's organization and their members. A team's members must be members of the organization.
import { isUniqueViolation, type Team } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { HttpError, conflict, notFound } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';

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

export async function createTeam(deps: AppDeps, principal: Principal, input: { name: string; description?: string | null }) {
  const team = await uniqueName(() =>
    scopedTo(deps.prisma, principal).team.create({
      data: { id: newId('team'), organizationId: principal.organizationId, name: input.name, description: input.description || null },
    }),
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
) {
  await findTeam(deps, principal, id);
  const data = {
    ...(input.name !== undefined ? { name: input.name } : {}),
    ...(input.description !== undefined ? { description: input.description || null } : {}),
  };
  const team = await uniqueName(() => scopedTo(deps.prisma, principal).team.update({ where: { id }, data }));
  return presentTeam(team);
}

/** Deleting a team removes its memberships and the grants given to it (cascade). */
export async function deleteTeam(deps: AppDeps, principal: Principal, id: string): Promise<void> {
  const { count } = await scopedTo(deps.prisma, principal).team.deleteMany({ where: { id } });
  if (count === 0) throw notFound('Team');
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

/** Idempotent: adding someone already in the team answers the same as adding them the first time. */
export async function addTeamMember(deps: AppDeps, principal: Principal, teamId: string, userId: string) {
  await findTeam(deps, principal, teamId);
  const db = scopedTo(deps.prisma, principal);
  const membership = await db.membership.findFirst({
    where: { userId },
    include: { user: { select: { email: true, name: true } } },
  });
  if (!membership) throw notFound('Member');
  const row = await db.teamMember.upsert({
    where: { teamId_userId: { teamId, userId } },
    create: { teamId, userId },
    update: {},
  });
  return { user_id: userId, email: membership.user.email, name: membership.user.name, added_at: row.createdAt.toISOString() };
}

export async function removeTeamMember(deps: AppDeps, principal: Principal, teamId: string, userId: string): Promise<void> {
  await findTeam(deps, principal, teamId);
  const { count } = await scopedTo(deps.prisma, principal).teamMember.deleteMany({ where: { teamId, userId } });
  if (count === 0) throw notFound('Team member');
}
