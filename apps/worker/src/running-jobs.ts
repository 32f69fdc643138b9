// The jobs this worker process is running, on every queue. At shutdown the worker waits for them to return (each
// within its own timeouts: an attempt's WEBHOOK_TIMEOUT_MS, a maintenance run's budget) by this count, not by BullMQ's
// close, which can wait for ever for a Redis gone away (taskforcesh/bullmq#4656).
import { DelayedError, type Job } from 'bullmq';
import { InFlight } from '@svc/domain';

export class RunningJobs extends InFlight<never> {
  /** The processor, kept under way while each of its runs lasts (`settled` waits for them). */
  counting<A extends unknown[], R>(processor: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return (...args: A) => this.start(() => processor(...args));
  }
}

/**
 * A job BullMQ handed over once the worker had begun to stop (a fetch already in flight): back to the queue for the
 * next worker, untouched, not an attempt. Throws BullMQ's DelayedError, which the processor lets through.
 */
export async function handBack(job: Job, token: string | undefined): Promise<never> {
  await job.moveToDelayed(Date.now(), token);
  throw new DelayedError();
}
