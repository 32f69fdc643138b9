// The jobs this worker process is running, on every queue. At shutdown the worker waits for them to return (each
// within its own timeouts: an attempt's WEBHOOK_TIMEOUT_MS, a maintenance run's budget) by this count, not by BullMQ's
// close, which can wait for ever for a Redis gone away (taskforcesh/bullmq#4656).
export class RunningJobs {
  private readonly running = new Set<Promise<unknown>>();

  /** The processor, counted while each of its runs lasts. */
  counting<A extends unknown[], R>(processor: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return (...args: A) => {
      // Through a promise: a processor that throws at once or returns no promise is counted, and ends, all the same.
      const run = Promise.resolve().then(() => processor(...args));
      this.running.add(run);
      run.then(
        () => this.running.delete(run),
        () => this.running.delete(run),
      );
      return run;
    };
  }

  /** Resolves once no job is running (jobs started meanwhile included). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  get size(): number {
    return this.running.size;
  }
}
