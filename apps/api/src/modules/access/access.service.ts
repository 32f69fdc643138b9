// Who may read or write a project or an assessment.
// - Owners and admins: write access to everything in their organization.
// - Others: the strongest grant that reaches them, directly or through a team. A grant on a project covers its
//   assessments; a grant on an assessment covers only that assessment.
// A resource of another organization, or one the principal cannot read at all, answers 404 exactly as a missing
// one; readable but not writable answers 403.
import { answeringOneByOneOnFailure, Coalescer, coalescerOf, organizationOf, Prisma, queryRows, scopedTo, type Assessment, type Project, type Scoped, type Tx } from '@svc/db';
import { slaPolicyFromColumns, type SlaPolicy } from '@svc/domain';
import { roleRank, type Role, type Scope } from '@svc/scopes';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { forbidden, notFound } from '../../http/errors';
import { lockOwnRole, requireCommittedScope } from './own-role';

export type Access = 'read' | 'write';

const RANK: Record<Access | 'none', number> = { none: 0, read: 1, write: 2 };

export function hasOrgWideWrite(principal: Principal): boolean {
  return roleRank(principal.role) >= roleRank('admin');
}

async function teamIdsOf(deps: AppDeps, principal: Principal): Promise<string[]> {
  const rows = await scopedTo(deps.prisma, principal).teamMember.findMany({ where: { userId: principal.userId }, select: { teamId: true } });
  return rows.map((r) => r.teamId);
}

async function grantedAccess(
  deps: AppDeps,
  principal: Principal,
  target: { projectId: string; assessmentId?: string },
): Promise<Access | 'none'> {
  if (hasOrgWideWrite(principal)) return 'write';
  const teamIds = await teamIdsOf(deps, principal);
  const grants = await scopedTo(deps.prisma, principal).accessGrant.findMany({
    where: {
      OR: [{ userId: principal.userId }, ...(teamIds.length ? [{ teamId: { in: teamIds } }] : [])],
      AND: [
        {
          OR: [
            { projectId: target.projectId, assessmentId: null },
            ...(target.assessmentId ? [{ assessmentId: target.assessmentId }] : []),
          ],
        },
      ],
    },
    select: { access: true },
  });
  return grants.reduce<Access | 'none'>((best, g) => (RANK[g.access] > RANK[best] ? g.access : best), 'none');
}

function enforce(have: Access | 'none', need: Access, what: string): void {
  if (have === 'none') throw notFound(what);
  if (RANK[have] < RANK[need]) throw forbidden(`Write access to the ${what.toLowerCase()} is required.`);
}

export async function requireProjectAccess(deps: AppDeps, principal: Principal, projectId: string, need: Access): Promise<Project> {
  const project = await scopedTo(deps.prisma, principal).project.findFirst({ where: { id: projectId } });
  if (!project) throw notFound('Project');
  enforce(await grantedAccess(deps, principal, { projectId }), need, 'Project');
  return project;
}

export async function requireAssessmentAccess(
  deps: AppDeps,
  principal: Principal,
  assessmentId: string,
  need: Access,
): Promise<Assessment> {
  const assessment = await scopedTo(deps.prisma, principal).assessment.findFirst({ where: { id: assessmentId } });
  if (!assessment) throw notFound('Assessment');
  enforce(await grantedAccess(deps, principal, { projectId: assessment.projectId, assessmentId }), need, 'Assessment');
  return assessment;
}

/**
 * grantedAccess read inside the caller's transaction, with what the access rests on share-locked until it commits:
 * the principal's team memberships in the organization and the grants that reach the target. Taking either away at
 * the same time (deleting the grant, removing them from the team) waits for the transaction, or went first and is
 * seen here.
 */
async function heldAccess(tx: Scoped<Tx>, principal: Principal, target: { projectId: string; assessmentId?: string }): Promise<Access | 'none'> {
  if (hasOrgWideWrite(principal)) return 'write';
  // Raw SQL is not scoped: the organization is named here.
  const organizationId = organizationOf(tx);
  const teams = await tx.$queryRaw<Array<{ team_id: string }>>`
    SELECT tm.team_id FROM team_members tm JOIN teams t ON t.id = tm.team_id
     WHERE tm.user_id = ${principal.userId} AND t.organization_id = ${organizationId}
       FOR SHARE OF tm`;
  const grants = await tx.$queryRaw<Array<{ access: Access }>>`
    SELECT access::text AS access FROM access_grants
     WHERE organization_id = ${organizationId}
       AND (user_id = ${principal.userId} OR team_id = ANY(${teams.map((t) => t.team_id)}::text[]))
       AND ((project_id = ${target.projectId} AND assessment_id IS NULL) OR assessment_id = ${target.assessmentId ?? null})
       FOR SHARE`;
  return grants.reduce<Access | 'none'>((best, g) => (RANK[g.access] > RANK[best] ? g.access : best), 'none');
}

/**
 * requireProjectAccess or requireAssessmentAccess inside the caller's transaction (scoped to the principal's
 * organization), for a change that hands something out on that access: read through the transaction, no second
 * connection, and held until the change commits (heldAccess).
 */
export async function requireAccessIn(tx: Scoped<Tx>, principal: Principal, target: { kind: 'project' | 'assessment'; id: string }, need: Access): Promise<void> {
  if (target.kind === 'project') {
    const project = await tx.project.findFirst({ where: { id: target.id } });
    if (!project) throw notFound('Project');
    enforce(await heldAccess(tx, principal, { projectId: project.id }), need, 'Project');
  } else {
    const assessment = await tx.assessment.findFirst({ where: { id: target.id } });
    if (!assessment) throw notFound('Assessment');
    enforce(await heldAccess(tx, principal, { projectId: assessment.projectId, assessmentId: assessment.id }), need, 'Assessment');
  }
}

export type AccessTarget = { kind: 'project' | 'assessment'; id: string };

/**
 * For a deletion, with the target's row already held FOR UPDATE (deleteWithSubscriptions): the caller still has write
 * access to it, as this transaction sees it (heldAccess), else 404 or 403 as requireAccessIn answers. A target
 * already gone passes: the deletion then finds nothing, as a second deletion of it always did.
 */
export async function requireStillMayDelete(tx: Scoped<Tx>, principal: Principal, target: AccessTarget): Promise<void> {
  const present = target.kind === 'project'
    ? await tx.project.count({ where: { id: target.id } })
    : await tx.assessment.count({ where: { id: target.id } });
  if (present) await requireAccessIn(tx, principal, target, 'write');
}

/**
 * The target's rows held FOR KEY SHARE (its project's, and the assessment's for an assessment) before the grants its
 * access rests on (heldAccess). A project's or an assessment's deletion holds its row FOR UPDATE and then cascades into
 * those grants, so the other order deadlocks with it; this way the change waits for the deletion and then finds its
 * target gone (404), or the deletion waits for the change. KEY SHARE and not more: the engine's writes to the row (a
 * transition, NO KEY UPDATE) are not held up by a change waiting here. Missing rows lock nothing.
 */
export async function holdTargetRows(tx: Scoped<Tx>, target: AccessTarget): Promise<void> {
  // Raw SQL is not scoped: the organization is named here.
  const organizationId = organizationOf(tx);
  if (target.kind === 'project') {
    await tx.$queryRaw`SELECT id FROM projects WHERE id = ${target.id} AND organization_id = ${organizationId} FOR KEY SHARE`;
    return;
  }
  await tx.$queryRaw`
    SELECT p.id FROM projects p JOIN assessments a ON a.project_id = p.id
     WHERE a.id = ${target.id} AND a.organization_id = ${organizationId}
       FOR KEY SHARE OF p`;
  await tx.$queryRaw`SELECT id FROM assessments WHERE id = ${target.id} AND organization_id = ${organizationId} FOR KEY SHARE`;
}

export type CommittedAccessCheck = { scope: Scope; action: string; need: Access; hold?: boolean };

/**
 * The check of a change to a project or an assessment, against the caller's role as committed (`committed`, read with
 * their membership locked by this transaction: own-role.ts) and what their access rests on as this transaction sees
 * it: demoted, or their grant or team taken away, while the request ran, the caller needs `scope` with the role left
 * (else 403 naming `action`) and `need` access through what is left (else 403, or 404 for what they can no longer
 * read). With `hold`, the target's rows are held first (holdTargetRows).
 */
export async function requireCommittedAccess(
  tx: Scoped<Tx>,
  principal: Principal,
  committed: Role | undefined,
  target: AccessTarget,
  check: CommittedAccessCheck,
): Promise<Role> {
  const role = requireCommittedScope(committed, check.scope, check.action);
  if (check.hold) await holdTargetRows(tx, target);
  await requireAccessIn(tx, { ...principal, role }, target, check.need);
  return role;
}

/** requireCommittedAccess with the caller's membership locked here, first thing (lockOwnRole). */
export async function requireStillMayAccess(tx: Scoped<Tx>, principal: Principal, target: AccessTarget, check: CommittedAccessCheck): Promise<Role> {
  return requireCommittedAccess(tx, principal, await lockOwnRole(tx, principal), target, check);
}

/** What the engine's hot path needs of an assessment it writes to. */
export interface AssessmentForWrite<Extra = null> {
  id: string;
  organizationId: string;
  projectId: string;
  /** The organization's remediation SLA policy (for the response's sla_due_at). */
  slaPolicy: SlaPolicy;
  /** What the caller's `extra` expression selected along (null without one). */
  extra: Extra;
}

/** The assessment's columns, for an extra expression evaluated in the same statement. */
export interface AssessmentColumns {
  organizationId: Prisma.Sql;
  projectId: Prisma.Sql;
  assessmentId: Prisma.Sql;
}

/** One request of an access check with the SLA policy: who asks, about which assessment. */
interface AccessRequest {
  principal: Principal;
  assessmentId: string;
}

interface AccessRow<Extra> {
  id: string;
  organization_id: string;
  project_id: string;
  sla_critical_days: number | null;
  sla_high_days: number | null;
  sla_medium_days: number | null;
  sla_low_days: number | null;
  sla_info_days: number | null;
  access_rank: number;
  extra: Extra;
}

type AccessExtra = { select: (assessment: AssessmentColumns) => Prisma.Sql; preparedAs: string };

/**
 * The access rows of many requests in ONE statement, per request its row or undefined (no such assessment in the
 * requester's organization). Each request carries its own organization, user and role: a row is joined only to the
 * assessment of the requester's organization, and its grants are the requester's.
 */
async function accessRowsOf<Extra>(deps: AppDeps, requests: AccessRequest[], extra: AccessExtra | undefined): Promise<Array<AccessRow<Extra> | undefined>> {
  const rows = await queryRows<AccessRow<Extra> & { ord: number }>(
    deps.prisma,
    Prisma.sql`
    SELECT r.ord::int AS ord, a.id, a.organization_id, a.project_id,
           o.sla_critical_days, o.sla_high_days, o.sla_medium_days, o.sla_low_days, o.sla_info_days,
           CASE WHEN r.org_wide THEN 2 ELSE COALESCE((
             SELECT max(CASE g.access::text WHEN 'write' THEN 2 ELSE 1 END)
             FROM access_grants g
             WHERE g.organization_id = a.organization_id
               AND (g.user_id = r.user_id
                    OR g.team_id IN (SELECT tm.team_id FROM team_members tm WHERE tm.user_id = r.user_id))
               AND ((g.project_id = a.project_id AND g.assessment_id IS NULL) OR g.assessment_id = a.id)
           ), 0) END::int AS access_rank,
           ${extra ? extra.select({ organizationId: Prisma.raw('a.organization_id'), projectId: Prisma.raw('a.project_id'), assessmentId: Prisma.raw('a.id') }) : Prisma.sql`NULL`} AS extra
    FROM unnest(${requests.map((r) => r.assessmentId)}::text[], ${requests.map((r) => r.principal.organizationId)}::text[],
                ${requests.map((r) => r.principal.userId)}::text[], ${requests.map((r) => hasOrgWideWrite(r.principal))}::boolean[])
         WITH ORDINALITY AS r(assessment_id, organization_id, user_id, org_wide, ord)
    JOIN assessments a ON a.id = r.assessment_id AND a.organization_id = r.organization_id
    JOIN organizations o ON o.id = a.organization_id`,
    extra ? extra.preparedAs : 'api_assessment_access_with_sla',
  );
  const byOrdinal = new Map(rows.map((row) => [Number(row.ord), row]));
  return requests.map((_, i) => byOrdinal.get(i + 1));
}

/** A request's access row, undefined (no such assessment in its organization), or its own statement's error. */
type AccessAnswer = AccessRow<unknown> | undefined | Error;

/** Per pool and prepared statement, the coalescer of concurrent access checks (one statement per batch). */
function accessBatcher(deps: AppDeps, extra: AccessExtra | undefined): Coalescer<AccessRequest, AccessAnswer> {
  return coalescerOf(deps.prisma, `access:${extra ? extra.preparedAs : ''}`, () =>
    new Coalescer(answeringOneByOneOnFailure((requests: AccessRequest[]) => accessRowsOf<unknown>(deps, requests, extra))),
  );
}

/**
 * requireAssessmentAccess(..., need) and the organization's SLA policy in ONE statement (the publish path runs it
 * on every recorded finding): the same rules, 404 for an assessment that is missing, of another organization or
 * not readable, 403 for a readable one without the access needed. `extra` adds one expression over the
 * assessment's columns to the same statement (the finding path reads its webhook subscriptions so), which is
 * prepared under its `preparedAs` name. Concurrent checks go in one statement (Coalescer): 32 engines publishing
 * at once cost one round trip to PostgreSQL, and one wake-up of a backend, per batch rather than per finding.
 */
export async function requireAssessmentAccessWithSla<Extra = null>(
  deps: AppDeps,
  principal: Principal,
  assessmentId: string,
  need: Access,
  extra?: AccessExtra,
): Promise<AssessmentForWrite<Extra>> {
  // PostgreSQL cannot hold a NUL in text: such an id names no assessment (and must not fail the batch it would join).
  if (assessmentId.includes('\u0000')) throw notFound('Assessment');
  const row = (await accessBatcher(deps, extra).run({ principal, assessmentId })) as AccessRow<Extra> | undefined | Error;
  if (row instanceof Error) throw row;
  if (!row) throw notFound('Assessment');
  const have = (['none', 'read', 'write'] as const)[Number(row.access_rank)] ?? 'none';
  enforce(have, need, 'Assessment');
  return {
    id: row.id,
    organizationId: row.organization_id,
    projectId: row.project_id,
    extra: row.extra,
    slaPolicy: slaPolicyFromColumns({
      slaCriticalDays: row.sla_critical_days,
      slaHighDays: row.sla_high_days,
      slaMediumDays: row.sla_medium_days,
      slaLowDays: row.sla_low_days,
      slaInfoDays: row.sla_info_days,
    }),
  };
}

/** Prisma filter for the projects a principal can read (for list endpoints), used through scopedTo(deps.prisma, principal). */
export async function readableProjectsFilter(deps: AppDeps, principal: Principal): Promise<Prisma.ProjectWhereInput> {
  if (hasOrgWideWrite(principal)) return {};
  const teamIds = await teamIdsOf(deps, principal);
  const subject = [{ userId: principal.userId }, ...(teamIds.length ? [{ teamId: { in: teamIds } }] : [])];
  return {
    grants: { some: { assessmentId: null, OR: subject } },
  };
}

/**
 * Prisma filter for the assessments a principal can read (for list endpoints), used through
 * scopedTo(deps.prisma, principal): as a relation filter too (a finding's or report's assessment).
 */
export async function readableAssessmentsFilter(deps: AppDeps, principal: Principal): Promise<Prisma.AssessmentWhereInput> {
  if (hasOrgWideWrite(principal)) return {};
  const teamIds = await teamIdsOf(deps, principal);
  const subject = [{ userId: principal.userId }, ...(teamIds.length ? [{ teamId: { in: teamIds } }] : [])];
  return {
    OR: [
      { grants: { some: { OR: subject } } },
      { project: { grants: { some: { assessmentId: null, OR: subject } } } },
    ],
  };
}
