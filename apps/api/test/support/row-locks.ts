// Holding rows in a test's own transaction while requests queue behind them: the requests then meet, in order, what
// the test commits meanwhile (a demotion, another request's change) or the lock the test asks for next (a deadlock).
import { Client } from 'pg';
import type request from 'supertest';
import type { Harness } from './harness';
import { backendPid } from '../../../../test-support/pg-locks';

export type HoldingTx = Parameters<Parameters<Harness['deps']['prisma']['$transaction']>[0]>[0];

/**
 * Waits until `waiting` backends wait for backend `pid`, directly or behind one another (pg_blocking_pids). Asked on
 * the harness's pool, outside the holder's transaction (inside one, pg_stat_activity reads as its first snapshot).
 * With `orDone`, it also stops (without the waiters) once `orDone()` is true: a request that answered without waiting.
 */
export async function untilBlockedBy(h: Harness, pid: number, waiting: number, { orDone }: { orDone?: () => boolean } = {}): Promise<void> {
  for (let waited = 0; !orDone?.(); waited += 20) {
    // Not any lock wait in the database, which other test files share: only those queued behind `pid`.
    const [row] = await h.deps.prisma.$queryRaw<Array<{ n: number }>>`
      WITH RECURSIVE blocked(pid) AS (
        SELECT pid FROM pg_stat_activity WHERE ${pid}::int = ANY(pg_blocking_pids(pid))
        UNION
        SELECT a.pid FROM pg_stat_activity a JOIN blocked b ON b.pid = ANY(pg_blocking_pids(a.pid)))
      SELECT count(*)::int AS n FROM blocked`;
    if (row!.n >= waiting) return;
    if (waited > 15_000) {
      throw new Error(`never ${waiting} requests waiting for the held rows (${row!.n} at the last look)${orDone ? ', nor did the request answer' : ''}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Runs `send` while this test's transaction holds the locks `hold` takes, until `waiting` backends wait for that
 * transaction; then runs `meanwhile` inside it (with the holder's backend id) and lets go.
 */
export async function whileRowsHeld<T>(
  h: Harness,
  hold: (tx: HoldingTx) => Promise<unknown>,
  send: () => Promise<T>,
  waiting: number,
  meanwhile: (tx: HoldingTx, holder: number) => Promise<unknown> = async () => {},
): Promise<T> {
  let sent!: Promise<T>;
  await h.deps.prisma.$transaction(
    async (tx) => {
      const [{ pid }] = await tx.$queryRaw<Array<{ pid: number }>>`SELECT pg_backend_pid() AS pid`;
      await hold(tx);
      sent = send();
      sent.catch(() => undefined);
      await untilBlockedBy(h, pid, waiting);
      await meanwhile(tx, pid);
    },
    { timeout: 30_000 },
  );
  return sent;
}

/**
 * Holds the rows `sql` locks on a connection of its own (outside the harness's small pool, which the requests fill),
 * sends each request in turn once the ones before it wait behind the holder (directly or behind one another), then
 * commits: the requests meet the locks in the order sent. Answers in that order.
 */
export async function queuedBehind(h: Harness, sql: string, params: unknown[], sends: Array<() => request.Test>): Promise<request.Response[]> {
  const holder = new Client({ connectionString: h.config.databaseUrl });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query(sql, params);
    const pid = await backendPid(holder);
    const answers: Array<Promise<request.Response>> = [];
    for (const send of sends) {
      const answer = send().then((r) => r);
      answer.catch(() => undefined);
      answers.push(answer);
      await untilBlockedBy(h, pid, answers.length);
    }
    await holder.query('COMMIT');
    return await Promise.all(answers);
  } finally {
    await holder.end();
  }
}
