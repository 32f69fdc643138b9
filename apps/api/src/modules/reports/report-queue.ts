// The report-rendering queue as the API sees it: a producer on the API's Redis connection, declared in AppDeps.
import type { AppDeps } from '../../app-deps';
import { enqueueReport } from '@svc/queue';

/**
 * Enqueues the render job after the report row committed. A failed enqueue is logged, not thrown: the report
 * stays pending and the worker's report relay enqueues it.
 */
export async function enqueueReportRendering(deps: AppDeps, reportId: string): Promise<void> {
  try {
    await enqueueReport(deps.reportQueue, reportId);
  } catch (err) {
    deps.logger.warn('Enqueueing a report failed; the report relay will retry', {
      report_id: reportId,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}
