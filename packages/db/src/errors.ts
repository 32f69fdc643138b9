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
  return codesOf(err).some((c) => c === 'P2003' || c === '23503');
}

/**
 * The codes an error carries, however it arrives: Prisma's own (P…) or a SQLSTATE on the error, in its `meta`, or
 * in the driver adapter's cause (raw statements through @prisma/adapter-pg).
 */
function codesOf(err: unknown): unknown[] {
  if (typeof err !== 'object' || err === null) return [];
  const { code, meta } = err as { code?: unknown; meta?: { code?: unknown; driverAdapterError?: { cause?: { originalCode?: unknown } } } };
  return [code, meta?.code, meta?.driverAdapterError?.cause?.originalCode];
}

/**
 * True when PostgreSQL rolled the transaction back to break a deadlock (40P01) or a serialization failure (40001),
 * Prisma's P2034, however it arrives: nothing of it was committed, and the same request sent again can succeed.
 */
export function isTransactionConflict(err: unknown): boolean {
  return codesOf(err).some((c) => c === 'P2034' || c === '40P01' || c === '40001');
}

/**
 * Runs `transaction` again, up to `attempts` runs in all, while PostgreSQL rolls it back to break a deadlock: for a
 * transaction that must not give up to a concurrent writer (the last step of a deletion whose history is already gone).
 */
export async function retryingCollisions<T>(transaction: () => Promise<T>, attempts = 3): Promise<T> {
  for (let run = 1; ; run += 1) {
    try {
      return await transaction();
    } catch (err) {
      if (run >= attempts || !isTransactionConflict(err)) throw err;
    }
  }
}

/** True when a statement gave up waiting for a row lock (PostgreSQL's 55P03 under `lock_timeout`), however it arrives. */
export function isLockNotAvailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  return codesOf(err).includes('55P03') || /lock timeout/i.test(String((err as { message?: unknown }).message));
}

// Prisma codes and driver-adapter kinds that mean "PostgreSQL cannot be reached now", not "this query is wrong".
const UNAVAILABLE_PRISMA_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2037']);
const UNAVAILABLE_ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
// PostgreSQL SQLSTATEs of a server shutting down, restarting or refusing connections (class 57, 08).
const UNAVAILABLE_SQLSTATE = /^(57P0[1-3]|08\d\d\d)$/;
const UNAVAILABLE_MESSAGE =
  /timeout exceeded when trying to connect|Connection terminated|ECONNREFUSED|ECONNRESET|Can't reach database server|the database system is (starting up|shutting down)/i;

// Prisma's P2028 when a transaction could not start in time or outran its timeout (rolled back, nothing committed):
// a server too loaded to answer in time. P2028 also covers misuse (a transaction used after it ended): not these.
const TRANSACTION_OUT_OF_TIME = /Unable to start a transaction in the given time|cannot be executed on an expired transaction/;

/**
 * True when a query failed because PostgreSQL is unreachable, restarting, out of connections or too loaded for a
 * transaction to finish within its timeout: a transient outage the API answers with 503, not a bug.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  if ((err as { code?: unknown }).code === 'P2028' && TRANSACTION_OUT_OF_TIME.test(String((err as { message?: unknown }).message))) return true;
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
