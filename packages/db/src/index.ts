import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { Prisma, PrismaClient } from './generated/prisma/client';
import { pgFields } from './pg-fields';

export * from './generated/prisma/client';
export { pgFields } from './pg-fields';

/**
 * A pg pool with the service's connection settings (discrete fields, UTC timestamps). `connectTimeoutMs` bounds the
 * wait for a pool connection: without it a query waits forever while PostgreSQL is unreachable (pg's default is no
 * timeout).
 */
export function createPgPool(
  databaseUrl: string,
  options: {
    max?: number;
    connectTimeoutMs?: number;
    idleTimeoutMs?: number;
    queryTimeoutMs?: number;
    allowExitOnIdle?: boolean;
    applicationName?: string;
    /** Told of an idle connection the server ended (the pool drops it and opens a new one when needed). */
    onIdleError?: (err: Error) => void;
  } = {},
): pg.Pool {
  const pool = new pg.Pool({
    ...pgFields(databaseUrl),
    ...(options.applicationName !== undefined && { application_name: options.applicationName }),
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    ...(options.idleTimeoutMs !== undefined && { idleTimeoutMillis: options.idleTimeoutMs }),
    ...(options.queryTimeoutMs !== undefined && { query_timeout: options.queryTimeoutMs }),
    ...(options.allowExitOnIdle !== undefined && { allowExitOnIdle: options.allowExitOnIdle }),
    types: { getTypeParser: utcTypeParser },
  });
  // An idle connection the server ends (a restart, a failover, pg_terminate_backend) is an 'error' on the pool, and
  // an 'error' nobody listens to ends the process. Prisma's adapter listens only between its connect and its
  // $disconnect: a connection ended after that (a database dropped or restarted while the process shut down) killed
  // it with exit code 1. The pool drops that connection by itself; `onIdleError` hears of it (a log line).
  pool.on('error', (err) => options.onIdleError?.(err));
  return pool;
}

/** The `onIdleError` of a process's main pool: one warning line per idle connection the server ended. */
export function warnOfIdleConnectionError(logger: { warn(message: string, meta: Record<string, unknown>): unknown }): (err: Error) => void {
  return (err) => logger.warn('A database connection was ended by the server; the pool opens a new one', { error: err.message });
}

/** A Prisma client that talks to PostgreSQL through the pg driver adapter (no query-engine binary). */
export function createPrismaClient(
  databaseUrl: string,
  options: { max?: number; connectTimeoutMs?: number; onIdleError?: (err: Error) => void } = {},
): PrismaClient {
  const pool = createPgPool(databaseUrl, options);
  // The adapter shares this pool (and ends it on $disconnect); hot paths may query it directly (poolOf).
  const client = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
  pools.set(client, pool);
  return client;
}

const pools = new WeakMap<object, pg.Pool>();
const TIMESTAMP_WITHOUT_TIME_ZONE = 1114;

/** timestamp(3) columns hold UTC wall time (as Prisma writes them): read them as UTC, whatever the process's TZ. */
function utcTypeParser(oid: number, format?: 'text' | 'binary'): (value: string) => unknown {
  if (oid === TIMESTAMP_WITHOUT_TIME_ZONE && format !== 'binary') return (value) => new Date(`${value.replace(' ', 'T')}Z`);
  return pg.types.getTypeParser(oid, format as 'text');
}

/**
 * The pg pool under a client made by createPrismaClient, for the few hot statements where Prisma's per-query cost
 * outweighs the work (the worker's delivery load and attempt record). Undefined for any other client (a
 * transaction, a scoped client): callers fall back to Prisma.
 */
export function poolOf(client: object): pg.Pool | undefined {
  return pools.get(client);
}

/**
 * Runs one raw statement and returns its rows: straight on the pool when the client has one (poolOf), through
 * `$queryRaw` otherwise (a transaction's client). Rows come as pg gives them: timestamps as Dates (UTC), bigint as text.
 *
 * `preparedAs` names a server-side prepared statement: PostgreSQL parses and plans it once per connection instead
 * of on every call, which is most of its cost for the hot paths' CTE statements. Only for a statement whose text
 * never changes (every value a parameter); ignored through `$queryRaw`.
 */
export async function queryRows<T>(client: Pick<PrismaClient, '$queryRaw'>, statement: Prisma.Sql, preparedAs?: string): Promise<T[]> {
  const pool = poolOf(client);
  if (pool) return (await pool.query({ name: preparedAs, text: statement.text, values: statement.values })).rows as T[];
  return client.$queryRaw<T[]>(statement);
}

/**
 * Loads Prisma's query compiler (WebAssembly) now. The first model query of a process spends a few hundred
 * milliseconds of CPU instantiating it, with the event loop blocked; started at start-up, that is not paid in the
 * middle of traffic (a worker's first relay tick stalled every delivery in flight). Never fails: the compiler
 * loads before the query is sent, so an unreachable PostgreSQL changes nothing.
 */
export async function warmUpQueryCompiler(client: PrismaClient): Promise<void> {
  await client.organization.findFirst({ where: { id: '' }, select: { id: true } }).catch(() => undefined);
}

/** The client handed to a `$transaction(async (tx) => ...)` callback. */
export type Tx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;
export type Db = PrismaClient;
export type PgPool = pg.Pool;
export * from './ids';
export * from './sealed';
export * from './erasure-subject';
export * from './chat-urls';
export * from './stored-credentials';
export * from './errors';
export * from './tenancy';
export * from './user-locks';
export * from './sql';
export * from './coalesce';
