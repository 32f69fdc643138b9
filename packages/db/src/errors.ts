/**
 * True when a write failed on a unique constraint, e.g. a concurrent insert won the race: Prisma's P2002 from a
 * model query, or PostgreSQL's own 23505 from a raw statement.
 */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, meta } = err as { code?: string; meta?: { code?: string } };
  return code === 'P2002' || code === '23505' || meta?.code === '23505' || /\b23505\b|unique constraint/i.test(String((err as Error).message));
}

/**
 * True when a write failed on a foreign key: the row it refers to was deleted while the request ran (an assessment
 * deleted while a subscription is created under it, say). Prisma's P2003 from a model query, PostgreSQL's 23503 from
 * a raw statement.
 */
export function isForeignKeyViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, meta } = err as { code?: string; meta?: { code?: string; driverAdapterError?: { cause?: { originalCode?: string } } } };
  return code === 'P2003' || code === '23503' || meta?.code === '23503' || meta?.driverAdapterError?.cause?.originalCode === '23503';
}

// Prisma codes and driver-adapter kinds that mean "PostgreSQL cannot be reached now", not "this query is wrong".
const UNAVAILABLE_PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2037']);
const UNAVAILABLE_ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
// PostgreSQL SQLSTATEs of a server shutting down, restarting or refusing connections (class 57, 08).
const UNAVAILABLE_SQLSTATE = /^(57P0[1-3]|08\d\d\d)$/;
const UNAVAILABLE_MESSAGE =
  /timeout exceeded when trying to connect|Connection terminated|ECONNREFUSED|ECONNRESET|Can't reach database server|the database system is (starting up|shutting down)/i;

/**
 * True when a query failed because PostgreSQL is unreachable, restarting or out of connections: a transient
 * outage the API answers with 503, not a bug.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, meta, message } = err as {
    code?: unknown;
    meta?: { driverAdapterError?: { cause?: { kind?: string; originalCode?: string } } };
    message?: unknown;
  };
  if (typeof code === 'string' && (UNAVAILABLE_PRISMA_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true;
  const cause = meta?.driverAdapterError?.cause;
  if (cause?.kind && UNAVAILABLE_ADAPTER_KINDS.has(cause.kind)) return true;
  if (cause?.originalCode && UNAVAILABLE_SQLSTATE.test(cause.originalCode)) return true;
  return typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message);
}
