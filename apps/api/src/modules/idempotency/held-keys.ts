// The Idempotency-Keys this API process's requests hold while they run. Their locks are renewed together, one
// statement every IDEMPOTENCY_LOCK_RENEWAL_MS, on a connection of their own: the handlers a lock protects may be the
// ones holding every connection of the main pool (each waiting for a row lock, say), and a renewal queued behind them
// would let the keys go stale and a retry run the create a second time. A key whose answer could not be stored is
// held on, its answer stored again at each renewal, so that no retry runs it again while this process lives.
import { IDEMPOTENCY_LOCK_RENEWAL_MS, type Clock } from '@svc/domain';
import type { Logger } from '@svc/config';
import type { PgPool } from '@svc/db';
import { ANSWER_NOT_STORED, renewIdempotencyLocks, type IdempotencyScope } from './idempotency.store';

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

export class HeldIdempotencyKeys {
  private readonly held = new Map<string, Entry>();
  private timer: NodeJS.Timeout | null = null;
  private renewing = false;
  private failing = false;

  constructor(
    private readonly pool: Pick<PgPool, 'query'>,
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
      const ours = await renewIdempotencyLocks(this.pool, entries, this.clock.now());
      // A key that is not ours any more (expired after 24 h and taken, or swept) is not renewed again. One whose answer
      // was still to be stored (its first attempt failed) loses it, said as when a store finds the key taken; one
      // with an attempt running says it there, if that attempt does not store it.
      for (const e of entries) {
        if (ours.has(e.lockToken)) continue;
        if (e.store && !e.storing) {
          this.logger.warn(ANSWER_NOT_STORED);
        }
        this.drop(e.lockToken);
      }
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
