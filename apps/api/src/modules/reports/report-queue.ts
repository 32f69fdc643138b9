// The report-rendering queue as the API sees it: one BullMQ Queue per AppDeps, on the API's Redis connection
// (a producer needs no connection of its own), made on first use.
import type { Queue } from 'bullmq';
import { createReportQueue, enqueueReport, type ReportJobData } from '@svc/queue';
import type { AppDeps } from '../../app-deps';

const queues = new WeakMap<AppDeps, Queue<ReportJobData>>();

export function reportQueueOf(deps: AppDeps): Queue<ReportJobData> {
  let queue = queues.get(deps);
  if (!queue) {
    queue = createReportQueue(deps.redis, deps.config.redisPrefix);
    queue.on('error', (err) => deps.logger.warn('Report queue error', { error: err.message }));
    queues.set(deps, queue);
  }
  return queue;
}

/**
 * Enqueues the render job after the report row committed. A failed enqueue is logged, not thrown: the report
 * stays pending and the worker's report relay enqueues it.
 */
export async function enqueueReportRendering(deps: AppDeps, reportId: string): Promise<void> {
  try {
    await enqueueReport(reportQueueOf(deps), reportId);
  } catch (err) {
    deps.logger.warn('Enqueueing a report failed; the report relay will retry', {
      report_id: reportId,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}
