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
  /** The request has answered and its answer is stored (or the key released): the lock is not renewed any more. */
  done(): void;
  /** Storing the answer failed: keep the key locked and try `store` again with the next renewals until it succeeds. */
  storeLater(store: () => Promise<void>): void;
}

interface Entry {
  scope: IdempotencyScope;
  lockToken: string;
  store?: () => Promise<void>;
}

// locked_at holds UTC wall time, as every timestamp(3) column. Each key by its own organization, credential, key and lock token: a renewal never touches another request's key.
const RENEW_SQL = `
  UPDATE idempotency_keys k SET locked_at = ($1::timestamptz AT TIME ZONE 'UTC')
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS v(organization_id, credential, key, lock_token)
   WHERE k.organization_id = v.organization_id AND k.credential = v.credential AND k.key = v.key
     AND k.lock_token = v.lock_token AND k.state = 'in_flight'
  RETURNING k.lock_token`;

export class HeldIdempotencyKeys {
  private readonly held = new Map<string, Entry>();
  private timer: NodeJS.Timeout | null = null;
  private renewing = false;
  private failing = false;

  constructor(
    private readonly pool: Pick<pg.Pool, 'query' | 'end'>,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly intervalMs = IDEMPOTENCY_LOCK_RENEWAL_MS,
  ) {}

  hold(scope: IdempotencyScope, lockToken: string): HeldKey {
    const entry: Entry = { scope, lockToken };
    this.held.set(lockToken, entry);
    this.timer ??= setInterval(() => void this.renew(), this.intervalMs).unref();
    return {
      done: () => this.drop(lockToken),
      storeLater: (store) => {
        if (this.held.get(lockToken) === entry) entry.store = store;
      },
    };
  }

  /** How many keys are held (for tests and metrics). */
  get size(): number {
    return this.held.size;
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.held.clear();
    await this.pool.end().catch(() => undefined);
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
      const { rows } = await this.pool.query<{ lock_token: string }>(RENEW_SQL, [
        this.clock.now().toISOString(),
        column((e) => e.scope.organizationId),
        column((e) => e.scope.credential),
        column((e) => e.scope.key),
        column((e) => e.lockToken),
      ]);
      const stillHeld = new Set(rows.map((r) => r.lock_token));
      // A key that is not ours any more (expired after 24 h and taken, or swept) is not renewed again.
      for (const e of entries) if (!stillHeld.has(e.lockToken)) this.drop(e.lockToken);
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
    await Promise.all(entries.filter((e) => e.store && this.held.get(e.lockToken) === e).map((e) => this.storeAgain(e)));
  }

  private async storeAgain(entry: Entry): Promise<void> {
    try {
      await entry.store!();
      this.drop(entry.lockToken);
    } catch {
      // Still failing: the key stays locked (409 to a retry) and its answer is tried again with the next renewal.
    }
  }
}
