// PDF reports of an assessment. Requesting one (reports:generate, read access to the assessment) stores a
// `pending` report and enqueues a render job; the worker (apps/worker/src/reports) renders the PDF, stores it and
// marks the report `ready`, publishing `report.ready` in the same transaction. Reading and downloading need read
// access to the report's assessment; a report of another organization, or of an assessment the caller cannot
// read, answers 404.
//
// Report states: pending -> ready | failed (after the worker's last attempt). Downloading a report that is not
// ready is 409.
import type { Response } from 'express';
import type { Prisma, Report } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, notFound, notFoundAs } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';
import { readableAssessmentsFilter, requireAssessmentAccess, requireStillMayAccess } from '../access/access.service';
import { RECHECKED_TRANSACTION } from '../access/own-role';
import { enqueueReportRendering } from './report-queue';

/** Assessments in these states have nothing to report yet. */
const NOT_STARTED = ['draft', 'queued'];

export type ReportRow = Omit<Report, 'pdf'> & { assessment: { projectId: string } };

export const withoutPdf = { omit: { pdf: true }, include: { assessment: { select: { projectId: true } } } } as const;

export function presentReport(r: ReportRow) {
  return {
    id: r.id,
    assessment_id: r.assessmentId,
    project_id: r.assessment.projectId,
    title: r.title,
    status: r.status,
    size_bytes: r.sizeBytes,
    error: r.status === 'failed' ? r.error : null,
    requested_by_user_id: r.requestedById,
    created_at: r.createdAt.toISOString(),
    ready_at: r.readyAt?.toISOString() ?? null,
  };
}

/** Requests a report of an assessment; 409 while the assessment has not started (draft, queued). */
export async function requestReport(deps: AppDeps, principal: Principal, assessmentId: string, input: { title?: string }) {
  const assessment = await requireAssessmentAccess(deps, principal, assessmentId, 'read');
  if (NOT_STARTED.includes(assessment.status)) {
    throw conflict(`The assessment is ${assessment.status}: a report can be generated once it has started.`);
  }
  const now = deps.clock.now();
  const report = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // Demoted, or their grant taken away, while the request ran: the caller's report is not made (access.service.ts).
    await requireStillMayAccess(tx, principal, { kind: 'assessment', id: assessment.id }, { scope: 'reports:generate', action: 'Generating reports', need: 'read', hold: true });
    return tx.report.create({
      data: {
        id: newId('rpt', now.getTime()),
        organizationId: principal.organizationId,
        assessmentId: assessment.id,
        title: input.title ?? `${assessment.name}: security assessment report`,
        status: 'pending',
        requestedById: principal.userId,
        createdAt: now,
      },
      ...withoutPdf,
    });
  }, RECHECKED_TRANSACTION);
  await enqueueReportRendering(deps, report.id);
  return presentReport(report);
}

/** The report when the principal can read its assessment; 404 otherwise. */
export async function requireReport(deps: AppDeps, principal: Principal, id: string): Promise<ReportRow> {
  const report = await scopedTo(deps.prisma, principal).report.findFirst({ where: { id }, ...withoutPdf });
  if (!report) throw notFound('Report');
  await notFoundAs('Report', requireAssessmentAccess(deps, principal, report.assessmentId, 'read'));
  return report;
}

export async function getReport(deps: AppDeps, principal: Principal, id: string) {
  return presentReport(await requireReport(deps, principal, id));
}

export async function listReports(
  deps: AppDeps,
  principal: Principal,
  query: PageQuery & { assessment_id?: string; status?: string },
) {
  const readable = await readableAssessmentsFilter(deps, principal);
  const where: Prisma.ReportWhereInput = {
    assessment: readable,
    ...(query.assessment_id && { assessmentId: query.assessment_id }),
    ...(query.status && { status: query.status }),
  };
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).report.findMany({ ...args, where: { ...args.where, ...where }, ...withoutPdf });
  return toPage(rows, query, presentReport);
}

function attachmentName(title: string): string {
  const base = title.replace(/[^A-Za-z0-9._ -]+/g, '').trim().replace(/\s+/g, '-').slice(0, 100) || 'report';
  return `${base}.pdf`;
}

/** Sends the PDF as an attachment; 409 while the report is pending or when its rendering failed. */
export async function downloadReport(deps: AppDeps, principal: Principal, id: string, res: Response): Promise<void> {
  const report = await requireReport(deps, principal, id);
  if (report.status !== 'ready') {
    throw conflict(
      report.status === 'pending'
        ? 'The report is still being generated; download it once its status is ready.'
        : 'The report could not be generated; request a new one.',
    );
  }
  const { pdf } = await scopedTo(deps.prisma, principal).report.findUniqueOrThrow({ where: { id: report.id }, select: { pdf: true } });
  if (!pdf) throw conflict('The report has no document.');
  sendReportPdf(res, report.title, pdf);
}

/** Writes the PDF of a report titled `title` as an attachment (the signed-in download and the shared one). */
export function sendReportPdf(res: Response, title: string, pdf: Uint8Array, cacheControl = 'private, no-store'): void {
  res
    .status(200)
    .set({
      'Content-Type': 'application/pdf',
      'Content-Length': String(pdf.length),
      'Content-Disposition': `attachment; filename="${attachmentName(title)}"`,
      'Cache-Control': cacheControl,
    })
    .end(Buffer.from(pdf));
}
