// What an attempt adds to the metrics: outcome and status class, duration, and for a first attempt the latency
// since the delivery was created.
import type { AttemptRecord } from './record';
import { attemptDuration, attemptsTotal, firstAttemptLatency, statusClass } from './metrics';

export function observeAttempt(deliveryCreatedAt: Date, record: AttemptRecord): void {
  attemptsTotal.inc({ outcome: record.outcome, status_class: statusClass(record.responseStatus) });
  attemptDuration.observe(record.durationMs / 1000);
  if (record.number === 1) firstAttemptLatency.observe(Math.max(0, record.startedAt.getTime() - deliveryCreatedAt.getTime()) / 1000);
}
