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
  /**
   * Each organization's waiting requests, in the order they came (numbered across organizations). A freed turn walks
   * the organizations that wait, not their requests: one organization's pile of requests waiting for its own turns
   * must not make every other organization's freed turn, nor its own, cost as many steps.
   */
  private readonly waiting = new Map<string, Waiters>();
  private waitingAll = 0;
  private arrivals = 0;

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
   * every organization's together (startWaiting says who goes next).
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
    return { running: this.running.get(organizationId) ?? 0, waiting: this.waiting.get(organizationId)?.length ?? 0 };
  }

  /** Requests of all organizations running now, and waiting for a turn. */
  loadAll(): { running: number; waiting: number } {
    return { running: this.runningAll, waiting: this.waitingAll };
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
      const waiter: Waiter = {
        arrival: this.arrivals++,
        state: 'waiting',
        start: () => {
          stopWatching();
          resolve();
        },
      };
      const leaveTheLine = (answer: Error) => {
        if (waiter.state !== 'waiting') return;
        this.leave(organizationId, waiter);
        stopWatching();
        reject(answer);
      };
      const onAbandoned = () => leaveTheLine(abandonedBeforeItsTurn());
      const timer = this.waitLimitMs === Number.POSITIVE_INFINITY ? undefined : setTimeout(() => leaveTheLine(noTurnInTime()), this.waitLimitMs);
      abandoned?.addEventListener('abort', onAbandoned, { once: true });
      let queue = this.waiting.get(organizationId);
      if (!queue) this.waiting.set(organizationId, (queue = new Waiters()));
      queue.push(waiter);
      this.waitingAll += 1;
    });
  }

  private release(organizationId: string): void {
    const running = (this.running.get(organizationId) ?? 1) - 1;
    if (running === 0) this.running.delete(organizationId);
    else this.running.set(organizationId, running);
    this.runningAll -= 1;
    this.startWaiting();
  }

  /**
   * Starts the waiting requests that may start now: first those of the organization running fewest, then the
   * longest-waiting. So an organization that piles up requests behind its own deletion gets no more of the turns of
   * all than one that sends a single write: each freed turn goes to whoever holds fewest.
   */
  private startWaiting(): void {
    while (this.runningAll < this.limitAll) {
      let first: { organizationId: string; queue: Waiters; running: number } | undefined;
      for (const [organizationId, queue] of this.waiting) {
        const running = this.running.get(organizationId) ?? 0;
        if (running >= this.limit) continue;
        if (!first || running < first.running || (running === first.running && queue.first().arrival < first.queue.first().arrival)) {
          first = { organizationId, queue, running };
        }
      }
      if (!first) return;
      const next = first.queue.shift();
      if (first.queue.length === 0) this.waiting.delete(first.organizationId);
      this.waitingAll -= 1;
      this.start(first.organizationId);
      next.start();
    }
  }

  /** A waiting request leaves the line without running (its wait ran out, or its client went away). */
  private leave(organizationId: string, waiter: Waiter): void {
    const queue = this.waiting.get(organizationId)!;
    queue.remove(waiter);
    if (queue.length === 0) this.waiting.delete(organizationId);
    this.waitingAll -= 1;
  }

  private mayStart(organizationId: string): boolean {
    return this.runningAll < this.limitAll && (this.running.get(organizationId) ?? 0) < this.limit;
  }

  private start(organizationId: string): void {
    this.running.set(organizationId, (this.running.get(organizationId) ?? 0) + 1);
    this.runningAll += 1;
  }
}

export interface Waiter {
  /** When it came, across organizations. */
  arrival: number;
  /** 'left': it left the line without running, and stays in its queue's array until the queue's head passes it. */
  state: 'waiting' | 'started' | 'left';
  start: () => void;
}

/**
 * One organization's waiting requests, first in first out; taking the first is O(1) however many wait, and so is a
 * request leaving from the middle (marked, and passed over when it comes to the front). Those that left are dropped
 * in bulk once they outnumber the waiting ones (amortised O(1) too): the front may stand still for as long as the
 * organization runs all its turns, and requests arriving and leaving meanwhile must not pile up behind it.
 */
export class Waiters {
  private items: Array<Waiter | undefined> = [];
  private head = 0;
  private count = 0;
  /** Of the entries from `head` on, those that left. */
  private left = 0;

  get length(): number {
    return this.count;
  }

  /** Entries its array keeps: the waiting ones, and those that left and are not dropped yet (for tests). */
  get slots(): number {
    return this.items.length - this.head;
  }

  push(waiter: Waiter): void {
    this.items.push(waiter);
    this.count += 1;
  }

  first(): Waiter {
    this.passOverLeft();
    return this.items[this.head]!;
  }

  shift(): Waiter {
    this.passOverLeft();
    const waiter = this.items[this.head]!;
    this.items[this.head] = undefined;
    this.head += 1;
    this.count -= 1;
    waiter.state = 'started';
    this.compact();
    return waiter;
  }

  remove(waiter: Waiter): void {
    waiter.state = 'left';
    this.count -= 1;
    this.left += 1;
    if (this.left >= 1024 && this.left > this.count) this.dropLeft();
  }

  private passOverLeft(): void {
    while (this.head < this.items.length && this.items[this.head]!.state === 'left') {
      this.items[this.head] = undefined;
      this.head += 1;
      this.left -= 1;
    }
    this.compact();
  }

  private dropLeft(): void {
    this.items = this.items.slice(this.head).filter((waiter) => waiter!.state !== 'left');
    this.head = 0;
    this.left = 0;
  }

  // Array.prototype.shift moves every element of a large array: the taken ones are dropped in bulk instead.
  private compact(): void {
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
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
