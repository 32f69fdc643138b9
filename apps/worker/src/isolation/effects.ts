// What the isolation's decisions change outside Redis: the delivery's next_attempt_at and wait reason (a postponement
// is not an attempt), the subscription's breaker mirrored for GET and the dashboard, the audit entry and log line of
// a breaker that opens, and bringing a breaker's prober forward to the probe time.
import type { Queue } from 'bullmq';
import { SYSTEM_ACTOR, recordAudit } from '@svc/audit';
import { Prisma, queryRows } from '@svc/db';
import type { BreakerState, WaitReason } from '@svc/domain';
import { redelayDeliveryJob, type DeliveryJobData } from '@svc/queue';
import type { DeliveryRef } from '@svc/outbox';
import { publishOperationalEvent } from '../operational-events';
import type { WorkerDeps } from '../deps';
import { breakerTransitions } from '../metrics';

interface PostponementRow {
  attemptCount: number;
  reason: WaitReason;
  until: Date;
  now: Date;
}

/**
 * Shows why and until when pending deliveries wait, written together: the postponements of a flush interval go in one
 * UPDATE instead of one each. (Behind a dead endpoint at 500 deliveries a second, a statement per postponement was
 * most of what the worker and PostgreSQL did: a CPU profile of the worker showed a third of its busy time in socket
 * writes, most of them PostgreSQL's.) Only what the delivery shows is written late: its job has already been
 * delayed, and a row written late is still guarded by the attempt count it was postponed at. A delivery written when
 * the reason changes or the time shown has passed, so one that waits again and again for a slot costs no write each
 * time.
 */
export class PostponementWriter {
  private batch = new Map<string, PostponementRow>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: Pick<WorkerDeps, 'prisma' | 'logger'>,
    private readonly flushMs = 50,
    private readonly maxBatch = 500,
  ) {}

  record(
    delivery: { id: string; attemptCount: number; waitReason: string | null; nextAttemptAt: Date | null },
    reason: WaitReason,
    until: Date,
    now: Date,
  ): void {
    if (delivery.waitReason === reason && delivery.nextAttemptAt && delivery.nextAttemptAt.getTime() > now.getTime()) return;
    this.batch.set(delivery.id, { attemptCount: delivery.attemptCount, reason, until, now });
    if (this.batch.size >= this.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.flushMs);
  }

  /** Writes what is waiting (and waits for the writes under way): at the end of an interval, and when the worker closes. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const rows = [...this.batch];
    this.batch = new Map();
    if (rows.length > 0) this.writing = this.writing.then(() => this.write(rows));
    return this.writing;
  }

  private async write(rows: Array<[string, PostponementRow]>): Promise<void> {
    try {
      await queryRows(
        this.deps.prisma,
        Prisma.sql`
          UPDATE webhook_deliveries d
             SET next_attempt_at = v.until AT TIME ZONE 'UTC', wait_reason = v.reason, updated_at = v.now AT TIME ZONE 'UTC'
            FROM unnest(${rows.map(([id]) => id)}::text[], ${rows.map(([, r]) => r.attemptCount)}::int[],
                        ${rows.map(([, r]) => r.reason)}::text[], ${rows.map(([, r]) => r.until.toISOString())}::timestamptz[],
                        ${rows.map(([, r]) => r.now.toISOString())}::timestamptz[]) AS v(id, attempt_count, reason, until, now)
           WHERE d.id = v.id AND d.status = 'pending' AND d.attempt_count = v.attempt_count`,
        'worker_record_postponements',
      );
    } catch (err) {
      // What a delivery shows, not what happens to it: its job waits in Redis either way.
      this.deps.logger.warn('Could not show postponed deliveries as waiting', { deliveries: rows.length, error: String(err) });
    }
  }
}

/**
 * Mirrors a breaker transition on the subscription row; an opening is logged and audited by `system`. An opening
 * and a closing publish webhook.breaker_opened / webhook.breaker_closed in the same transaction; answers their
 * deliveries, to enqueue.
 */
export async function recordBreakerTransition(
  deps: WorkerDeps,
  subscription: { id: string; organizationId: string },
  to: BreakerState,
  until: Date | null,
  now: Date,
  lastError: string | null = null,
): Promise<DeliveryRef[]> {
  breakerTransitions.inc({ to });
  const breakerUntil = to === 'open' ? until : null;
  const published: DeliveryRef[] = [];
  if (to === 'half_open') {
    await deps.prisma.webhookSubscription.updateMany({ where: { id: subscription.id }, data: { breakerState: to, breakerUntil } });
    return published;
  }
  if (to === 'closed') {
    await deps.prisma.$transaction(async (tx) => {
      const { count } = await tx.webhookSubscription.updateMany({ where: { id: subscription.id }, data: { breakerState: to, breakerUntil } });
      if (count === 1) await publishOperationalEvent(tx, 'webhook.breaker_closed', subscription.id, null, {}, published, now);
    });
    return published;
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
    const extra = { probe_at: until?.toISOString() ?? null };
    await publishOperationalEvent(tx, 'webhook.breaker_opened', subscription.id, lastError, extra, published, now);
  });
  return published;
}

/** The waiting delivery chosen to probe a breaker that just opened comes back at the probe time. */
export function scheduleProbe(queue: Queue<DeliveryJobData>, id: string, at: Date, now: Date): Promise<void> {
  return redelayDeliveryJob(queue, id, at.getTime() - now.getTime());
}
