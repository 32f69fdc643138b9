// Spend: usage records (credits the engine spent, on the organization or one of its projects) and limits on
// spend, per organization or per project: alert thresholds and caps.
//
// Events, each exactly once per crossing:
// - `spend.threshold_crossed` when the spend of a threshold's scope reaches (>=) it;
// - `spend.cap_reached` when the spend of a cap's scope reaches (>=) it; from then on launching an assessment in
//   that scope is refused with 400 (spend-guard.ts) until the cap is raised above the spend.
// The scope's spend is the organization's total for an organization limit, the project's total for a project
// limit. "Once" is a claim: a conditional update of SpendLimit.triggeredAt (IS NULL -> now) in the transaction
// that publishes; every spend change of an organization (usage, limit create/update) also locks the organization
// row first, so concurrent usage records cannot both miss a crossing. Raising a limit above the current spend
// clears triggeredAt, which arms it again; lowering a limit to or below the spend triggers it at once.
import { scopedTo, type Prisma, type Scoped, type SpendLimit, type Tx, type UsageRecord } from '@svc/db';
import { outboxDeps, withOutbox, type Publish } from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, notFound, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId } from '@svc/db';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import { formatCredits, lockOrganizationSpend, spentIn, ZERO, type Decimal } from './spend-ledger';

/**
 * The organization's spend locked for a change by `principal`, whose role as committed must still carry billing:manage
 * (own-role.ts: the organization's row, then the membership).
 */
async function lockSpendForChange(tx: Scoped<Tx>, principal: Principal, action: string): Promise<void> {
  await lockOrganizationSpend(tx);
  await requireStillHolds(tx, principal, 'billing:manage', action);
}

export const LIMIT_KINDS = ['threshold', 'cap'] as const;
export type LimitKind = (typeof LIMIT_KINDS)[number];

function positive(amount: string, what = 'credits'): string {
  if (!(Number(amount) > 0)) throw unprocessable(`${what} must be greater than 0.`);
  return amount;
}

async function requireProjectInOrg(deps: AppDeps, principal: Principal, projectId: string): Promise<string> {
  const project = await scopedTo(deps.prisma, principal).project.findFirst({ where: { id: projectId }, select: { id: true } });
  if (!project) throw notFound('Project');
  return project.id;
}

export function presentUsage(u: UsageRecord) {
  return {
    id: u.id,
    project_id: u.projectId,
    credits: formatCredits(u.credits),
    description: u.description,
    created_at: u.createdAt.toISOString(),
  };
}

export function presentLimit(l: SpendLimit) {
  return {
    id: l.id,
    scope: l.projectId === null ? 'organization' : 'project',
    project_id: l.projectId,
    kind: l.kind,
    credits: formatCredits(l.credits),
    triggered: l.triggeredAt !== null,
    triggered_at: l.triggeredAt?.toISOString() ?? null,
    created_at: l.createdAt.toISOString(),
    updated_at: l.updatedAt.toISOString(),
  };
}

/** The event data of a triggered limit: public ids and amounts only. */
function limitEvent(limit: SpendLimit, spent: Decimal) {
  const kind = limit.kind as LimitKind;
  return {
    type: kind === 'cap' ? ('spend.cap_reached' as const) : ('spend.threshold_crossed' as const),
    data: {
      limit_id: limit.id,
      scope: limit.projectId === null ? 'organization' : 'project',
      project_id: limit.projectId,
      [kind === 'cap' ? 'cap_credits' : 'threshold_credits']: formatCredits(limit.credits),
      spent_credits: formatCredits(spent),
    },
  };
}

/**
 * Triggers every given limit whose scope's spend has reached it and that is not triggered yet: claims it (the
 * conditional update) and publishes its event. The caller holds the organization's spend lock.
 */
async function triggerReached(tx: Scoped<Tx>, publish: Publish, limits: SpendLimit[], now: Date): Promise<void> {
  const spentByScope = new Map<string | null, Decimal>();
  for (const limit of limits) {
    if (limit.triggeredAt !== null) continue;
    let spent = spentByScope.get(limit.projectId);
    if (spent === undefined) {
      spent = await spentIn(tx, limit.projectId);
      spentByScope.set(limit.projectId, spent);
    }
    if (spent.lt(limit.credits)) continue;
    const claimed = await tx.spendLimit.updateMany({ where: { id: limit.id, triggeredAt: null }, data: { triggeredAt: now } });
    if (claimed.count !== 1) continue;
    const event = limitEvent(limit, spent);
    await publish({ ...event, organizationId: limit.organizationId, projectId: limit.projectId });
  }
}

/** Engine: records credits spent; publishes the threshold and cap events this spend triggers. */
export async function recordUsage(
  deps: AppDeps,
  principal: Principal,
  input: { project_id?: string | null; credits: string; description?: string | null },
) {
  const credits = positive(input.credits);
  const projectId = input.project_id ? await requireProjectInOrg(deps, principal, input.project_id) : null;
  const now = deps.clock.now();
  const usage = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await lockSpendForChange(tx, principal, 'Recording usage');
      const created = await tx.usageRecord.create({
        data: {
          id: newId('use', now.getTime()),
          organizationId: principal.organizationId,
          projectId,
          credits,
          description: input.description || null,
          createdAt: now,
        },
      });
      const limits = await tx.spendLimit.findMany({
        where: {
          triggeredAt: null,
          OR: [{ projectId: null }, ...(projectId ? [{ projectId }] : [])],
        },
        orderBy: { id: 'asc' },
      });
      await triggerReached(tx, publish, limits, now);
      return created;
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentUsage(usage);
}

export async function listUsage(
  deps: AppDeps,
  principal: Principal,
  query: PageQuery & { project_id?: string; since?: Date; until?: Date },
) {
  const args = pageArgs(query);
  const where: Prisma.UsageRecordWhereInput = {
    ...(query.project_id && { projectId: query.project_id }),
    ...((query.since || query.until) && {
      createdAt: { ...(query.since && { gte: query.since }), ...(query.until && { lt: query.until }) },
    }),
  };
  const rows = await scopedTo(deps.prisma, principal).usageRecord.findMany({ ...args, where: { ...args.where, ...where } });
  return toPage(rows, query, presentUsage);
}

/** Totals: the organization's spend, each project's, and whether a cap stops launches there. */
export async function getBalance(deps: AppDeps, principal: Principal) {
  const db = scopedTo(deps.prisma, principal);
  const [total, byProject, caps] = await Promise.all([
    spentIn(db, null),
    db.usageRecord.groupBy({
      by: ['projectId'],
      where: { projectId: { not: null } },
      _sum: { credits: true },
      orderBy: { projectId: 'asc' },
    }),
    db.spendLimit.findMany({ where: { kind: 'cap' } }),
  ]);
  const spentOf = new Map(byProject.map((row) => [row.projectId, row._sum.credits ?? ZERO]));
  const capReached = (projectId: string | null, spent: Decimal) =>
    caps.some((c) => c.projectId === projectId && (c.triggeredAt !== null || spent.gte(c.credits)));
  const orgCapReached = capReached(null, total);
  const assigned = byProject.reduce((sum, row) => sum.add(row._sum.credits ?? ZERO), ZERO);
  return {
    spent_credits: formatCredits(total),
    unassigned_credits: formatCredits(total.sub(assigned)),
    cap_reached: orgCapReached,
    projects: byProject.map((row) => {
      const spent = spentOf.get(row.projectId) ?? ZERO;
      return {
        project_id: row.projectId,
        spent_credits: formatCredits(spent),
        cap_reached: orgCapReached || capReached(row.projectId, spent),
      };
    }),
  };
}

function checkKind(kind: string): LimitKind {
  if (!(LIMIT_KINDS as readonly string[]).includes(kind)) throw unprocessable(`kind must be one of ${LIMIT_KINDS.join(', ')}.`);
  return kind as LimitKind;
}

async function requireLimit(deps: AppDeps, principal: Principal, id: string): Promise<SpendLimit> {
  const limit = await scopedTo(deps.prisma, principal).spendLimit.findFirst({ where: { id } });
  if (!limit) throw notFound('Spend limit');
  return limit;
}

export async function listLimits(deps: AppDeps, principal: Principal, query: PageQuery & { project_id?: string; kind?: string }) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).spendLimit.findMany({
    ...args,
    where: {
      ...args.where,
      ...(query.project_id && { projectId: query.project_id }),
      ...(query.kind && { kind: query.kind }),
    },
  });
  return toPage(rows, query, presentLimit);
}

export async function getLimit(deps: AppDeps, principal: Principal, id: string) {
  return presentLimit(await requireLimit(deps, principal, id));
}

/**
 * Creates a threshold or a cap on the organization (no project_id) or on one project. One cap per scope (409 for a
 * second). A limit the scope's spend has already reached triggers at once (its event is published).
 */
export async function createLimit(
  deps: AppDeps,
  principal: Principal,
  input: { project_id?: string | null; kind: string; credits: string },
) {
  const kind = checkKind(input.kind);
  const credits = positive(input.credits);
  const projectId = input.project_id ? await requireProjectInOrg(deps, principal, input.project_id) : null;
  const now = deps.clock.now();
  const limit = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await lockSpendForChange(tx, principal, 'Managing spend limits');
      if (kind === 'cap') {
        const existing = await tx.spendLimit.findFirst({
          where: { kind: 'cap', projectId },
          select: { id: true },
        });
        if (existing) throw conflict(`This ${projectId ? 'project' : 'organization'} already has a cap (${existing.id}); change it instead.`);
      }
      const created = await tx.spendLimit.create({
        data: { id: newId('lim', now.getTime()), organizationId: principal.organizationId, projectId, kind, credits, createdAt: now },
      });
      await triggerReached(tx, publish, [created], now);
      return tx.spendLimit.findUniqueOrThrow({ where: { id: created.id } });
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentLimit(limit);
}

/** Changes the amount: above the current spend re-arms the limit; at or below it triggers it (once). */
export async function updateLimit(deps: AppDeps, principal: Principal, id: string, input: { credits: string }) {
  const credits = positive(input.credits);
  await requireLimit(deps, principal, id);
  const now = deps.clock.now();
  const limit = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await lockSpendForChange(tx, principal, 'Managing spend limits');
      const current = await tx.spendLimit.findFirst({ where: { id } });
      if (!current) throw notFound('Spend limit');
      const spent = await spentIn(tx, current.projectId);
      const updated = await tx.spendLimit.update({
        where: { id: current.id },
        data: { credits, ...(spent.lt(credits) && { triggeredAt: null }) },
      });
      await triggerReached(tx, publish, [updated], now);
      return tx.spendLimit.findUniqueOrThrow({ where: { id: current.id } });
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentLimit(limit);
}

export async function deleteLimit(deps: AppDeps, principal: Principal, id: string): Promise<void> {
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await lockSpendForChange(tx, principal, 'Managing spend limits');
    const deleted = await tx.spendLimit.deleteMany({ where: { id } });
    if (deleted.count === 0) throw notFound('Spend limit');
  }, RECHECKED_TRANSACTION);
}
