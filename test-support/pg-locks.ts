// Watching PostgreSQL row locks from a test: how many backends wait for one holding connection, how many wait for
// any lock at all. With waitFor (private-services.ts), a test orders a race: hold a row, start the request, wait
// until it waits, then let go.
import type { Client } from 'pg';

/**
 * Backends of the server waiting for a lock that backend `pid` holds. Ask through a connection outside the holder's
 * transaction: inside one, pg_stat_activity reads as the snapshot its first read took.
 */
export async function waitingFor(pg: Client, pid: number): Promise<number> {
  const { rows } = await pg.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))', [pid]);
  return rows[0]!.n;
}

/** Backends of `pg`'s database waiting for any lock. */
export async function lockWaiters(pg: Client): Promise<number> {
  const { rows } = await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
  return rows[0]!.n;
}

/** The backend id of a connection (to watch who waits for it). */
export async function backendPid(pg: Client): Promise<number> {
  const { rows } = await pg.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return rows[0]!.pid;
}
