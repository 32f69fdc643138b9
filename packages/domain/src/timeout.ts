/** Thrown by withTimeout when the work did not settle in time. */
export class TimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`Timed out after ${timeoutMs} ms`);
    this.name = 'TimeoutError';
  }
}

/**
 * The outcome of `start()` if it settles within `timeoutMs`, else a TimeoutError. The work itself goes on (a late
 * rejection is swallowed): callers bound how long they wait, not what runs. The clock starts before the work, so a
 * timer the work sets for the same bound (a client's own command timeout) fires after this one.
 */
export function withTimeout<T>(start: () => Promise<T>, timeoutMs: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(timeoutMs)), timeoutMs);
  });
  const work = start();
  work.catch(() => undefined);
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}
