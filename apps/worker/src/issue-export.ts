// The processor of an issue export job (a job named `issue-export` on the delivery queue): one attempt at creating
// the finding's issue in its tracker, through the worker's one transport (URL re-checked, connection pinned to the
// checked address, pooled). 2xx records the issue's key and URL on the export; 429 and 5xx (and network errors)
// are retried on the webhook backoff, honouring Retry-After; any other answer, an unsafe URL or a revoked target
// fails the export. The tracker's status is kept on the target (last success, last error).
import { resolveWebhookTarget, describeTargetRejection } from '@svc/net';
import { nextAttempt } from '@svc/domain';
import { unseal, type FindingIssueExport, type IssueExportTarget } from '@svc/db';
import { credentialBoundElsewhere, credentialDestination, issueCreateRequest, parseCreatedIssue, type IssueCredentials, type IssueTarget, type IssueTrackerKind } from '@svc/webhooks';
import type { DeliveryContext, DeliveryResult } from './deliver';
import { outcomeOfHttp, type AttemptOutcome } from './http/outcome';
import type { HttpResult } from './http/post';
import { RetryableDeliveryError, webhookRetryPolicy } from './retry';

/** Trackers answer with the created issue (GitHub's is several KiB): enough of it to read its number and URL. */
const ISSUE_RESPONSE_LIMIT_BYTES = 256 * 1024;
const RETRIED_STATUSES = new Set([408, 429]);

type Finish = { status: 'succeeded'; key: string; url: string } | { status: 'failed' | 'pending'; error: string; delayMs?: number };

export async function processIssueExport(ctx: DeliveryContext, exportId: string): Promise<DeliveryResult> {
  const row = await ctx.prisma.findingIssueExport.findUnique({ where: { id: exportId } });
  if (!row || row.status !== 'pending') return { status: 'skipped', reason: row ? `export already ${row.status}` : 'export not found' };
  const target = await ctx.prisma.issueExportTarget.findUnique({ where: { id: row.targetId } });
  const finding = await ctx.prisma.finding.findFirst({ where: { id: row.findingId, organizationId: row.organizationId } });
  const attempt = row.attemptCount + 1;
  if (!target || target.deletedAt || target.organizationId !== row.organizationId) {
    return finish(ctx, row, null, attempt, 'unsafe_url', { status: 'failed', error: 'the issue export target was revoked' });
  }
  if (!finding) return finish(ctx, row, target, attempt, 'render_error', { status: 'failed', error: 'the finding no longer exists' });

  const link = `${ctx.config.publicBaseUrl}/assessments/${encodeURIComponent(finding.assessmentId)}#finding-${encodeURIComponent(finding.id)}`;
  const config: IssueTarget = { kind: target.kind as IssueTrackerKind, baseUrl: target.baseUrl, repository: target.repository, projectKey: target.projectKey, issueType: target.issueType };
  const credentials = JSON.parse(unseal(target.credentialsEnc, ctx.config.encryptionKey)) as IssueCredentials;
  const request = issueCreateRequest(config, credentials, { ...finding, link });

  const check = await resolveWebhookTarget(request.url, { allowedHosts: ctx.config.webhooks.allowedHosts, lookup: ctx.lookup });
  if (!check.ok && check.reason !== 'unresolvable') {
    return finish(ctx, row, target, attempt, 'unsafe_url', { status: 'failed', error: `unsafe url: ${describeTargetRejection(check.reason)}` });
  }
  if (credentialBoundElsewhere(target.credentialDestination, target.baseUrl)) {
    const error = `the stored credentials were given for ${target.credentialDestination}, not ${credentialDestination(target.baseUrl) ?? 'this URL'}: give them again with the URL`;
    return finish(ctx, row, target, attempt, 'unsafe_url', { status: 'failed', error });
  }
  const result: HttpResult = check.ok
    ? await ctx.post({ url: check.target.url, address: check.target.address, family: check.target.family, headers: request.headers, body: request.body, responseLimitBytes: ISSUE_RESPONSE_LIMIT_BYTES })
    : { response: null, body: Buffer.alloc(0), error: new Error('the host does not resolve'), durationMs: 0 };
  const outcome = outcomeOfHttp(result);
  if (outcome === 'success') {
    try {
      const created = parseCreatedIssue(config, result.body);
      return finish(ctx, row, target, attempt, outcome, { status: 'succeeded', ...created });
    } catch (err) {
      return finish(ctx, row, target, attempt, 'http_error', { status: 'failed', error: `unexpected answer: ${(err as Error).message}` });
    }
  }
  return finish(ctx, row, target, attempt, outcome, decide(ctx, attempt, result));
}

/** Retry 5xx, 408, 429 and network errors on the webhook backoff (Retry-After honoured); fail anything else. */
function decide(ctx: DeliveryContext, attempt: number, result: HttpResult): Finish {
  const status = result.response?.status ?? null;
  const error = status !== null ? `HTTP ${status}${trackerMessage(result)}` : `${result.error?.message ?? 'no response'}`;
  if (status !== null && status < 500 && !RETRIED_STATUSES.has(status)) return { status: 'failed', error };
  const retryAfter = result.response?.headers['retry-after'];
  const decision = nextAttempt(attempt, { status, retryAfter: typeof retryAfter === 'string' ? retryAfter : null, now: ctx.clock.now() }, webhookRetryPolicy(ctx.config));
  if (decision.action === 'stop') return { status: 'failed', error: `${decision.detail}; last: ${error}` };
  return { status: 'pending', error, delayMs: decision.delayMs };
}

/** The tracker's own words (GitHub `message`, Jira `errorMessages`/`errors`), shortened: they say what to fix. */
function trackerMessage(result: HttpResult): string {
  try {
    const body = JSON.parse(result.body.toString('utf8')) as { message?: unknown; errorMessages?: unknown[]; errors?: Record<string, unknown> };
    const words = [body.message, ...(body.errorMessages ?? []), ...Object.values(body.errors ?? {})].filter((w) => typeof w === 'string');
    return words.length > 0 ? `: ${words.join('; ').slice(0, 300)}` : '';
  } catch {
    return '';
  }
}

async function finish(
  ctx: DeliveryContext,
  row: FindingIssueExport,
  target: IssueExportTarget | null,
  attempt: number,
  outcome: AttemptOutcome,
  end: Finish,
): Promise<DeliveryResult> {
  const now = ctx.clock.now();
  const exportUpdate =
    end.status === 'succeeded'
      ? { status: 'succeeded', externalKey: end.key, externalUrl: end.url, lastError: null, nextAttemptAt: null, completedAt: now }
      : end.status === 'failed'
        ? { status: 'failed', lastError: end.error, nextAttemptAt: null, completedAt: now }
        : { status: 'pending', lastError: end.error, nextAttemptAt: new Date(now.getTime() + (end.delayMs ?? 0)) };
  const targetUpdate = end.status === 'succeeded' ? { lastSuccessAt: now } : { lastError: end.error, lastErrorAt: now };
  await ctx.prisma.$transaction([
    // The attempt count guards against a second worker recording the same attempt.
    ctx.prisma.findingIssueExport.updateMany({ where: { id: row.id, attemptCount: row.attemptCount }, data: { ...exportUpdate, attemptCount: attempt } }),
    ...(target ? [ctx.prisma.issueExportTarget.update({ where: { id: target.id }, data: targetUpdate })] : []),
  ]);
  ctx.logger.info('Issue export attempt', { export_id: row.id, attempt, outcome, status: end.status });
  if (end.status === 'pending') throw new RetryableDeliveryError(`Issue export attempt ${attempt} failed (${end.error})`, end.delayMs ?? 0);
  return { status: end.status, attempt, outcome };
}
