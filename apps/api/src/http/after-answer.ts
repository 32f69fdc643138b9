// Work a request leaves running after its answer: not awaited on the request's path, so that the answer is as fast
// for a known e-mail as for an unknown one (the audit entry of a failed sign-in, a password-reset request's mail and
// entry), or does not fail because of a side concern (a security notice's mail, an API key's last use). Every such
// piece of work starts here: a failure is logged, and at shutdown main.ts waits for what is still running (drain)
// before it closes the connections that work needs, so that a deploy does not leave holes in the audit log.
import type { Logger } from '@svc/config';
import { InFlight, waitAtMost } from '@svc/domain';

export interface AfterAnswerOptions {
  /** Log fields naming what the work was about (ids): never an address, a token or a secret. */
  fields?: Record<string, unknown>;
  /** The level of the failure's log line; `error` unless the work is minor. */
  level?: 'warn' | 'error';
}

export class WorkAfterAnswer {
  /** The work still running, by label. */
  private readonly running = new InFlight<string>();

  constructor(private readonly logger: Logger) {}

  /**
   * Starts `work` now, without waiting for it. `label` says what it does, as in "Could not <label>" (logged with the
   * error's message when it fails; the work itself must keep addresses a mail server quotes out of its errors) and
   * in the shutdown's list of work cut off: e.g. 'record a failed login'.
   */
  run(label: string, work: () => Promise<unknown>, options: AfterAnswerOptions = {}): void {
    this.running.start(work, label).catch((err: unknown) => {
      this.logger[options.level ?? 'error'](`Could not ${label}`, { ...options.fields, error: String(err) });
    });
  }

  /** The work still running: how many pieces of each label (a flood's thousands make one entry, not a list). */
  stillRunning(): Record<string, number> {
    return this.running.countByLabel();
  }

  /**
   * Resolves once all work has ended (work started meanwhile included), or `timeoutMs` has passed: the number of
   * pieces of work still running then (0 when everything ended). The deadline's timer is not unref'd: at shutdown,
   * work that waits on nothing the event loop knows must not let the process end early.
   */
  async drain(timeoutMs: number): Promise<number> {
    await waitAtMost(() => this.running.settled(), timeoutMs, () => undefined);
    return this.running.size;
  }
}
