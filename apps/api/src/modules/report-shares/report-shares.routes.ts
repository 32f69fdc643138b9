import type { AppDeps } from '../../app-deps';
import { idParam, type RouteSpec } from '../../http/route';
import type { RateLimiters } from '../../http/rate-limit';
import { page } from '../../http/responses';
import { acting } from '../audit/audit.context';
import { requestConfirmer, withoutCurrentPassword } from '../auth/reauthentication';
import { listSharesQuery, publishedResponse, publishReportBody, shareReportBody, shareResponse, sharedReportResponse } from './report-shares.schemas';
import { listShares, publishReport, revokeShare, shareReport, unpublishReport } from './report-shares.service';
import { createShareLimiters, downloadSharedReport, viewSharedReport } from './shared-report.service';

/** Path prefix of the public share routes (their headers are set for the whole prefix in app.ts). */
export const SHARED_REPORTS_PREFIX = '/shared/reports';

export function reportShareRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  const token = (req: { params: Record<string, unknown> }) => req.params.token as string;
  const shareLimiters = createShareLimiters(deps);
  return [
    {
      method: 'post',
      path: '/reports/:id/publication',
      scope: 'reports:publish',
      summary:
        'Publish a ready report to a shareable URL (anyone holding it reads the report page and downloads the PDF); ' +
        'optional expires_at. The URL is in this response only; publishing again replaces the previous URL (which needs reports:revoke_share too). ' +
        'A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: publishReportBody },
      status: 201,
      response: publishedResponse,
      sudoMode: true,
      handler: (req) => publishReport(deps, acting(req), idParam(req), withoutCurrentPassword(req.body), requestConfirmer(deps, limiters, req)),
    },
    {
      method: 'delete',
      path: '/reports/:id/publication',
      // Unpublishing revokes external access (SPEC: reports:revoke_share), as revoking the URL by its share id does.
      scope: 'reports:revoke_share',
      summary: 'Unpublish: the published URL answers 404 from the next request on',
      handler: (req) => unpublishReport(deps, acting(req), idParam(req)),
    },
    {
      method: 'post',
      path: '/reports/:id/shares',
      scope: 'reports:share',
      summary:
        'Grant one e-mail address access to a ready report: the link is mailed to it (never returned); expires_at defaults to 30 days. ' +
        'A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: shareReportBody },
      status: 201,
      response: shareResponse,
      sudoMode: true,
      handler: (req) => shareReport(deps, acting(req), idParam(req), withoutCurrentPassword(req.body), requestConfirmer(deps, limiters, req)),
    },
    {
      method: 'get',
      path: '/reports/:id/shares',
      scope: 'reports:read',
      summary: "List the report's published URLs and e-mail grants, newest first (?status=active|expired|revoked)",
      schemas: { query: listSharesQuery },
      response: page(shareResponse),
      handler: (req) => listShares(deps, acting(req), idParam(req), req.query as never),
    },
    {
      method: 'delete',
      path: '/reports/:id/shares/:share_id',
      scope: 'reports:revoke_share',
      summary: 'Revoke an e-mail grant or the published URL: it answers 404 from the next request on',
      handler: (req) => revokeShare(deps, acting(req), idParam(req), req.params.share_id as string),
    },
    {
      method: 'get',
      path: `${SHARED_REPORTS_PREFIX}/:token`,
      scope: 'public',
      summary:
        'A shared report through its token (published URL or e-mailed link): title, names, size and the PDF path. ' +
        '404 for unknown, expired or revoked tokens alike; 409 while the report is regenerated after a GDPR erasure; rate limited per token and per IP; audited',
      response: sharedReportResponse,
      handler: (req) => viewSharedReport(deps, shareLimiters, req, token(req)),
    },
    {
      method: 'get',
      path: `${SHARED_REPORTS_PREFIX}/:token/pdf`,
      scope: 'public',
      summary: 'Download the PDF of a shared report (application/pdf attachment); same 404, limits and audit as the page',
      responseMediaType: 'application/pdf',
      handler: (req, res) => downloadSharedReport(deps, shareLimiters, req, res, token(req)),
    },
  ];
}
