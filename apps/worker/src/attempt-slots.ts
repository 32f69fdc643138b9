// The worker's attempts in flight at once (WORKER_CONCURRENCY). BullMQ takes more jobs than that, so that the next
// deliveries are fetched and loaded while these attempts run; each then waits here, first come first served, for a
// slot before it is admitted by the isolation and sent. Without the look-ahead a slot sat idle through every job's
// fetch and load (about a quarter of a job's time at c=16, docs/performance.md).

/** Jobs BullMQ may hold beyond the attempt slots: fetched and loaded, waiting for a slot. */
export function lookAheadJobs(slots: number): number {
  return slots;
}

/** The worker is closing: a job still waiting for a slot goes back to the queue instead of being attempted. */
export class SlotsClosedError extends Error {
  constructor() {
    super('the worker is closing: no attempt slot');
    this.name = 'SlotsClosedError';
  }
}

interface Waiter {
  start: () => void;
  refuse: (err: SlotsClosedError) => void;
}

export class AttemptSlots {
  private free: number;
  private readonly waiting: Waiter[] = [];
  private closed = false;

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`attempt slots must be a positive integer, not ${size}`);
    this.free = size;
  }

  /** Runs `task` once a slot is free, holding the slot until it settles; SlotsClosedError once closed. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.closed) throw new SlotsClosedError();
    if (this.free > 0) this.free -= 1;
    else await new Promise<void>((start, refuse) => this.waiting.push({ start, refuse }));
    try {
      return await task();
    } finally {
      this.handOn();
    }
  }

  /**
   * Refuses the jobs waiting for a slot and any that come later (SlotsClosedError); the attempts running keep their
   * slots and finish. A shutdown then waits for the attempts in flight only, not for the jobs taken ahead.
   */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter.refuse(new SlotsClosedError());
  }

  /** Attempts running now. */
  get inUse(): number {
    return this.size - this.free;
  }

  /** Jobs waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  // A freed slot goes straight to the longest waiter (it never becomes free in between, so a newcomer cannot jump the queue).
  private handOn(): void {
    const next = this.waiting.shift();
    if (next) next.start();
    else this.free += 1;
  }
}
