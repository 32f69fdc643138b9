// The outbox relay: enqueues every pending delivery that is overdue (its next attempt, or its creation, lies
// further back than `ageMs`) and has lost its job. It pages through the overdue deliveries by id and asks Redis which
// of each page have no job: under a backlog, thousands of pending deliveries are overdue with their jobs still queued,
// and a relay that looked only at the first page (500, by id) never reached a lost one behind them (at 10,000 queued,
// a lost delivery waited 34 s instead of one relay interval). A run stops after `budgetMs`; the next one goes on
// from where it stopped (the cursor is kept in Redis, shared by the workers that take turns running the relay).
import type { Queue } from 'bullmq';
import type { Db } from '@svc/db';
import { deliveriesWithoutJob, enqueueIssueExport, queueRedis, type DeliveryJobData } from '@svc/queue';
import { enqueueDeliveries } from './enqueue';

export const RELAY_PAGE = 500;
export const RELAY_BUDGET_MS = 5_000;
const CURSOR_TTL_MS = 24 * 3600 * 1000;

export async function relayOverdueDeliveries(
  prisma: Db,
  queue: Queue<DeliveryJobData>,
  options: { ageMs: number; maxAttempts: number; now?: Date; batchSize?: number; budgetMs?: number; fairSharePerSecond?: number },
): Promise<number> {
  const cutoff = new Date((options.now ?? new Date()).getTime() - options.ageMs);
  const pageSize = options.batchSize ?? RELAY_PAGE;
  const started = performance.now();
  const redis = await queueRedis(queue);
  const cursorKey = `${queue.opts.prefix}:outbox-relay:cursor`;
  let after = (await redis.get(cursorKey)) ?? '';
  let relayed = 0;
  for (;;) {
    const page = await prisma.webhookDelivery.findMany({
      where: {
        status: 'pending',
        id: { gt: after },
        OR: [{ nextAttemptAt: { lt: cutoff } }, { nextAttemptAt: null, createdAt: { lt: cutoff } }],
      },
      select: { id: true, attemptCount: true, subscriptionId: true },
      orderBy: { id: 'asc' },
      take: pageSize,
    });
    const lost = new Set(await deliveriesWithoutJob(queue, page.map((d) => d.id)));
    await enqueueDeliveries(
      queue,
      page.filter((d) => lost.has(d.id)).map((d) => ({ id: d.id, subscriptionId: d.subscriptionId, remainingAttempts: options.maxAttempts - d.attemptCount })),
      { fairSharePerSecond: options.fairSharePerSecond },
    );
    relayed += lost.size;
    if (page.length < pageSize) {
      after = ''; // the end: the next run starts over
      break;
    }
    after = page[page.length - 1].id;
    if (performance.now() - started >= (options.budgetMs ?? RELAY_BUDGET_MS)) break;
  }
  if (after) await redis.set(cursorKey, after, 'PX', CURSOR_TTL_MS);
  else await redis.del(cursorKey);
  return relayed;
}

/**
 * The same for issue exports (jobs named `issue-export` on the delivery queue): a pending export whose next
 * attempt (or creation) is overdue may have lost its job; job id = export id, so a live job is not doubled.
 */
export async function relayOverdueIssueExports(
  prisma: Db,
  queue: Queue<DeliveryJobData>,
  options: { ageMs: number; maxAttempts: number; now?: Date; batchSize?: number },
): Promise<number> {
  const cutoff = new Date((options.now ?? new Date()).getTime() - options.ageMs);
  const overdue = await prisma.findingIssueExport.findMany({
    where: {
      status: 'pending',
      OR: [{ nextAttemptAt: { lt: cutoff } }, { nextAttemptAt: null, createdAt: { lt: cutoff } }],
    },
    select: { id: true, attemptCount: true },
    orderBy: { id: 'asc' },
    take: options.batchSize ?? 500,
  });
  for (const e of overdue) await enqueueIssueExport(queue, e.id, Math.max(1, options.maxAttempts - e.attemptCount));
  return overdue.length;
}
