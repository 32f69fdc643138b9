// Published and shared reports: external access to one ready report without an account.
// - Publishing (reports:publish) gives the report one shareable URL; publishing again replaces it (the old URL
//   stops working), unpublishing revokes it. An expiry is optional.
// - Sharing (reports:share) grants one e-mail address access: the link goes only into the mail (like an
//   invitation), never into the API response, so only whoever reads that mailbox holds it. A grant always expires.
// - Revoking (reports:revoke_share) ends a grant or the published URL. Every lookup reads the database, so a
//   revocation or an expiry applies to the very next request.
// Managing shares needs read access to the report's assessment, like reading the report; another organization's
// report, or one the caller cannot read, answers 404. Management actions are audited as the caller.
// Publishing and granting hand the report to someone outside the organization, so they are in sudo mode
// (auth/reauthentication.ts): a session signed in long ago confirms with the password, once the request is known
// to be valid. Unpublishing and revoking only take access away and never ask.
import type { Prisma, ReportShare, Scoped, Tx } from '@svc/db';
import { newId, organizationOf, scopedTo } from '@svc/db';
import { oneLine } from '@svc/domain';
import { hasScope, type Scope } from '@svc/scopes';
import { mailErrorForLog } from '@svc/mail';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { generateShareToken, hashShareToken } from '../../auth/share-token';
import { conflict, forbidden, mailNotSent, notFound, notFoundAs, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { recordAs, type Acting } from '../audit/audit.context';
import type { ConfirmSensitiveChange } from '../auth/reauthentication';
import { requireReport, type ReportRow } from '../reports/reports.service';
import { requireStillMayAccess } from '../access/access.service';
import { RECHECKED_TRANSACTION } from '../access/own-role';

const DAY_MS = 24 * 3600 * 1000;

export type ShareKind = 'link' | 'email';
export type ShareStatus = 'active' | 'expired' | 'revoked';

export function shareStatus(share: Pick<ReportShare, 'revokedAt' | 'expiresAt'>, now: Date): ShareStatus {
  if (share.revokedAt) return 'revoked';
  return share.expiresAt && share.expiresAt <= now ? 'expired' : 'active';
}

/** Prisma filter of the shares in a status at `now`. */
function statusFilter(status: ShareStatus, now: Date): Prisma.ReportShareWhereInput {
  switch (status) {
    case 'revoked':
      return { revokedAt: { not: null } };
    case 'expired':
      return { revokedAt: null, expiresAt: { lte: now } };
    case 'active':
      return { revokedAt: null, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] };
  }
}

export function presentShare(share: ReportShare, now: Date) {
  return {
    id: share.id,
    report_id: share.reportId,
    kind: share.kind as ShareKind,
    email: share.email,
    status: shareStatus(share, now),
    expires_at: share.expiresAt?.toISOString() ?? null,
    created_by_user_id: share.createdById,
    created_at: share.createdAt.toISOString(),
    revoked_at: share.revokedAt?.toISOString() ?? null,
    revoked_by_user_id: share.revokedById,
    last_accessed_at: share.lastAccessedAt?.toISOString() ?? null,
    access_count: share.accessCount,
  };
}

/** The dashboard page a share's holder opens (signed out). */
export function sharedReportUrl(deps: AppDeps, token: string): string {
  return `${deps.config.publicBaseUrl}/shared/reports/${token}`;
}

/** The report, readable by the caller and ready; 409 while it is pending or after it failed. */
async function requireReadyReport(deps: AppDeps, acting: Acting, reportId: string): Promise<ReportRow> {
  const report = await requireReport(deps, acting.principal, reportId);
  if (report.status !== 'ready') throw conflict(`The report is ${report.status}: only a ready report can be published or shared.`);
  return report;
}

/** An expiry in the future and within REPORT_SHARE_MAX_TTL_DAYS; 422 otherwise. */
function checkExpiry(deps: AppDeps, expiresAt: Date, now: Date): Date {
  if (expiresAt <= now) throw unprocessable('expires_at must be in the future.');
  const maxDays = deps.config.reportShares.maxTtlDays;
  if (expiresAt.getTime() - now.getTime() > maxDays * DAY_MS) throw unprocessable(`expires_at must be at most ${maxDays} days ahead.`);
  return expiresAt;
}

const auditTarget = (report: ReportRow) => ({ type: 'report', id: report.id });

/** The row of a new share of `report` holding `token` (only its keyed hash is stored). */
function newShare(
  deps: AppDeps,
  acting: Acting,
  report: ReportRow,
  token: string,
  now: Date,
  share: { kind: ShareKind; email: string | null; expiresAt: Date | null },
) {
  return {
    id: newId('rsh', now.getTime()),
    organizationId: acting.principal.organizationId,
    reportId: report.id,
    ...share,
    tokenHash: hashShareToken(token, deps.config.apiKeyPepper),
    createdById: acting.principal.userId,
    createdAt: now,
  };
}

/**
 * Publishing again revokes the report's live URL: whoever holds it loses access, which is reports:revoke_share's
 * (SPEC: "Revoke external access"), not reports:publish's. 403 naming the scope, nothing changed.
 */
async function requireMayReplacePublication(tx: Pick<Tx, 'reportShare'>, principal: Principal, reportId: string, now: Date): Promise<void> {
  if (hasScope(principal.scopes, 'reports:revoke_share')) return;
  const live = await tx.reportShare.count({ where: { reportId, kind: 'link', ...statusFilter('active', now) } });
  if (live > 0) {
    throw forbidden('Missing required scope: reports:revoke_share. Publishing again would revoke the URL this report is published at.');
  }
}

/**
 * Handing the report out or taking a share back, checked again against the caller as committed now (own-role.ts):
 * demoted while the request ran, they need the scope and read access to its assessment with the role left (else 403,
 * or 404 as for a report they cannot see). First in the transaction, before the report's row: the assessment's and
 * project's rows are held before the grants the access rests on, as their deletion takes them (holdTargetRows).
 */
async function requireStillMayManageShares(tx: Scoped<Tx>, principal: Principal, report: ReportRow, scope: Scope, action: string): Promise<void> {
  await notFoundAs('Report', requireStillMayAccess(tx, principal, { kind: 'assessment', id: report.assessmentId }, { scope, action, need: 'read', hold: true }));
}

/** The report's row, FOR UPDATE until the commit; 404 when it has gone. */
async function holdReport(tx: Scoped<Tx>, reportId: string): Promise<void> {
  const rows = await tx.$queryRaw<Array<{ id: string }>>`SELECT id FROM reports WHERE id = ${reportId} AND organization_id = ${organizationOf(tx)} FOR UPDATE`;
  if (rows.length === 0) throw notFound('Report');
}

/**
 * Publishes the report to a new URL, revoking the one it had (if any); the URL is in this response only. Publishing
 * again is not a no-op: it hands out a new URL (201), so it asks for the password like the first publication.
 */
export async function publishReport(
  deps: AppDeps,
  acting: Acting,
  reportId: string,
  input: { expires_at?: Date | null },
  confirm: ConfirmSensitiveChange,
) {
  const { principal, meta } = acting;
  const report = await requireReadyReport(deps, acting, reportId);
  const now = deps.clock.now();
  const expiresAt = input.expires_at ? checkExpiry(deps, input.expires_at, now) : null;
  await confirm('report_publish');
  const token = generateShareToken();
  const share = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayManageShares(tx, principal, report, 'reports:publish', 'Publishing reports');
    // One publication at a time: concurrent publishes of the same report take turns on its row.
    await holdReport(tx, report.id);
    await requireMayReplacePublication(tx, principal, report.id, now);
    const replaced = await tx.reportShare.updateMany({
      where: { reportId: report.id, kind: 'link', ...statusFilter('active', now) },
      data: { revokedAt: now, revokedById: principal.userId },
    });
    const created = await tx.reportShare.create({ data: newShare(deps, acting, report, token, now, { kind: 'link', email: null, expiresAt }) });
    await recordAs(tx, principal, meta, now, {
      action: 'report.published',
      target: auditTarget(report),
      metadata: { share_id: created.id, expires_at: expiresAt?.toISOString() ?? null, replaced_previous: replaced.count > 0 },
    });
    return created;
  }, RECHECKED_TRANSACTION);
  return { ...presentShare(share, now), url: sharedReportUrl(deps, token) };
}

/** Revokes one share of the report (409 when it is already revoked), audited as `action` with an optional reason. */
async function revoke(
  deps: AppDeps,
  acting: Acting,
  report: ReportRow,
  share: ReportShare,
  action: 'report.unpublished' | 'report.share_revoked',
  reason?: string,
) {
  const { principal, meta } = acting;
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // A revocation someone asked for, against their role as committed (taking back a share whose mail failed is not).
    if (reason !== 'mail_failed') await requireStillMayManageShares(tx, principal, report, 'reports:revoke_share', 'Revoking report shares');
    // Conditional: of two concurrent revocations, one is recorded.
    const { count } = await tx.reportShare.updateMany({
      where: { id: share.id, revokedAt: null },
      data: { revokedAt: now, revokedById: principal.userId },
    });
    if (count !== 1) throw conflict('The share is already revoked.');
    await recordAs(tx, principal, meta, now, {
      action,
      target: auditTarget(report),
      metadata: { share_id: share.id, kind: share.kind, ...(share.email && { email: share.email }), ...(reason && { reason }) },
    });
  }, RECHECKED_TRANSACTION);
}

/** Unpublishes: revokes the report's live published URL; 404 when it has none. */
export async function unpublishReport(deps: AppDeps, acting: Acting, reportId: string): Promise<void> {
  const report = await requireReport(deps, acting.principal, reportId);
  const now = deps.clock.now();
  const live = await scopedTo(deps.prisma, acting.principal).reportShare.findFirst({
    where: { reportId: report.id, kind: 'link', ...statusFilter('active', now) },
  });
  if (!live) throw notFound('Publication');
  await revoke(deps, acting, report, live, 'report.unpublished');
}

/** Revokes a grant or the published URL of the report, by share id. */
export async function revokeShare(deps: AppDeps, acting: Acting, reportId: string, shareId: string): Promise<void> {
  const report = await requireReport(deps, acting.principal, reportId);
  const share = await scopedTo(deps.prisma, acting.principal).reportShare.findFirst({ where: { id: shareId, reportId: report.id } });
  if (!share) throw notFound('Share');
  await revoke(deps, acting, report, share, share.kind === 'link' ? 'report.unpublished' : 'report.share_revoked');
}

/** 409 while the address (in any case) already holds a live grant of the report. */
async function refuseSecondGrant(db: Pick<Tx, 'reportShare'>, report: ReportRow, email: string, now: Date): Promise<void> {
  const existing = await db.reportShare.findFirst({
    where: { reportId: report.id, kind: 'email', email: { equals: email, mode: 'insensitive' }, ...statusFilter('active', now) },
  });
  if (existing) throw conflict('This e-mail address already has access to the report; revoke that grant to send a new link.');
}

/** Grants one e-mail address access and mails it the link; 409 while the address already holds a live grant. */
export async function shareReport(
  deps: AppDeps,
  acting: Acting,
  reportId: string,
  input: { email: string; expires_at?: Date },
  confirm: ConfirmSensitiveChange,
) {
  const { principal, meta } = acting;
  const report = await requireReadyReport(deps, acting, reportId);
  const now = deps.clock.now();
  const expiresAt = checkExpiry(deps, input.expires_at ?? new Date(now.getTime() + deps.config.reportShares.defaultTtlDays * DAY_MS), now);
  // The live grant first (checked again under the lock below): a request that would fail anyway does not ask.
  await refuseSecondGrant(scopedTo(deps.prisma, principal), report, input.email, now);
  await confirm('report_share');
  const token = generateShareToken();
  const share = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillMayManageShares(tx, principal, report, 'reports:share', 'Sharing reports');
    await holdReport(tx, report.id);
    await refuseSecondGrant(tx, report, input.email, now);
    const created = await tx.reportShare.create({ data: newShare(deps, acting, report, token, now, { kind: 'email', email: input.email, expiresAt }) });
    await recordAs(tx, principal, meta, now, {
      action: 'report.share_granted',
      target: auditTarget(report),
      metadata: { share_id: created.id, email: input.email, expires_at: expiresAt.toISOString() },
    });
    return created;
  }, RECHECKED_TRANSACTION);
  try {
    await mailGrant(deps, principal.organizationId, report, input.email, token, expiresAt);
  } catch (err) {
    // A grant nobody received is useless and would block a retry as "already has access": it is revoked (and the
    // audit log says why) rather than left live or deleted behind its `report.share_granted` entry.
    await revoke(deps, acting, report, share, 'report.share_revoked', 'mail_failed').catch((cause) =>
      deps.logger.error('Revoking an undelivered report grant failed', { share_id: share.id, error: String(cause) }),
    );
    deps.logger.warn('Mailing a report grant failed; the grant is revoked', { share_id: share.id, error: mailErrorForLog(err, input.email) });
    throw mailNotSent(err);
  }
  return presentShare(share, now);
}

async function mailGrant(deps: AppDeps, organizationId: string, report: ReportRow, to: string, token: string, expiresAt: Date) {
  const org = await deps.prisma.organization.findUniqueOrThrow({ where: { id: organizationId }, select: { name: true } });
  // Names stored before names were one line could still write a line of their own into a mail to an outsider.
  const [orgName, title] = [oneLine(org.name), oneLine(report.title)];
  await deps.mailer.send({
    to,
    subject: `${orgName} shared a security report with you`,
    text:
      `${orgName} shared the report "${title}" with you.\n\n` +
      `Read it and download the PDF: ${sharedReportUrl(deps, token)}\n\n` +
      `The link is for you only; it expires on ${expiresAt.toISOString()}. Every view and download is recorded.\n`,
  });
}

/** The report's shares (published URLs and e-mail grants), newest first, optionally by status. */
export async function listShares(deps: AppDeps, acting: Acting, reportId: string, query: PageQuery & { status?: ShareStatus }) {
  const report = await requireReport(deps, acting.principal, reportId);
  const now = deps.clock.now();
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, acting.principal).reportShare.findMany({
    ...args,
    where: { ...args.where, reportId: report.id, ...(query.status && statusFilter(query.status, now)) },
  });
  return toPage(rows, query, (s) => presentShare(s, now));
}
