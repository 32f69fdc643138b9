// Tenancy in the data layer. `scopedTo(prisma, principal)` is a Prisma client whose every read and write of an
// organization-owned model carries the principal's organization: the filter is added to each `where` (a caller
// can neither forget nor widen it), and a create's data must name the same organization. Queries on
// other models (users, organizations themselves) pass through unchanged.
import { Prisma, type PrismaClient } from './generated/prisma/client';

/** The models with an organization_id column (prisma/schema.prisma). */
export const ORGANIZATION_SCOPED_MODELS: ReadonlySet<string> = new Set([
  'Membership', 'Invitation', 'Session', 'Team', 'Project', 'Assessment', 'AccessGrant', 'ApiKey', 'WebhookSubscription',
  'Event', 'WebhookDelivery', 'Finding', 'Report', 'FixVerification', 'PrReview', 'UsageRecord', 'SpendLimit', 'AuditEvent',
]);

/** Whoever the queries are made for: an authenticated principal, or any holder of an organization id. */
export interface Tenant {
  readonly organizationId: string;
}

const FILTERED = new Set([
  'findUnique', 'findUniqueOrThrow', 'findFirst', 'findFirstOrThrow', 'findMany', 'count', 'aggregate', 'groupBy',
  'update', 'updateMany', 'updateManyAndReturn', 'delete', 'deleteMany', 'upsert',
]);
const CREATING = new Set(['create', 'createMany', 'createManyAndReturn']);

export class CrossTenantWriteError extends Error {
  constructor(model: string, organizationId: unknown, tenant: string) {
    super(`${model} create for organization ${String(organizationId)} through a client scoped to ${tenant}`);
    this.name = 'CrossTenantWriteError';
  }
}

function ownedBy(model: string, data: unknown, organizationId: string): unknown {
  const rows = Array.isArray(data) ? data : [data];
  for (const row of rows as Array<Record<string, unknown>>) {
    if (row.organizationId !== undefined && row.organizationId !== organizationId) throw new CrossTenantWriteError(model, row.organizationId, organizationId);
  }
  const stamp = (row: Record<string, unknown>) => ('organization' in row ? row : { ...row, organizationId });
  return Array.isArray(data) ? (data as Array<Record<string, unknown>>).map(stamp) : stamp(data as Record<string, unknown>);
}

/** The caller's filter AND the tenant's organization; a caller's own organization filter narrows, never widens. */
function scopeWhere(where: Record<string, unknown> | undefined, organizationId: string): Record<string, unknown> {
  const { organizationId: asked, ...rest } = where ?? {};
  if (asked === undefined || asked === organizationId) return { ...rest, organizationId };
  return { ...rest, organizationId, AND: [{ organizationId: asked }, ...[rest.AND ?? []].flat()] };
}

const tenancy = (organizationId: string) =>
  Prisma.defineExtension({
    name: 'tenancy',
    query: {
      $allModels: {
        async $allOperations({ model, operation, args, query }) {
          if (!ORGANIZATION_SCOPED_MODELS.has(model)) return query(args);
          const a = (args ?? {}) as { where?: Record<string, unknown>; data?: unknown };
          if (FILTERED.has(operation)) return query({ ...a, where: scopeWhere(a.where, organizationId) } as typeof args);
          if (CREATING.has(operation)) return query({ ...a, data: ownedBy(model, a.data, organizationId) } as typeof args);
          return query(args);
        },
      },
    },
  });

/** A client limited to one organization's rows; build it per request from the principal. */
export function scopedTo(prisma: PrismaClient, tenant: Tenant) {
  return prisma.$extends(tenancy(tenant.organizationId));
}

export type ScopedDb = ReturnType<typeof scopedTo>;
