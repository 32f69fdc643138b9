// The Idempotency-Keys this API process's requests hold while they run. Their locks are renewed together, one
// statement every IDEMPOTENCY_LOCK_RENEWAL_MS, on a connection of their own: the handlers a lock protects may be the
// ones holding every connection of the main pool (each waiting for a row lock, say), and a renewal queued behind them
// would let the keys go stale and a retry run the create a second time. A key whose answer could not be stored is
// held on, its answer stored again at each renewal, so that no retry runs it again while this process lives.
import type pg from 'pg';
import { IDEMPOTENCY_LOCK_RENEWAL_MS, type Clock } from '@svc/domain';
import type { Logger } from '@svc/config';
import type { IdempotencyScope } from './idempotency.store';

export interface HeldKey {
  /**
   * The request has answered: `store` stores its answer (or releases the key). Once it has, the lock is not renewed
   * any more; while it fails, the key stays locked and `store` is tried again with the next renewals. Answers the
   * first attempt's error, or null.
   */
  settle(store: () => Promise<void>): Promise<Error | null>;
}

interface Entry {
  scope: IdempotencyScope;
  lockToken: string;
  /** The answer to store, until it is stored. */
  store?: () => Promise<void>;
  /** The attempt at storing it that is running. */
  storing?: Promise<Error | null>;
  /** An attempt has failed before. */
  retried?: boolean;
}

// locked_at holds UTC wall time, as every timestamp(3) column. Each key by its own organization, credential, key and
// lock token: a renewal never touches another request's key. A row locked right now (its answer being stored, a
// retry's claim, an organization being deleted) is skipped, not waited for: one slow row must not hold up the
// renewal of every other key, and it is renewed with the next round (the lock timeout is twelve rounds away).
// `ours`: still this request's key as last committed, renewed or not this time.
const RENEW_SQL = `
  WITH v AS (
    SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS v(organization_id, credential, key, lock_token)
  ), free AS (
    SELECT k.organization_id, k.credential, k.key
      FROM idempotency_keys k JOIN v USING (organization_id, credential, key)
     WHERE k.lock_token = v.lock_token AND k.state = 'in_flight'
       FOR UPDATE OF k SKIP LOCKED
  ), renewed AS (
    UPDATE idempotency_keys k SET locked_at = ($1::timestamptz AT TIME ZONE 'UTC')
      FROM free
     WHERE k.organization_id = free.organization_id AND k.credential = free.credential AND k.key = free.key
    RETURNING k.lock_token
  )
  SELECT v.lock_token,
         v.lock_token IN (SELECT lock_token FROM renewed) OR EXISTS (
           SELECT 1 FROM idempotency_keys k
            WHERE k.organization_id = v.organization_id AND k.credential = v.credential AND k.key = v.key
              AND k.lock_token = v.lock_token AND k.state = 'in_flight') AS ours
    FROM v`;

export class HeldIdempotencyKeys {
  private readonly held = new Map<string, Entry>();
  private timer: NodeJS.Timeout | null = null;
  private renewing = false;
  private failing = false;

  constructor(
    private readonly pool: Pick<pg.Pool, 'query'>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly intervalMs = IDEMPOTENCY_LOCK_RENEWAL_MS,
  ) {}

  hold(scope: IdempotencyScope, lockToken: string): HeldKey {
    const entry: Entry = { scope, lockToken };
    this.held.set(lockToken, entry);
    this.timer ??= setInterval(() => void this.renew(), this.intervalMs).unref();
    return {
      settle: (store) => {
        entry.store = store;
        return this.storeAnswer(entry);
      },
    };
  }

  /** How many keys are held (for tests and metrics). */
  get size(): number {
    return this.held.size;
  }

  /**
   * At shutdown: tries once more to store the answers that could not be stored, and answers how many still are not
   * (their keys go stale 60 s after their last renewal, and a retry then runs their requests again).
   */
  async storePendingAnswers(): Promise<number> {
    await Promise.all([...this.held.values()].filter((e) => e.store).map((e) => this.storeAnswer(e)));
    return [...this.held.values()].filter((e) => e.store).length;
  }

  private drop(lockToken: string): void {
    this.held.delete(lockToken);
    if (this.held.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  /** One statement for every held key; a renewal still running when the next is due is not doubled. */
  async renew(): Promise<void> {
    if (this.renewing || this.held.size === 0) return;
    this.renewing = true;
    const entries = [...this.held.values()];
    try {
      const column = (of: (e: Entry) => string) => entries.map(of);
      const { rows } = await this.pool.query<{ lock_token: string; ours: boolean }>(RENEW_SQL, [
        this.clock.now().toISOString(),
        column((e) => e.scope.organizationId),
        column((e) => e.scope.credential),
        column((e) => e.scope.key),
        column((e) => e.lockToken),
      ]);
      // A key that is not ours any more (expired after 24 h and taken, or swept) is not renewed again.
      const ours = new Set(rows.filter((r) => r.ours).map((r) => r.lock_token));
      for (const e of entries) if (!ours.has(e.lockToken)) this.drop(e.lockToken);
      if (this.failing) this.logger.info('Renewing idempotency key locks again', { keys: entries.length });
      this.failing = false;
    } catch (err) {
      if (!this.failing) {
        this.logger.warn('Could not renew the locks of idempotent requests still running; retrying every few seconds', {
          keys: entries.length,
          error: err instanceof Error ? err.message : String(err),
        });
      }
      this.failing = true;
    } finally {
      this.renewing = false;
    }
    await Promise.all(entries.filter((e) => e.store && this.held.get(e.lockToken) === e).map((e) => this.storeAnswer(e)));
  }

  /** Stores an entry's answer: one attempt at a time (a caller during an attempt gets that attempt's outcome). */
  private storeAnswer(entry: Entry): Promise<Error | null> {
    entry.storing ??= entry.store!().then(
      () => {
        if (entry.retried) this.logger.info('Stored the answer of an idempotent request on a later attempt');
        entry.store = undefined;
        this.drop(entry.lockToken);
        return null;
      },
      (err: unknown) => {
        // The key stays locked (409 to a retry) and its answer is tried again with the next renewal.
        entry.retried = true;
        return err instanceof Error ? err : new Error(String(err));
      },
    ).finally(() => {
      entry.storing = undefined;
    });
    return entry.storing;
  }
}
