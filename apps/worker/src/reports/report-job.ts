// The report-rendering jobs of the worker:
// - `render` (one per report, job id = report id): reads the assessment, its project and every finding, renders
//   the PDF, and in ONE transaction stores it (status pending -> ready, conditional, so a report is completed and
//   announced once however many workers render it) and publishes `report.ready`. The store also requires the row
//   unchanged since the render read it: a GDPR erasure that rewrote the report's text meanwhile touches its pending
//   reports, and a PDF rendered from the text before is thrown away and rendered again (else it would keep the
//   erased person). While an erasure runs in the report's organization nothing is stored (its PDF and its
//   report.ready event could hold text a pass has already rewritten elsewhere): the job waits, not an attempt, and
//   renders after it. After the last failed attempt the report is marked `failed`, and so is a report whose render
//   did not finish REPORT_RENDER_ATTEMPTS times (its worker died during it: stall recovery bypasses the job's
//   handler and the relay would enqueue it again, so one such report would kill a worker every relay cycle).
// - `report-relay` (a job scheduler, one run per tick whichever worker takes it): enqueues reports still pending
//   after the relay age whose job is gone (Redis down, API killed after commit), paged as the outbox relay is
//   (packages/outbox relay.ts). A report that still has its job is not enqueued twice (job id = report id).
import { DelayedError, Worker, type Job, type Queue } from 'bullmq';
import { withJobLogger } from '@svc/config';
import { waitAtMost } from '@svc/domain';
import { outboxDeps, relayPendingReports, withOutbox } from '@svc/outbox';
import {
  REPORT_QUEUE,
  REPORT_RENDER_ATTEMPTS,
  bullPrefix,
  type DeliveryJobData,
  type ReportJobData,
  type ReportJobName,
} from '@svc/queue';
import type { WorkerDeps } from '../deps';
import { renderReportPdf, reportSourceText, type ReportDocument } from './render-pdf';
import { handBack, type RunningJobs } from '../running-jobs';
import { erasuresUnderWay } from '../erasure-under-way';

export type ReportJobResult = 'ready' | 'skipped' | 'failed' | number;
/** How long a render waits for an erasure running in its organization before it renders again. */
export const ERASURE_WAIT_MS = 30_000;

/** Renders a report that changed while it was rendered again this many times before the job gives up (and retries). */
const RENDER_ROUNDS = 3;

/**
 * Renders one report and publishes report.ready; 'skipped' when it is gone or no longer pending; 'erasure_running'
 * when an erasure runs in its organization (nothing stored: render it again once that has ended).
 */
export async function renderReport(deps: WorkerDeps, deliveryQueue: Queue<DeliveryJobData>, reportId: string): Promise<'ready' | 'skipped' | 'erasure_running'> {
  for (let round = 1; round <= RENDER_ROUNDS; round++) {
    const outcome = await renderOnce(deps, deliveryQueue, reportId);
    if (outcome !== 'changed') return outcome;
    deps.logger.info('Report changed while it was rendered: rendering it again', { report_id: reportId, round });
  }
  throw new Error(`the report changed while it was rendered, ${RENDER_ROUNDS} times`);
}

/** 'changed': the report is still pending but was touched since it was read (its text rewritten): render again. */
async function renderOnce(deps: WorkerDeps, deliveryQueue: Queue<DeliveryJobData>, reportId: string): Promise<'ready' | 'skipped' | 'changed' | 'erasure_running'> {
  const report = await deps.prisma.report.findUnique({ where: { id: reportId }, omit: { pdf: true } });
  if (!report || report.status !== 'pending') return 'skipped';
  const assessment = await deps.prisma.assessment.findUnique({
    where: { id: report.assessmentId },
    include: { project: true, organization: { select: { name: true } } },
  });
  if (!assessment) return 'skipped';
  const findings = await deps.prisma.finding.findMany({
    where: { assessmentId: assessment.id },
    select: { id: true, title: true, severity: true, status: true, location: true, description: true },
    orderBy: { id: 'asc' },
  });
  const document: ReportDocument = {
    reportId: report.id,
    title: report.title,
    organizationName: assessment.organization.name,
    assessment: {
      id: assessment.id,
      name: assessment.name,
      status: assessment.status,
      startedAt: assessment.startedAt,
      finishedAt: assessment.finishedAt,
    },
    project: { id: assessment.project.id, name: assessment.project.name },
    generatedAt: deps.clock.now(),
    findings,
  };
  const pdf = await renderReportPdf(document);
  const now = deps.clock.now();
  const completed = await withOutbox(
    outboxDeps(deps, deliveryQueue),
    async (tx, publish) => {
      if (await tx.erasureRequest.count({ where: erasuresUnderWay(report.organizationId) })) return 'erasure_running';
      const claimed = await tx.report.updateMany({
        where: { id: report.id, status: 'pending', updatedAt: report.updatedAt },
        data: { status: 'ready', pdf: new Uint8Array(pdf), sizeBytes: pdf.length, readyAt: now, error: null, unfinishedRenders: 0 },
      });
      if (claimed.count !== 1) return (await tx.report.count({ where: { id: report.id, status: 'pending' } })) > 0 ? 'changed' : false;
      const text = reportSourceText(document);
      await tx.reportRenderedText.upsert({ where: { reportId: report.id }, create: { reportId: report.id, text }, update: { text } });
      await publish({
        type: 'report.ready',
        organizationId: report.organizationId,
        projectId: assessment.projectId,
        assessmentId: assessment.id,
        data: {
          report_id: report.id,
          assessment_id: assessment.id,
          project_id: assessment.projectId,
          title: report.title,
          size_bytes: pdf.length,
          ready_at: now.toISOString(),
        },
      });
      return true;
    },
    () => now,
  );
  if (completed === 'changed' || completed === 'erasure_running') return completed;
  if (completed) deps.logger.info('Report ready', { report_id: report.id, size_bytes: pdf.length, findings: findings.length });
  return completed ? 'ready' : 'skipped';
}

/** After the last attempt: the report is `failed` (the detail stays in the log, not in the API). */
async function markFailed(deps: WorkerDeps, reportId: string, err: unknown): Promise<void> {
  deps.logger.error('Report rendering failed', { report_id: reportId, error: err instanceof Error ? err.stack ?? err.message : String(err) });
  await deps.prisma.report.updateMany({
    where: { id: reportId, status: 'pending' },
    data: { status: 'failed', error: 'The report could not be rendered.' },
  });
}

/** The report relay's run: enqueues the reports pending past the relay age whose job is gone; answers how many. */
export async function relayLostReports(deps: WorkerDeps, reportQueue: Queue<ReportJobData>): Promise<number> {
  const relayed = await relayPendingReports(deps.prisma, reportQueue, { ageMs: deps.config.webhooks.relayAgeMs, now: deps.clock.now() });
  if (relayed > 0) deps.logger.info('Report relay enqueued reports whose job was lost', { reports: relayed });
  return relayed;
}

/** A report whose render did not finish this many times (its worker died during each) is failed, not rendered again. */
export const MAX_UNFINISHED_RENDERS = REPORT_RENDER_ATTEMPTS;

/** How long a shutdown waits to count the renders it cut off as ended (the database may be what it waits on). */
const RELEASE_TIMEOUT_MS = 2_000;

/**
 * The renders one worker has under way, one entry per run (a report may be run twice at once after a lost lock). At
 * a shutdown that cuts them off they are counted as ended: a deploy is not the render killing its worker.
 */
export class RendersUnderWay {
  private readonly runs = new Set<{ reportId: string }>();
  /** The worker has begun to stop: a job handed over after that goes back to the queue untouched. */
  stopped = false;

  stopTaking(): void {
    this.stopped = true;
  }

  begin(reportId: string): { reportId: string } {
    const run = { reportId };
    this.runs.add(run);
    return run;
  }

  /** True the first time only: a run released at shutdown is not counted as ended again. */
  end(run: { reportId: string }): boolean {
    return this.runs.delete(run);
  }

  /** The reports of the runs still under way, each released. */
  releaseAll(): string[] {
    const reports = [...this.runs].map((run) => run.reportId);
    this.runs.clear();
    return reports;
  }
}

async function runRenderJob(
  deps: WorkerDeps,
  deliveryQueue: Queue<DeliveryJobData>,
  job: Job<ReportJobData>,
  token: string | undefined,
  underWay: RendersUnderWay,
): Promise<ReportJobResult> {
  const { reportId } = job.data;
  if (underWay.stopped) return handBack(job, token);
  const unfinished = await startRender(deps, reportId);
  if (unfinished === null) return 'skipped';
  if (unfinished >= MAX_UNFINISHED_RENDERS) {
    await markFailed(deps, reportId, new Error(`its render was started ${unfinished} times and never finished (the worker died during it)`));
    return 'failed';
  }
  const run = underWay.begin(reportId);
  try {
    const rendered = await renderReport(deps, deliveryQueue, reportId);
    if (rendered !== 'erasure_running') return rendered;
    deps.logger.info('Report waits for the erasure running in its organization', { report_id: reportId });
    await job.moveToDelayed(Date.now() + ERASURE_WAIT_MS, token);
    throw new DelayedError();
  } catch (err) {
    if (err instanceof DelayedError) throw err;
    const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    if (!lastAttempt) throw err;
    await markFailed(deps, reportId, err);
    return 'failed';
  } finally {
    if (underWay.end(run)) await endRender(deps, reportId);
  }
}

/**
 * Counts a render of a pending report as started; returns how many earlier renders of it never finished, or null
 * when it is gone or no longer pending. Raw SQL: `updated_at` must not move (a render stores only a row unchanged
 * since it read it).
 */
async function startRender(deps: WorkerDeps, reportId: string): Promise<number | null> {
  const rows = await deps.prisma.$queryRaw<Array<{ unfinished_renders: number }>>`
    UPDATE reports SET unfinished_renders = unfinished_renders + 1
    WHERE id = ${reportId} AND status = 'pending'
    RETURNING unfinished_renders`;
  return rows.length === 1 ? rows[0].unfinished_renders - 1 : null;
}

/** Tries to record that a render ended, over a few seconds: a render that failed with the database often ends with it. */
const END_RENDER_RETRY_DELAYS_MS = [250, 1_000, 3_000];

/**
 * The render has ended, whatever its outcome. Retried through a short database outage; one that outlasts the
 * retries leaves the render counted as unfinished (logged, not thrown): it takes three such to fail a report.
 */
async function endRender(deps: WorkerDeps, reportId: string): Promise<void> {
  for (let tried = 0; ; tried++) {
    try {
      await deps.prisma.$executeRaw`UPDATE reports SET unfinished_renders = GREATEST(unfinished_renders - 1, 0) WHERE id = ${reportId}`;
      return;
    } catch (err) {
      if (tried >= END_RENDER_RETRY_DELAYS_MS.length) {
        deps.logger.warn('Report render could not be counted as finished', { report_id: reportId, error: err instanceof Error ? err.message : String(err) });
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, END_RENDER_RETRY_DELAYS_MS[tried]));
    }
  }
}

/** At a shutdown that cuts renders off: each counted as finished (the shutdown, not the render, stopped it). */
export async function releaseRendersCutOff(deps: WorkerDeps, underWay: RendersUnderWay): Promise<void> {
  const cutOff = underWay.releaseAll();
  if (cutOff.length === 0) return;
  deps.logger.info('Report renders cut off by the shutdown: rendered again by the next worker', { reports: cutOff.length });
  await waitAtMost(() => Promise.all(cutOff.map((reportId) => endRender(deps, reportId))), RELEASE_TIMEOUT_MS, () =>
    deps.logger.warn('Report renders cut off by the shutdown could not all be counted as ended in time', { reports: cutOff.length, timeout_ms: RELEASE_TIMEOUT_MS }),
  );
}

export async function runReportJob(
  deps: WorkerDeps,
  deliveryQueue: Queue<DeliveryJobData>,
  reportQueue: Queue<ReportJobData>,
  job: Job<ReportJobData>,
  token?: string,
  underWay: RendersUnderWay = new RendersUnderWay(),
): Promise<ReportJobResult> {
  switch (job.name as ReportJobName) {
    case 'render':
      return runRenderJob(deps, deliveryQueue, job, token, underWay);
    case 'report-relay':
      return relayLostReports(deps, reportQueue);
    default:
      throw new Error(`Unknown report job ${job.name}`);
  }
}

export function createReportWorker(
  deps: WorkerDeps,
  deliveryQueue: Queue<DeliveryJobData>,
  reportQueue: Queue<ReportJobData>,
  jobs: RunningJobs,
  underWay: RendersUnderWay,
): Worker {
  const connection = deps.redis();
  const worker = new Worker<ReportJobData, ReportJobResult>(
    REPORT_QUEUE,
    jobs.counting((job: Job<ReportJobData>, token?: string) => runReportJob(withJobLogger(deps, job.id), deliveryQueue, reportQueue, job, token, underWay)),
    { connection, prefix: bullPrefix(deps.config), concurrency: 2 },
  );
  worker.on('closed', () => {
    connection.quit().catch(() => connection.disconnect());
  });
  worker.on('failed', (job, err) => deps.logger.warn('Report job failed', { job_id: job?.id, error: err.message }));
  worker.on('error', (err) => deps.logger.error('Worker error', { queue: REPORT_QUEUE, error: err.message }));
  return worker;
}

/** The report relay's job scheduler; every worker process upserts it at start, idempotently. */
export async function scheduleReportRelay(deps: WorkerDeps, reportQueue: Queue<ReportJobData>): Promise<void> {
  await reportQueue.upsertJobScheduler(
    'report-relay',
    { every: deps.config.webhooks.relayIntervalMs },
    { name: 'report-relay', data: { reportId: '' }, opts: { removeOnComplete: true, removeOnFail: 100 } },
  );
}
