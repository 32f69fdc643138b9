/**
 * Work under way, kept until it settles, so that a process that stops can wait for it: the worker's running jobs
 * and its Splunk ack requests, the API's work left running after an answer. Pure bookkeeping (no timers, no I/O):
 * how long to wait is the caller's bound (`waitAtMost`).
 */
export class InFlight<Label = string> {
  /** One entry per piece of work, so that a promise kept twice (shared by two callers) counts twice. */
  private readonly running = new Set<{ work: Promise<unknown>; label: Label | undefined }>();

  /**
   * Starts `work` now and keeps it until it settles. Its promise is returned with its value or error; a function
   * that throws before returning a promise, or returns none, is kept and settles all the same.
   */
  start<R>(work: () => R | PromiseLike<R>, label?: Label): Promise<R> {
    return this.keep(begin(work), label);
  }

  /** Keeps work already started until it settles; returns it. */
  keep<P extends Promise<unknown>>(work: P, label?: Label): P {
    const entry = { work, label };
    this.running.add(entry);
    const forget = () => this.running.delete(entry);
    work.then(forget, forget);
    return work;
  }

  /** Resolves once nothing is under way: work started meanwhile included, failures counted as settled. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running].map((entry) => entry.work));
  }

  /** How many pieces of work are under way, by label (unlabelled work counts as ''). */
  countByLabel(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const { label } of this.running) {
      const key = label === undefined ? '' : String(label);
      counts[key] = (counts[key] ?? 0) + 1;
    }
    return counts;
  }

  get size(): number {
    return this.running.size;
  }
}

function begin<R>(work: () => R | PromiseLike<R>): Promise<R> {
  try {
    return Promise.resolve(work());
  } catch (err) {
    return Promise.reject(err);
  }
}
