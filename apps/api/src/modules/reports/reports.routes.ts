import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import { idParam, type RouteSpec } from '../../http/route';
import { page } from '../../http/responses';
import { listReportsQuery, reportResponse, requestReportBody } from './reports.schemas';
import { downloadReport, getReport, listReports, requestReport } from './reports.service';

export function reportRoutes(deps: AppDeps): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/assessments/:id/reports',
      scope: 'reports:generate',
      summary: 'Generate a PDF report of an assessment: 202 with the pending report; report.ready when rendered (read access required)',
      schemas: { body: requestReportBody },
      status: 202,
      response: reportResponse,
      handler: (req) => requestReport(deps, principalOf(req), idParam(req), req.body),
    },
    {
      method: 'get',
      path: '/reports',
      scope: 'reports:read',
      summary: 'List the reports of the assessments you can read (?assessment_id=, ?status=)',
      schemas: { query: listReportsQuery },
      response: page(reportResponse),
      handler: (req) => listReports(deps, principalOf(req), req.query as never),
    },
    {
      method: 'get',
      path: '/reports/:id',
      scope: 'reports:read',
      summary: 'Read a report (read access to its assessment required)',
      response: reportResponse,
      handler: (req) => getReport(deps, principalOf(req), idParam(req)),
    },
    {
      method: 'get',
      path: '/reports/:id/download',
      scope: 'reports:download',
      summary: 'Download the PDF (application/pdf attachment); 409 until the report is ready',
      responseMediaType: 'application/pdf',
      handler: (req, res) => downloadReport(deps, principalOf(req), idParam(req), res),
    },
  ];
}
