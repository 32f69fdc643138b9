// How a failed attempt asks BullMQ for the next one. The processor has already written nextAttemptAt to the
// database; it throws a RetryableDeliveryError carrying the same delay, and the Worker's custom backoff
// strategy hands that delay to BullMQ, so the queue and the database agree on when the next attempt runs.
import { retryDelayMs, type RetryPolicy } from '@svc/domain';
import type { Config } from '@svc/config';

export class RetryableDeliveryError extends Error {
  override readonly name = 'RetryableDeliveryError';

  constructor(
    message: string,
    readonly delayMs: number,
    /** The attempt's outcome, when one was made (frees its isolation slot with it). */
    readonly outcome?: string,
  ) {
    super(message);
  }
}

function isRetryableDeliveryError(err: unknown): err is RetryableDeliveryError {
  return (
    err instanceof RetryableDeliveryError ||
    (err instanceof Error && err.name === 'RetryableDeliveryError' && typeof (err as { delayMs?: unknown }).delayMs === 'number')
  );
}

/** @svc/domain's retry policy with the configured attempt limit, base and cap. */
export function webhookRetryPolicy(config: Config): RetryPolicy {
  const { maxAttempts, backoffBaseMs, backoffMaxMs } = config.webhooks;
  return { maxAttempts, baseMs: backoffBaseMs, maxMs: backoffMaxMs };
}

/** The wait after attempt n (1-based) per DESIGN.md's bounded exponential backoff, with the configured base and cap. */
export function webhookRetryDelayMs(config: Config, attemptNumber: number): number {
  return retryDelayMs(attemptNumber, webhookRetryPolicy(config));
}

/**
 * `settings.backoffStrategy` of the delivery Worker. A RetryableDeliveryError carries its delay. Anything else
 * (the database unreachable, a bug) recorded no attempt: it is retried on the same schedule, and should BullMQ
 * run out of attempts the delivery is still pending in the database, where the outbox relay finds it.
 */
export function deliveryBackoffStrategy(config: Config) {
  return (attemptsMade: number, _type?: string, err?: Error): number =>
    isRetryableDeliveryError(err) ? err.delayMs : webhookRetryDelayMs(config, Math.max(1, attemptsMade));
}
