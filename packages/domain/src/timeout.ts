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

/**
 * Waits for `start()` at most `timeoutMs`: true when it settled in time, false (after `onTimeout`) when it did not.
 * For a shutdown step that must not keep the process alive (a close that may hang): the caller goes on either way.
 * A failure of the work itself still rejects.
 */
export async function waitAtMost(start: () => Promise<unknown>, timeoutMs: number, onTimeout: () => void): Promise<boolean> {
  try {
    await withTimeout(start, timeoutMs);
    return true;
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    onTimeout();
    return false;
  }
}
