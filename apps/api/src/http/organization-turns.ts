// Per API instance: at most `limit` write requests of one organization run at once, and at most `limitAll` of all
// organizations together; the others wait their turn in the process, holding no database connection. A change is
// checked again inside its transaction and waits there for the rows it rests on, for as long as a deletion holding
// them runs (access/own-role.ts RECHECKED_TRANSACTION), keeping its connection meanwhile. Without turns, one
// organization's changes waiting behind its own long deletion could hold every connection of the pool and leave the
// other organizations' requests the 503 of DATABASE_CONNECT_TIMEOUT_MS; without the cap on their sum, two
// organizations (anyone can sign up for another) could. Reads take no turn: they keep what `limitAll` leaves of the pool.
// A request that waits longer than `waitLimitMs` for a turn answers 503 having changed nothing (noTurnInTime), rather
// than an answer the client may no longer wait for, leaving it unsure whether the change was made.
import type { Config } from '@svc/config';
import { abandonedBeforeItsTurn, noTurnInTime } from './errors';

export class OrganizationTurns {
  private readonly running = new Map<string, number>();
  private runningAll = 0;
  /** Every organization's waiting requests, in the order they came. */
  private readonly waiting: Array<{ organizationId: string; start: () => void }> = [];

  constructor(
    private readonly limit: number,
    private readonly limitAll: number = Number.POSITIVE_INFINITY,
    private readonly waitLimitMs: number = Number.POSITIVE_INFINITY,
  ) {
    requirePositiveInteger('limit', limit);
    if (limitAll !== Number.POSITIVE_INFINITY) requirePositiveInteger('limitAll', limitAll);
    if (waitLimitMs !== Number.POSITIVE_INFINITY) requirePositiveInteger('waitLimitMs', waitLimitMs);
  }

  /**
   * Runs `work` in one of the organization's turns, waiting for one first when the organization's are all taken, or
   * every organization's together (first come, first served among those whose organization has a turn free).
   * `abandoned`: aborted when the client goes away; a request still waiting then leaves the line and never runs.
   */
  async run<T>(organizationId: string, work: () => Promise<T>, abandoned?: AbortSignal): Promise<T> {
    await this.take(organizationId, abandoned);
    try {
      return await work();
    } finally {
      this.release(organizationId);
    }
  }

  /** Requests of the organization running now, and waiting for a turn (for tests and metrics). */
  load(organizationId: string): { running: number; waiting: number } {
    return {
      running: this.running.get(organizationId) ?? 0,
      waiting: this.waiting.filter((w) => w.organizationId === organizationId).length,
    };
  }

  /** Requests of all organizations running now, and waiting for a turn. */
  loadAll(): { running: number; waiting: number } {
    return { running: this.runningAll, waiting: this.waiting.length };
  }

  private take(organizationId: string, abandoned?: AbortSignal): Promise<void> {
    if (abandoned?.aborted) return Promise.reject(abandonedBeforeItsTurn());
    // Whoever waits could not start when the last turn was freed (startWaiting): a request that can start now takes
    // no turn from them, and one of an organization with requests waiting cannot start.
    if (this.mayStart(organizationId)) {
      this.start(organizationId);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const stopWatching = () => {
        clearTimeout(timer);
        abandoned?.removeEventListener('abort', onAbandoned);
      };
      const waiter = {
        organizationId,
        start: () => {
          stopWatching();
          resolve();
        },
      };
      const leaveTheLine = (answer: Error) => {
        const at = this.waiting.indexOf(waiter);
        if (at === -1) return;
        this.waiting.splice(at, 1);
        stopWatching();
        reject(answer);
      };
      const onAbandoned = () => leaveTheLine(abandonedBeforeItsTurn());
      const timer = this.waitLimitMs === Number.POSITIVE_INFINITY ? undefined : setTimeout(() => leaveTheLine(noTurnInTime()), this.waitLimitMs);
      abandoned?.addEventListener('abort', onAbandoned, { once: true });
      this.waiting.push(waiter);
    });
  }

  private release(organizationId: string): void {
    const running = (this.running.get(organizationId) ?? 1) - 1;
    if (running === 0) this.running.delete(organizationId);
    else this.running.set(organizationId, running);
    this.runningAll -= 1;
    this.startWaiting();
  }

  /** Starts the waiting requests that may start now, in the order they came. */
  private startWaiting(): void {
    for (let i = 0; i < this.waiting.length && this.runningAll < this.limitAll; ) {
      const next = this.waiting[i]!;
      if (!this.mayStart(next.organizationId)) {
        i += 1;
        continue;
      }
      this.waiting.splice(i, 1);
      this.start(next.organizationId);
      next.start();
    }
  }

  private mayStart(organizationId: string): boolean {
    return this.runningAll < this.limitAll && (this.running.get(organizationId) ?? 0) < this.limit;
  }

  private start(organizationId: string): void {
    this.running.set(organizationId, (this.running.get(organizationId) ?? 0) + 1);
    this.runningAll += 1;
  }
}

/** An API instance's turns, as configured (ORGANIZATION_WRITES_IN_FLIGHT, WRITES_IN_FLIGHT, WRITE_TURN_TIMEOUT_MS). */
export function turnsFor(config: Pick<Config, 'organizationWritesInFlight' | 'writesInFlight' | 'writeTurnTimeoutMs'>): OrganizationTurns {
  return new OrganizationTurns(config.organizationWritesInFlight, config.writesInFlight, config.writeTurnTimeoutMs);
}

function requirePositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, not ${value}`);
}

/** Runs work in one of the request's organization's turns. */
export type InTurn = <T>(work: () => Promise<T>) => Promise<T>;

const laterTurns = new WeakMap<object, InTurn>();

/**
 * For a write that takes no turn for its whole run (an upload, whose body streams first; a coalesced finding record):
 * the turn its own statement that may wait for row locks takes (inTurnOf), so that it too keeps to the organization's
 * share of the pool.
 */
export function offerTurnTo(req: object, turns: OrganizationTurns, organizationId: string, abandoned?: () => AbortSignal): void {
  laterTurns.set(req, (work) => turns.run(organizationId, work, abandoned?.()));
}

/** The request's later turn (offerTurnTo); a request offered none runs its work at once. */
export function inTurnOf(req: object): InTurn {
  return laterTurns.get(req) ?? ((work) => work());
}
