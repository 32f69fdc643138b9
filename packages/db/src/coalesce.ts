/**
 * Turns one-item requests into batches without waiting for a batch to fill: a request runs at once when fewer than
 * `maxInFlight` batches are running, and otherwise waits for one to end and goes with every request that arrived
 * meanwhile. Light traffic sees no delay; under heavy traffic one statement carries many items. (A busy delivery
 * worker spent a fifth of its CPU in the socket writes of two statements per delivery: each statement is a
 * round trip and a wake-up of a PostgreSQL backend, whatever it carries.)
 *
 * `runBatch` answers item by item, in order. When it throws, every item of the batch gets the error: the caller
 * decides whether to retry them alone.
 */
export class Coalescer<I, O> {
  private waiting: Array<{ item: I; resolve: (out: O) => void; reject: (err: unknown) => void }> = [];
  private inFlight = 0;
  private flushQueued = false;

  constructor(
    private readonly runBatch: (items: I[]) => Promise<O[]>,
    private readonly maxInFlight = 1,
    private readonly maxBatch = 64,
  ) {}

  run(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.queueFlush();
    });
  }

  /** Flushes after the current tick's synchronous work, so requests made in one tick go together. */
  private queueFlush(): void {
    if (this.flushQueued || this.inFlight >= this.maxInFlight || this.waiting.length === 0) return;
    this.flushQueued = true;
    queueMicrotask(() => {
      this.flushQueued = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      this.inFlight += 1;
      let answers: Promise<O[]>;
      try {
        answers = this.runBatch(batch.map((w) => w.item));
      } catch (err) {
        answers = Promise.reject(err);
      }
      answers
        .then(
          (outs) => batch.forEach((w, i) => w.resolve(outs[i])),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          this.inFlight -= 1;
          this.queueFlush();
        });
    }
  }
}

const sharedCoalescers = new WeakMap<object, Map<string, Coalescer<unknown, unknown>>>();

/**
 * The one Coalescer of `owner` (a pool, a Redis connection, a queue, a limiter) under `name`, made by `make` the first
 * time: every request of a process that goes to the same owner shares its batches.
 */
export function coalescerOf<I, O>(owner: object, name: string, make: () => Coalescer<I, O>): Coalescer<I, O> {
  let byName = sharedCoalescers.get(owner);
  if (!byName) sharedCoalescers.set(owner, (byName = new Map()));
  let coalescer = byName.get(name) as Coalescer<I, O> | undefined;
  if (!coalescer) byName.set(name, (coalescer = make()) as Coalescer<unknown, unknown>);
  return coalescer;
}

/**
 * A batch runner whose every item gets its own answer even when the batch's statement fails (whatever one item put
 * in it): the items are then run again one at a time, and an item's own error becomes its answer. One item runs
 * alone at once.
 */
export function answeringOneByOneOnFailure<I, O>(runBatch: (items: I[]) => Promise<O[]>): (items: I[]) => Promise<Array<O | Error>> {
  const alone = (item: I): Promise<O | Error> =>
    runBatch([item]).then(
      ([answer]) => answer,
      (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
    );
  return async (items) => {
    if (items.length === 1) return [await alone(items[0])];
    return runBatch(items).catch(() => Promise.all(items.map(alone)));
  };
}
