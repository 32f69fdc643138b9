// The jobs this worker process is running, on every queue. At shutdown the worker waits for them to return (each
// within its own timeouts: an attempt's WEBHOOK_TIMEOUT_MS, a maintenance run's budget) by this count, not by BullMQ's
// close, which can wait for ever for a Redis gone away (taskforcesh/bullmq#4656).
import { InFlight } from '@svc/domain';

export class RunningJobs extends InFlight<never> {
  /** The processor, kept under way while each of its runs lasts (`settled` waits for them). */
  counting<A extends unknown[], R>(processor: (...args: A) => Promise<R>): (...args: A) => Promise<R> {
    return (...args: A) => this.start(() => processor(...args));
  }
}
