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
