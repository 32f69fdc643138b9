// Per API instance: at most `limit` write requests of one organization run at once, and at most `limitAll` of all
// organizations together; the others wait their turn in the process, holding no database connection. A change is
// checked again inside its transaction and waits there for the rows it rests on, for as long as a deletion holding
// them runs (access/own-role.ts RECHECKED_TRANSACTION), keeping its connection meanwhile. Without turns, one
// organization's changes waiting behind its own long deletion could hold every connection of the pool and leave the
// other organizations' requests the 503 of DATABASE_CONNECT_TIMEOUT_MS; without the cap on their sum, two
// organizations (anyone can sign up for another) could. Reads take no turn: they keep what `limitAll` leaves of the pool.
// A request that waits longer than `waitLimitMs` for a turn answers 503 having changed nothing (noTurnInTime), rather
// than an answer the client may no longer wait for, leaving it unsure whether the change was made.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '@svc/config';
import { abandonedBeforeItsTurn, noTurnInTime } from './errors';

export class OrganizationTurns {
  private readonly running = new Map<string, number>();
  private runningAll = 0;
  /**
   * Each organization's waiting requests, in the order they came (numbered across organizations). A freed turn takes
   * the first of the organizations in `ready`, not walking their requests nor the organizations: one organization's
   * pile of requests waiting for its own turns, or one request of each of many organizations (signing up makes one),
   * must not make every freed turn cost as many steps.
   */
  private readonly waiting = new Map<string, Line>();
  /** The organizations that wait with a turn of their own free, in the order startWaiting takes them. */
  private readonly ready = new Ready();
  private waitingAll = 0;
  private arrivals = 0;

  constructor(
    private readonly limit: number,
    private readonly limitAll: number = Number.POSITIVE_INFINITY,
    private readonly waitLimitMs: number = Number.POSITIVE_INFINITY,
    /** Told of each request that left the line without running (metrics). */
    private readonly onLeft: (reason: LeftTheLine) => void = () => undefined,
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
    return { running: this.running.get(organizationId) ?? 0, waiting: this.waiting.get(organizationId)?.queue.length ?? 0 };
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
      const leaveTheLine = (reason: LeftTheLine) => {
        if (waiter.state !== 'waiting') return;
        this.leave(organizationId, waiter);
        stopWatching();
        this.onLeft(reason);
        reject(reason === 'timeout' ? noTurnInTime() : abandonedBeforeItsTurn());
      };
      const onAbandoned = () => leaveTheLine('client_gone');
      const timer = this.waitLimitMs === Number.POSITIVE_INFINITY ? undefined : setTimeout(() => leaveTheLine('timeout'), this.waitLimitMs);
      abandoned?.addEventListener('abort', onAbandoned, { once: true });
      let line = this.waiting.get(organizationId);
      const first = !line;
      if (!line) this.waiting.set(organizationId, (line = { organizationId, queue: new Waiters(), index: -1, running: 0, arrival: 0 }));
      line.queue.push(waiter);
      this.waitingAll += 1;
      if (first) this.reposition(line);
    });
  }

  private release(organizationId: string): void {
    const running = (this.running.get(organizationId) ?? 1) - 1;
    if (running === 0) this.running.delete(organizationId);
    else this.running.set(organizationId, running);
    this.runningAll -= 1;
    this.repositionOf(organizationId);
    this.startWaiting();
  }

  /**
   * Starts the waiting requests that may start now: first those of the organization running fewest, then the
   * longest-waiting. So an organization that piles up requests behind its own deletion gets no more of the turns of
   * all than one that sends a single write: each freed turn goes to whoever holds fewest.
   */
  private startWaiting(): void {
    while (this.runningAll < this.limitAll) {
      const line = this.ready.first();
      if (!line) return;
      const next = line.queue.shift();
      this.waitingAll -= 1;
      if (line.queue.length === 0) this.forget(line);
      this.start(line.organizationId);
      next.start();
    }
  }

  /** A waiting request leaves the line without running (its wait ran out, or its client went away). */
  private leave(organizationId: string, waiter: Waiter): void {
    const line = this.waiting.get(organizationId)!;
    line.queue.remove(waiter);
    this.waitingAll -= 1;
    if (line.queue.length === 0) this.forget(line);
    else this.reposition(line);
  }

  /** Its place in `ready` for its organization's running requests and its first waiting one, or none at its limit. */
  private reposition(line: Line): void {
    const running = this.running.get(line.organizationId) ?? 0;
    if (running >= this.limit) this.ready.remove(line);
    else this.ready.place(line, running, line.queue.first().arrival);
  }

  private repositionOf(organizationId: string): void {
    const line = this.waiting.get(organizationId);
    if (line) this.reposition(line);
  }

  /** Its last waiting request started or left. */
  private forget(line: Line): void {
    this.ready.remove(line);
    this.waiting.delete(line.organizationId);
  }

  private mayStart(organizationId: string): boolean {
    return this.runningAll < this.limitAll && (this.running.get(organizationId) ?? 0) < this.limit;
  }

  private start(organizationId: string): void {
    this.running.set(organizationId, (this.running.get(organizationId) ?? 0) + 1);
    this.runningAll += 1;
    this.repositionOf(organizationId);
  }
}

/** An organization's waiting requests, and its place in `ready`. */
interface Line {
  organizationId: string;
  queue: Waiters;
  /** Its index in Ready's heap; -1 while out of it (its organization runs all its turns). */
  index: number;
  /** Its order there: its organization's running requests, then its first waiting request's arrival. */
  running: number;
  arrival: number;
}

/**
 * The organizations that wait with a turn of their own free, as a binary heap whose first is the one running fewest,
 * then the one whose first waiting request came first (arrivals are numbered across organizations: no two are
 * equal). Placing, moving and removing an organization are O(log n) in the organizations that wait.
 */
class Ready {
  private readonly heap: Line[] = [];

  first(): Line | undefined {
    return this.heap[0];
  }

  /** Puts the line in its place for `running` and `arrival`, moving it if it was in already. */
  place(line: Line, running: number, arrival: number): void {
    line.running = running;
    line.arrival = arrival;
    if (line.index < 0) {
      line.index = this.heap.length;
      this.heap.push(line);
    }
    this.down(this.up(line.index));
  }

  remove(line: Line): void {
    const at = line.index;
    if (at < 0) return;
    line.index = -1;
    const last = this.heap.pop()!;
    if (last === line) return;
    this.heap[at] = last;
    last.index = at;
    this.down(this.up(at));
  }

  private up(at: number): number {
    const line = this.heap[at]!;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (!goesBefore(line, this.heap[parent]!)) break;
      this.put(this.heap[parent]!, at);
      at = parent;
    }
    this.put(line, at);
    return at;
  }

  private down(at: number): void {
    const line = this.heap[at]!;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= this.heap.length) break;
      const right = left + 1;
      const child = right < this.heap.length && goesBefore(this.heap[right]!, this.heap[left]!) ? right : left;
      if (!goesBefore(this.heap[child]!, line)) break;
      this.put(this.heap[child]!, at);
      at = child;
    }
    this.put(line, at);
  }

  private put(line: Line, at: number): void {
    this.heap[at] = line;
    line.index = at;
  }
}

const goesBefore = (a: Line, b: Line): boolean => a.running < b.running || (a.running === b.running && a.arrival < b.arrival);

export interface Waiter {
  /** When it came, across organizations. */
  arrival: number;
  /** 'left': it left the line without running; its queue's array keeps it until its head passes it or dropLeft. */
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

/** Why a waiting request left the line without running: its wait ran out, or its client went away. */
export type LeftTheLine = 'timeout' | 'client_gone';

/** An API instance's turns, as configured (ORGANIZATION_WRITES_IN_FLIGHT, WRITES_IN_FLIGHT, WRITE_TURN_TIMEOUT_MS). */
export function turnsFor(
  config: Pick<Config, 'organizationWritesInFlight' | 'writesInFlight' | 'writeTurnTimeoutMs'>,
  onLeft?: (reason: LeftTheLine) => void,
): OrganizationTurns {
  return new OrganizationTurns(config.organizationWritesInFlight, config.writesInFlight, config.writeTurnTimeoutMs, onLeft);
}

function requirePositiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, not ${value}`);
}

/** Runs work in one of the request's organization's turns. */
export type InTurn = <T>(work: () => Promise<T>) => Promise<T>;

const laterTurns = new WeakMap<object, { turns: OrganizationTurns; organizationId?: string; abandoned?: () => AbortSignal }>();

/**
 * For a request that takes no turn for its whole run: an authenticated write whose body streams first (an upload) or
 * whose statements are shared (a coalesced finding record), in its principal's organization; a public request (a
 * shared report's view, an invitation's acceptance) in the organization its token names, given to inTurnOf. The turn
 * its own statement that may wait for row locks takes, so that it too keeps to the organization's share of the pool.
 */
export function offerTurnTo(req: object, turns: OrganizationTurns, organizationId: string | undefined, abandoned?: () => AbortSignal): void {
  laterTurns.set(req, { turns, organizationId, abandoned });
}

/**
 * The request's later turn (offerTurnTo), in its principal's organization or else in `organizationId`; a request
 * offered none, or with no organization, runs its work at once.
 */
export function inTurnOf(req: object, organizationId?: string): InTurn {
  const offered = laterTurns.get(req);
  const of = offered?.organizationId ?? organizationId;
  if (!offered || of === undefined) return (work) => work();
  return (work) => offered.turns.run(of, work, offered.abandoned?.());
}

/**
 * Aborted when the client goes away before its answer is sent: a request still waiting for its turn then never runs.
 * The connection tells, not the response: a request sent behind another still being answered on its connection (HTTP/1.1
 * pipelining) has a response without a socket until the answers before it are sent, and that response gets no 'close'
 * when the client goes away meanwhile.
 */
export function abandonedSignal(req: IncomingMessage, res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  if (res.writableFinished) return controller.signal;
  const connection = req.socket;
  const gone = () => {
    if (!res.writableFinished) controller.abort();
  };
  if (connection.destroyed) {
    gone();
    return controller.signal;
  }
  // Until the response closes (sent, or its connection gone): a kept-alive connection's later requests add their own.
  connection.once('close', gone);
  res.once('close', () => {
    connection.removeListener('close', gone);
    gone();
  });
  return controller.signal;
}
