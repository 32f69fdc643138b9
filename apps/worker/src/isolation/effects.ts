// What the isolation's decisions change outside Redis: the delivery's next_attempt_at and wait reason (a postponement
// is not an attempt), the subscription's breaker mirrored for GET and the dashboard, the audit entry and log line of
// a breaker that opens, and bringing a breaker's prober forward to the probe time.
import type { Queue } from 'bullmq';
import { SYSTEM_ACTOR, recordAudit } from '@svc/audit';
import { Prisma, queryRows, utcTimestamp } from '@svc/db';
import type { BreakerState, WaitReason } from '@svc/domain';
import { redelayDeliveryJob, type DeliveryJobData } from '@svc/queue';
import type { WorkerDeps } from '../deps';
import { breakerTransitions } from '../metrics';

/**
 * Shows why and until when a pending delivery waits. Written when the reason changes or the time shown has passed, so
 * a delivery that waits again and again for a slot costs no write each time.
 */
export async function recordPostponement(
  deps: WorkerDeps,
  delivery: { id: string; attemptCount: number; waitReason: string | null; nextAttemptAt: Date | null },
  reason: WaitReason,
  until: Date,
  now: Date,
): Promise<void> {
  if (delivery.waitReason === reason && delivery.nextAttemptAt && delivery.nextAttemptAt.getTime() > now.getTime()) return;
  // On the hot path of a held-back subscription: a prepared statement on the pg pool, like the attempt's record.
  await queryRows(
    deps.prisma,
    Prisma.sql`
      UPDATE webhook_deliveries
         SET next_attempt_at = ${utcTimestamp(until)}, wait_reason = ${reason}, updated_at = ${utcTimestamp(now)}
       WHERE id = ${delivery.id} AND status = 'pending' AND attempt_count = ${delivery.attemptCount}
      RETURNING id`,
    'worker_record_postponement',
  );
}

/** Mirrors a breaker transition on the subscription row; an opening is logged and audited by `system`. */
export async function recordBreakerTransition(
  deps: WorkerDeps,
  subscription: { id: string; organizationId: string },
  to: BreakerState,
  until: Date | null,
  now: Date,
): Promise<void> {
  breakerTransitions.inc({ to });
  const breakerUntil = to === 'open' ? until : null;
  if (to !== 'open') {
    await deps.prisma.webhookSubscription.updateMany({ where: { id: subscription.id }, data: { breakerState: to, breakerUntil } });
    return;
  }
  deps.logger.warn('Circuit breaker opened: deliveries to this subscription are postponed until the probe', {
    subscription_id: subscription.id,
    probe_at: until?.toISOString(),
  });
  await deps.prisma.$transaction(async (tx) => {
    await tx.webhookSubscription.updateMany({ where: { id: subscription.id }, data: { breakerState: 'open', breakerUntil } });
    await recordAudit(tx, {
      organizationId: subscription.organizationId,
      actor: SYSTEM_ACTOR,
      action: 'webhook.breaker_opened',
      target: { type: 'webhook_subscription', id: subscription.id },
      metadata: { probe_at: until?.toISOString() ?? null },
      at: now,
    });
  });
}

/** The waiting delivery chosen to probe a breaker that just opened comes back at the probe time. */
export function scheduleProbe(queue: Queue<DeliveryJobData>, id: string, at: Date, now: Date): Promise<void> {
  return redelayDeliveryJob(queue, id, at.getTime() - now.getTime());
}
