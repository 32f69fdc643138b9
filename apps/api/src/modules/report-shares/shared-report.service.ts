// The public side of report shares: whoever holds a share token (the published URL or a mailed grant) reads the
// report's page and downloads its PDF, and nothing else. Unknown, malformed, expired and revoked tokens, and a
// report no longer ready, all answer the same 404. Requests are limited per client IP and per token (before the
// lookup, so guessing is limited too); every successful view and download is audited with the share as actor.
import type { Request, RequestHandler, Response } from 'express';
import type { RateLimiterRedis } from 'rate-limiter-flexible';
import { scopedTo } from '@svc/db';
import type { AuditAction } from '@svc/audit';
import type { AppDeps } from '../../app-deps';
import { hashShareToken, looksLikeShareToken } from '../../auth/share-token';
import { conflict, notFound } from '../../http/errors';
import { clientAddressKey, consumeOrThrow, redisRateLimiter } from '../../http/rate-limit';
import { recordInOrganizations, requestMeta } from '../audit/audit.context';
import { sendReportPdf } from '../reports/reports.service';
import { RECHECKED_TRANSACTION } from '../access/own-role';
import { inTurnOf } from '../../http/organization-turns';

/** Headers of every public share response (errors included): never cached, never indexed, never leaked by Referer. */
export const sharedResponseHeaders: RequestHandler = (_req, res, next) => {
  res.set({ 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer', 'X-Robots-Tag': 'noindex' });
  next();
};

export interface ShareLimiters {
  perIp: RateLimiterRedis;
  perToken: RateLimiterRedis;
}

export function createShareLimiters(deps: AppDeps): ShareLimiters {
  const { redis, config } = deps;
  const limit = (name: string, points: number) => redisRateLimiter(redis, config.redisPrefix, { name, points, duration: 60, failOpen: true });
  return {
    perIp: limit('share-ip', config.reportShares.perIpPerMinute),
    perToken: limit('share-token', config.reportShares.perTokenPerMinute),
  };
}

const NOT_FOUND = () => notFound('Report');

/** The live share of `token` with its ready report (without the PDF); 404 alike for every reason it is not (409 while regenerated). */
async function openShare(deps: AppDeps, limiters: ShareLimiters, req: Request, token: string) {
  await consumeOrThrow(limiters.perIp, clientAddressKey(req.ip));
  if (!looksLikeShareToken(token)) throw NOT_FOUND();
  const tokenHash = hashShareToken(token, deps.config.apiKeyPepper);
  // Keyed by the hash: the token itself never reaches Redis.
  await consumeOrThrow(limiters.perToken, tokenHash);
  const now = deps.clock.now();
  // Unscoped: the token is all its holder has; it names the organization.
  const share = await deps.prisma.reportShare.findUnique({
    where: { tokenHash },
    include: {
      report: {
        omit: { pdf: true },
        include: {
          organization: { select: { name: true } },
          assessment: { select: { name: true, project: { select: { name: true } } } },
        },
      },
    },
  });
  if (!share || share.revokedAt || (share.expiresAt && share.expiresAt <= now)) throw NOT_FOUND();
  // A shared report is pending again only when an erasure took a person out of it (apps/worker/src/erasure.ts):
  // the live link says so until the new PDF is ready.
  if (share.report.status === 'pending') {
    throw conflict('This report is being regenerated because personal data was erased from it; open the link again in a few minutes.');
  }
  if (share.report.status !== 'ready') throw NOT_FOUND();
  return share;
}

type OpenShare = Awaited<ReturnType<typeof openShare>>;

/**
 * Audits the access (actor: the share) and counts it on the share, in one transaction. The count's UPDATE waits for
 * whatever holds the share's row: its report's, assessment's or project's deletion cascades into it and holds it for as
 * long as that runs (RECHECKED_TRANSACTION, not Prisma's 5 s: 503); a share gone meanwhile is the same 404 as before.
 * Waiting keeps a connection: in one of the share's organization's turns (http/organization-turns.ts), so that the
 * holders of its tokens take no more of the pool than its members' writes.
 */
async function recordAccess(deps: AppDeps, req: Request, share: OpenShare, action: AuditAction): Promise<void> {
  const now = deps.clock.now();
  const actor = { type: 'report_share' as const, id: share.id, label: share.kind === 'email' ? share.email! : 'published link' };
  await inTurnOf(req, share.organizationId)(() => scopedTo(deps.prisma, share).$transaction(async (tx) => {
    const { count } = await tx.reportShare.updateMany({ where: { id: share.id }, data: { lastAccessedAt: now, accessCount: { increment: 1 } } });
    if (count !== 1) throw NOT_FOUND();
    await recordInOrganizations(tx, [share.organizationId], actor, requestMeta(req), now, {
      action,
      target: { type: 'report', id: share.reportId },
      metadata: { share_id: share.id, kind: share.kind, ...(share.email && { email: share.email }) },
    });
  }, RECHECKED_TRANSACTION));
}

export async function viewSharedReport(deps: AppDeps, limiters: ShareLimiters, req: Request, token: string) {
  const share = await openShare(deps, limiters, req, token);
  await recordAccess(deps, req, share, 'report.share_viewed');
  const { report } = share;
  return {
    title: report.title,
    organization_name: report.organization.name,
    project_name: report.assessment.project.name,
    assessment_name: report.assessment.name,
    size_bytes: report.sizeBytes ?? 0,
    ready_at: (report.readyAt ?? report.createdAt).toISOString(),
    expires_at: share.expiresAt?.toISOString() ?? null,
    download_path: `/api/v1/shared/reports/${token}/pdf`,
  };
}

export async function downloadSharedReport(deps: AppDeps, limiters: ShareLimiters, req: Request, res: Response, token: string) {
  const share = await openShare(deps, limiters, req, token);
  const { pdf } = await scopedTo(deps.prisma, share).report.findUniqueOrThrow({ where: { id: share.reportId }, select: { pdf: true } });
  if (!pdf) throw NOT_FOUND();
  await recordAccess(deps, req, share, 'report.share_downloaded');
  sendReportPdf(res, share.report.title, pdf, 'no-store');
}
