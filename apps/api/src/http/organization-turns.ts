// Per API instance: at most `limit` write requests of one organization run at once; the others wait their turn in the
// process, holding no database connection. A change is checked again inside its transaction and waits there for the
// rows it rests on, for as long as a deletion holding them runs (access/own-role.ts RECHECKED_TRANSACTION), keeping
// its connection meanwhile. Without turns, one organization's changes waiting behind its own long deletion could hold
// every connection of the pool and leave the other organizations' requests the 503 of DATABASE_CONNECT_TIMEOUT_MS.
export class OrganizationTurns {
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, Array<() => void>>();

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, not ${limit}`);
  }

  /** Runs `work` in one of the organization's turns, waiting for one first when all are taken (first come, first served). */
  async run<T>(organizationId: string, work: () => Promise<T>): Promise<T> {
    await this.take(organizationId);
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

  private take(organizationId: string): Promise<void> {
    const running = this.running.get(organizationId) ?? 0;
    if (running < this.limit) {
      this.running.set(organizationId, running + 1);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const queue = this.waiting.get(organizationId);
      if (queue) queue.push(resolve);
      else this.waiting.set(organizationId, [resolve]);
    });
  }

  private release(organizationId: string): void {
    const queue = this.waiting.get(organizationId);
    const next = queue?.shift();
    if (next) {
      // The turn passes to the next in line: the organization's running count stays as it is.
      if (queue!.length === 0) this.waiting.delete(organizationId);
      next();
      return;
    }
    const running = (this.running.get(organizationId) ?? 1) - 1;
    if (running === 0) this.running.delete(organizationId);
    else this.running.set(organizationId, running);
  }
}

/** Runs work in one of the request's organization's turns. */
export type InTurn = <T>(work: () => Promise<T>) => Promise<T>;

const laterTurns = new WeakMap<object, InTurn>();

/**
 * For a write that takes no turn for its whole run (an upload, whose body streams first; a coalesced finding record):
 * the turn its own statement that may wait for row locks takes (inTurnOf), so that it too keeps to the organization's
 * share of the pool.
 */
export function offerTurnTo(req: object, turns: OrganizationTurns, organizationId: string): void {
  laterTurns.set(req, (work) => turns.run(organizationId, work));
}

/** The request's later turn (offerTurnTo); a request offered none runs its work at once. */
export function inTurnOf(req: object): InTurn {
  return laterTurns.get(req) ?? ((work) => work());
}
