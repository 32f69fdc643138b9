// Tenancy in the data layer. `scopedTo(client, principal)` wraps a Prisma client, or the `tx` of a transaction, so
// that every read and write of an organization-owned model carries the principal's organization: the filter is
// added to each `where` (a caller can neither forget nor widen it), a create's data gets the organization (and
// must not name another one), and an update cannot move a row to another organization. Team memberships, which
// have no organization column, are filtered through their team. Queries on other models (users, organizations
// themselves) and raw SQL pass through unchanged.
//
// The wrapper has the type of what it wraps, so a scoped `tx` goes wherever a `Tx` goes (withOutbox callbacks,
// recordAudit, helpers); `Scoped<T>` marks the helpers that must only ever be handed a scoped client.
import type { Prisma, PrismaClient } from './generated/prisma/client';

/** The models with an organization_id column (prisma/schema.prisma). */
export const ORGANIZATION_SCOPED_MODELS: ReadonlySet<string> = new Set([
  'Membership', 'Invitation', 'Session', 'Team', 'Project', 'Assessment', 'AccessGrant', 'ApiKey', 'WebhookSubscription',
  'Event', 'WebhookDelivery', 'Finding', 'Report', 'FixVerification', 'PrReview', 'UsageRecord', 'SpendLimit', 'AuditEvent',
  'SourceArchive', 'SourceFile', 'ProjectSource',
  'ReportShare',
  'ErasureRequest', 'Integration', 'TeamIntegration',
  'IssueExportTarget', 'FindingIssueExport',
  'IdempotencyKey',
]);

/** Models without an organization column, scoped through the relation to their organization-owned parent. */
const SCOPED_THROUGH: Readonly<Record<string, { relation: string; parent: string; key: string }>> = {
  TeamMember: { relation: 'team', parent: 'team', key: 'teamId' },
};

/** Whoever the queries are made for: an authenticated principal, or any holder of an organization id. */
export interface Tenant {
  readonly organizationId: string;
}

const FILTERED = new Set([
  'findUnique', 'findUniqueOrThrow', 'findFirst', 'findFirstOrThrow', 'findMany', 'count', 'aggregate', 'groupBy',
  'update', 'updateMany', 'updateManyAndReturn', 'delete', 'deleteMany', 'upsert',
]);
const CREATING = new Set(['create', 'createMany', 'createManyAndReturn']);
const UPDATING = new Set(['update', 'updateMany', 'updateManyAndReturn']);

export class CrossTenantWriteError extends Error {
  constructor(model: string, organizationId: unknown, tenant: string) {
    super(`${model} write for organization ${String(organizationId)} through a client scoped to ${tenant}`);
    this.name = 'CrossTenantWriteError';
  }
}

type Row = Record<string, unknown>;

/** Create data with the tenant's organization (a row naming another one is refused). */
function ownedBy(model: string, data: unknown, organizationId: string): unknown {
  const rows = (Array.isArray(data) ? data : [data]) as Row[];
  for (const row of rows) {
    if (row.organizationId !== undefined && row.organizationId !== organizationId) throw new CrossTenantWriteError(model, row.organizationId, organizationId);
  }
  const stamp = (row: Row) => ('organization' in row ? row : { ...row, organizationId });
  return Array.isArray(data) ? rows.map(stamp) : stamp(data as Row);
}

/** Update data may not move a row to another organization. */
function staysWith(model: string, data: unknown, organizationId: string): void {
  const asked = (data as Row | undefined)?.organizationId;
  if (asked !== undefined && asked !== organizationId) throw new CrossTenantWriteError(model, asked, organizationId);
}

/** The caller's filter AND the tenant's organization; a caller's own organization filter narrows, never widens. */
function scopeWhere(where: Row | undefined, organizationId: string): Row {
  const { organizationId: asked, ...rest } = where ?? {};
  if (asked === undefined || asked === organizationId) return { ...rest, organizationId };
  return { ...rest, organizationId, AND: [{ organizationId: asked }, ...[rest.AND ?? []].flat()] };
}

/** The caller's filter AND "its parent belongs to the tenant's organization". */
function scopeThrough(where: Row | undefined, relation: string, organizationId: string): Row {
  const rest = where ?? {};
  return { ...rest, AND: [...[rest.AND ?? []].flat(), { [relation]: { organizationId } }] };
}

type Delegate = Record<string, unknown>;
type Call = (args?: Row) => unknown;

function scopedDelegate(client: object, delegate: Delegate, model: string, organizationId: string): Delegate {
  const through = SCOPED_THROUGH[model];
  const owned = ORGANIZATION_SCOPED_MODELS.has(model);
  const wrapped = new Map<string, Call>();
  const wrap = (operation: string, original: Call): Call => (args?: Row) => {
    const a = args ?? {};
    try {
      if (owned) {
        if (CREATING.has(operation)) return original.call(delegate, { ...a, data: ownedBy(model, a.data, organizationId) });
        if (!FILTERED.has(operation)) return original.call(delegate, args);
        if (UPDATING.has(operation)) staysWith(model, a.data, organizationId);
        if (operation === 'upsert') {
          staysWith(model, a.update, organizationId);
          const create = ownedBy(model, a.create, organizationId);
          return original.call(delegate, { ...a, where: scopeWhere(a.where as Row, organizationId), create });
        }
        return original.call(delegate, { ...a, where: scopeWhere(a.where as Row, organizationId) });
      }
      // Scoped through a parent: filtered reads and writes; a create (or upsert) first checks the parent.
      if (FILTERED.has(operation) && operation !== 'upsert') {
        return original.call(delegate, { ...a, where: scopeThrough(a.where as Row, through.relation, organizationId) });
      }
      if (CREATING.has(operation) || operation === 'upsert') {
        const rows = (operation === 'upsert' ? [a.create] : [a.data].flat()) as Row[];
        const parentIds = [...new Set(rows.map((r) => r[through.key] as string))];
        const parents = (client as Record<string, Delegate>)[through.parent].count as Call;
        return (async () => {
          const found = (await parents.call((client as Record<string, Delegate>)[through.parent], {
            where: { id: { in: parentIds }, organizationId },
          })) as number;
          if (found !== parentIds.length) throw new CrossTenantWriteError(model, `of ${through.parent} ${parentIds.join(', ')}`, organizationId);
          const scoped = operation === 'upsert' ? { ...a, where: scopeThrough(a.where as Row, through.relation, organizationId) } : a;
          return original.call(delegate, scoped);
        })();
      }
      return original.call(delegate, args);
    } catch (err) {
      return Promise.reject(err);
    }
  };
  return new Proxy(delegate, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target);
      if (typeof prop !== 'string' || typeof value !== 'function') return value;
      let fn = wrapped.get(prop);
      if (!fn) wrapped.set(prop, (fn = wrap(prop, value as Call)));
      return fn;
    },
  });
}

const modelOf = (prop: string) => prop.charAt(0).toUpperCase() + prop.slice(1);
const SCOPED_ORGANIZATION = Symbol('scoped organization');

type ScopedBrand = { readonly [SCOPED_ORGANIZATION]: string };
type TxOf<C> = Omit<C, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;

/** The transactions of a scoped client: the callback's `tx` is scoped to the same organization. */
interface ScopedTransactions<C> {
  $transaction<P extends Prisma.PrismaPromise<unknown>[]>(
    arg: [...P],
    options?: { isolationLevel?: Prisma.TransactionIsolationLevel },
  ): Promise<{ [K in keyof P]: Awaited<P[K]> }>;
  $transaction<R>(
    fn: (tx: Scoped<TxOf<C>>) => Promise<R>,
    options?: { maxWait?: number; timeout?: number; isolationLevel?: Prisma.TransactionIsolationLevel },
  ): Promise<R>;
}

/** A client (or transaction) that `scopedTo` made: only such a client may be handed to a `Scoped<T>` parameter. */
export type Scoped<C> = (C extends { $transaction: unknown } ? Omit<C, '$transaction'> & ScopedTransactions<C> : C) & ScopedBrand;

/** A client limited to one organization's rows; build it per request (or per transaction) from the principal. */
export function scopedTo<C extends object>(client: C, tenant: Tenant): Scoped<C> {
  const { organizationId } = tenant;
  const delegates = new Map<string, Delegate>();
  return new Proxy(client, {
    get(target, prop) {
      if (prop === SCOPED_ORGANIZATION) return organizationId;
      const value = Reflect.get(target, prop, target);
      if (typeof prop !== 'string') return value;
      if (prop === '$transaction' && typeof value === 'function') {
        // Interactive transactions hand the callback a scoped tx; batches are made of already scoped queries.
        return (arg: unknown, ...rest: unknown[]) =>
          typeof arg === 'function'
            ? (value as Function).call(target, (tx: object) => (arg as (tx: object) => unknown)(scopedTo(tx, tenant)), ...rest)
            : (value as Function).call(target, arg, ...rest);
      }
      if (typeof value === 'function') return (value as Function).bind(target);
      const model = modelOf(prop);
      if (value && typeof value === 'object' && (ORGANIZATION_SCOPED_MODELS.has(model) || model in SCOPED_THROUGH)) {
        let delegate = delegates.get(prop);
        if (!delegate) delegates.set(prop, (delegate = scopedDelegate(target, value as Delegate, model, organizationId)));
        return delegate;
      }
      return value;
    },
  }) as unknown as Scoped<C>;
}

/** The organization a scoped client is limited to (for raw SQL and for values that are not filters). */
export function organizationOf(db: ScopedBrand): string {
  return db[SCOPED_ORGANIZATION];
}

export type ScopedDb = Scoped<PrismaClient>;
