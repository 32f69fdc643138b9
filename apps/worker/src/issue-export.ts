// The processor of an issue export job (a job named `issue-export` on the delivery queue): one attempt at creating
// the finding's issue in its tracker, through the worker's one transport (URL re-checked, connection pinned to the
// checked address, pooled). 2xx records the issue's key and URL on the export; 429 and 5xx (and network errors)
// are retried on the webhook backoff, honouring Retry-After; any other answer, an unsafe URL or a revoked target
// fails the export. The tracker's status is kept on the target (last success, last error).
//
// Exactly one issue per export: the created issue carries the export's marker, and the time of the first create
// request is recorded before that request is sent. Every later attempt (a retry after a timeout, a 5xx or a 2xx that
// could not be read, a job replayed after its worker died, an export started over) first asks the tracker for an
// issue with the marker and adopts it rather than creating a second one. Two runs of one export may overlap (a job
// taken over by another worker while its first run still waits for the tracker): a create request is claimed in the
// statement that records it, and holds off any other until its answer plus the tracker's search lag (`quiet until`);
// a run that cannot claim sends nothing and looks again after that long, when the other's issue can be found.
import { resolveWebhookTarget, describeTargetRejection } from '@svc/net';
import { nextAttempt } from '@svc/domain';
import { unseal, type Finding, type FindingIssueExport, type IssueExportTarget } from '@svc/db';
import {
  credentialBoundElsewhere,
  credentialDestination,
  GITHUB_LOOKUP_MAX_PAGES,
  githubMarkerSearchRequest,
  issueCreateRequest,
  issueLookupRequest,
  parseCreatedIssue,
  readGithubMarkerSearch,
  readIssueLookup,
  type CreatedIssue,
  type IssueCredentials,
  type IssueRequest,
  type IssueTarget,
  type IssueTrackerKind,
} from '@svc/webhooks';
import { freeSlot, takeSlot, type DeliveryContext, type DeliveryResult } from './deliver';
import { outcomeOfHttp, type AttemptOutcome } from './http/outcome';
import type { HttpResult } from './http/post';
import { RetryableDeliveryError, webhookRetryPolicy } from './retry';

/** Trackers answer with the created issue (GitHub's is several KiB): enough of it to read its number and URL. */
const ISSUE_RESPONSE_LIMIT_BYTES = 256 * 1024;
/** A page of GitHub issues with their bodies (30 of up to 65,536 characters each), or a Jira search answer. */
const LOOKUP_RESPONSE_LIMIT_BYTES = 4 * 1024 * 1024;
const RETRIED_STATUSES = new Set([408, 429]);
/** How long after a create request an issue may still not show in the tracker's lookups (Jira's search lags). */
const TRACKER_SEARCH_LAG_MS = 10_000;

type Finish = { status: 'succeeded'; key: string; url: string } | { status: 'failed' | 'pending'; error: string; delayMs?: number };
/** What went wrong, for the retry decision: no status is a failure whose outcome is unknown (always retried). */
type Failure = { status: number | null; error: string; retryAfter: string | null };
type Sent = { unsafe: string } | { result: HttpResult };
type NotSent = { notSent: string };
type Lookup = { found: CreatedIssue } | { found: null } | { unsafe: string } | { failure: Failure; outcome: AttemptOutcome };

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
  // The tracker is isolated as a webhook endpoint is (its own in-flight cap and breaker, keyed by the target): one
  // that never answers holds a few of the worker's slots, not all of them, and every organization's deliveries go on.
  const held = await admitExport(ctx, target.id, row);
  if (held) return held;
  const started = performance.now();
  let outcome: AttemptOutcome | undefined;
  try {
    const result = await attemptExport(ctx, row, target, finding, attempt);
    if ('outcome' in result) outcome = result.outcome;
    return result;
  } catch (err) {
    if (err instanceof RetryableDeliveryError) outcome = err.outcome as AttemptOutcome | undefined;
    throw err;
  } finally {
    await releaseExportSlot(ctx, target.id, row.id, outcome, performance.now() - started);
  }
}

/** One attempt at the export, its slot taken: looks for an earlier attempt's issue, else creates it. */
async function attemptExport(
  ctx: DeliveryContext,
  row: FindingIssueExport,
  target: IssueExportTarget,
  finding: Finding,
  attempt: number,
): Promise<DeliveryResult> {
  const config: IssueTarget = { kind: target.kind as IssueTrackerKind, baseUrl: target.baseUrl, repository: target.repository, projectKey: target.projectKey, issueType: target.issueType };
  // The credentials go only where they were given for: neither a lookup nor a create follows a moved base_url.
  if (credentialBoundElsewhere(target.credentialDestination, target.baseUrl)) {
    const error = `the stored credentials were given for ${target.credentialDestination}, not ${credentialDestination(target.baseUrl) ?? 'this URL'}: give them again with the URL`;
    return finish(ctx, row, target, attempt, 'unsafe_url', { status: 'failed', error });
  }
  const credentials = JSON.parse(unseal(target.credentialsEnc, ctx.config.encryptionKey)) as IssueCredentials;

  if (row.createSentAt) {
    const lookup = await lookForExportIssue(ctx, config, credentials, row.id, row.createSentAt);
    if ('unsafe' in lookup) return finish(ctx, row, target, attempt, 'unsafe_url', { status: 'failed', error: lookup.unsafe });
    if ('failure' in lookup) {
      return finish(ctx, row, target, attempt, lookup.outcome, decide(ctx, attempt, { ...lookup.failure, error: `looking for the issue: ${lookup.failure.error}` }));
    }
    if (lookup.found) {
      ctx.logger.info('Issue export adopted the issue an earlier attempt created', { export_id: row.id, attempt, key: lookup.found.key });
      return finish(ctx, row, target, attempt, 'success', { status: 'succeeded', ...lookup.found });
    }
  }

  const link = `${ctx.config.publicBaseUrl}/assessments/${encodeURIComponent(finding.assessmentId)}#finding-${encodeURIComponent(finding.id)}`;
  const request = issueCreateRequest(config, credentials, { ...finding, link }, row.id);
  const sent = await send(ctx, request, ISSUE_RESPONSE_LIMIT_BYTES, () => claimCreate(ctx, row));
  if ('unsafe' in sent) return finish(ctx, row, target, attempt, 'unsafe_url', { status: 'failed', error: sent.unsafe });
  if ('notSent' in sent) {
    // Not an attempt of this run's (nothing recorded: the other run records its own): the job looks again later.
    ctx.logger.info('Issue export: another run sent its create request moments ago', { export_id: row.id });
    throw new RetryableDeliveryError(sent.notSent, await msUntilQuiet(ctx, row.id));
  }
  const { result } = sent;
  const outcome = outcomeOfHttp(result);
  const quiet = { createQuietUntil: quietAfterAnswer(ctx, result) };
  if (outcome !== 'success') return finish(ctx, row, target, attempt, outcome, decide(ctx, attempt, failureOf(result)), quiet);
  try {
    return finish(ctx, row, target, attempt, outcome, { status: 'succeeded', ...parseCreatedIssue(config, result.body) });
  } catch (err) {
    // The tracker said yes but the answer cannot be read: the issue probably exists. The next attempt looks for it.
    const failure = { status: null, error: `unexpected answer: ${(err as Error).message}`, retryAfter: null };
    return finish(ctx, row, target, attempt, 'http_error', decide(ctx, attempt, failure), quiet);
  }
}

/**
 * Takes an isolation slot on the target for this export, or says until when its job waits (not an attempt). Behind an
 * open breaker, as a delivery: once held back past the retry window since its last attempt (or its start), it fails.
 */
async function admitExport(ctx: DeliveryContext, targetId: string, row: FindingIssueExport): Promise<DeliveryResult | null> {
  if (!ctx.isolation) return null;
  const now = ctx.clock.now();
  const slot = await takeSlot(ctx, { id: targetId, rateLimit: null }, row.id, row.updatedAt, now, exportSlotMs(ctx));
  if (slot.transition) ctx.logger.info('Issue tracker circuit breaker moved', { target_id: targetId, state: slot.transition });
  if (slot.admitted) return null;
  const { reason, decision } = slot;
  if (decision.action === 'postpone') return { status: 'postponed', reason, until: decision.until, subscriptionId: targetId };
  await ctx.prisma.findingIssueExport.updateMany({
    where: { id: row.id, status: 'pending', attemptCount: row.attemptCount },
    data: { status: 'failed', lastError: decision.detail, nextAttemptAt: null, completedAt: now },
  });
  ctx.logger.info('Issue export held back past its retry window: failed', { export_id: row.id, target_id: targetId });
  return { status: 'skipped', reason: decision.detail };
}

/**
 * How long an export run may hold its slot: its every request (GitHub's lookup pages, its search, the create) may
 * take its address check's DNS tries and then the timeout, plus a margin. Shorter, a run still reading lookup pages
 * would lose its slot to the cap and let more runs in than the cap allows.
 */
function exportSlotMs(ctx: DeliveryContext): number {
  const { timeoutMs, dns } = ctx.config.webhooks;
  // c-ares doubles its timeout at each try, and tries each name server (packages/net DnsSettings).
  const dnsMs = dns.timeoutMs * (2 ** dns.tries - 1) * Math.max(1, dns.servers.length);
  return (GITHUB_LOOKUP_MAX_PAGES + 2) * (dnsMs + timeoutMs) + 5_000;
}

/** Frees the export's slot with the attempt's outcome (none: no request was made), waking the exports it held back. */
async function releaseExportSlot(ctx: DeliveryContext, targetId: string, exportId: string, outcome: AttemptOutcome | undefined, durationMs: number): Promise<void> {
  if (!ctx.isolation) return;
  await freeSlot(ctx, targetId, exportId, outcome, durationMs, async (release) => {
    ctx.logger.warn('Issue tracker circuit breaker moved', { target_id: targetId, state: release.transition, outcome });
  });
}

/**
 * Sends a request to the tracker through the transport, the URL checked first. `claim` runs once the request is
 * certain to go out (the check passed), and before it does: false keeps it from going out.
 */
function send(ctx: DeliveryContext, request: IssueRequest, responseLimitBytes: number): Promise<Sent>;
function send(ctx: DeliveryContext, request: IssueRequest, responseLimitBytes: number, claim: () => Promise<boolean>): Promise<Sent | NotSent>;
async function send(ctx: DeliveryContext, request: IssueRequest, responseLimitBytes: number, claim?: () => Promise<boolean>): Promise<Sent | NotSent> {
  const check = await resolveWebhookTarget(request.url, { allowedHosts: ctx.config.webhooks.allowedHosts, lookup: ctx.lookup, dns: ctx.config.webhooks.dns });
  if (!check.ok && check.reason !== 'unresolvable') return { unsafe: `unsafe url: ${describeTargetRejection(check.reason)}` };
  if (!check.ok) return { result: { response: null, body: Buffer.alloc(0), error: new Error('the host does not resolve'), durationMs: 0 } };
  if (claim && !(await claim())) return { notSent: 'another run of this export sent its create request moments ago' };
  const { url, address, family } = check.target;
  return { result: await ctx.post({ method: request.method, url, address, family, headers: request.headers, body: request.body, responseLimitBytes }) };
}

/** A create request in flight (at most the request timeout), then the tracker's search lag. */
function inFlightQuietMs(ctx: DeliveryContext): number {
  return ctx.config.webhooks.timeoutMs + TRACKER_SEARCH_LAG_MS;
}

/**
 * After the create request's answer: until when its issue may still not show in lookups. None when the tracker said
 * it did not take the request (a 4xx: refused, rate-limited); the search lag after a 5xx, a timeout or an unreadable
 * 2xx, whose issue may exist.
 */
function quietAfterAnswer(ctx: DeliveryContext, result: HttpResult): Date | null {
  const status = result.response?.status;
  if (status !== undefined && status >= 400 && status < 500) return null;
  return new Date(ctx.clock.now().getTime() + TRACKER_SEARCH_LAG_MS);
}

/**
 * Claims the create request, committed before it leaves (a worker that dies after it leaves the mark behind): false
 * while another run's request is quiet (in flight, or its issue possibly not findable yet), and false when a create
 * request went out since this run read the row (it skipped the lookup that would find that one's issue).
 */
async function claimCreate(ctx: DeliveryContext, row: FindingIssueExport): Promise<boolean> {
  const now = ctx.clock.now();
  const quietUntil = new Date(now.getTime() + inFlightQuietMs(ctx));
  const claimed = await ctx.prisma.$executeRaw`
    UPDATE finding_issue_exports SET create_sent_at = COALESCE(create_sent_at, ${now}), create_quiet_until = ${quietUntil}
     WHERE id = ${row.id} AND status = 'pending' AND (create_quiet_until IS NULL OR create_quiet_until <= ${now})
       AND create_sent_at IS NOT DISTINCT FROM ${row.createSentAt}`;
  return claimed === 1;
}

/** How long until the other run's create request is quiet (its issue findable), at most inFlightQuietMs. */
async function msUntilQuiet(ctx: DeliveryContext, exportId: string): Promise<number> {
  const row = await ctx.prisma.findingIssueExport.findUnique({ where: { id: exportId }, select: { createQuietUntil: true } });
  const left = (row?.createQuietUntil?.getTime() ?? 0) - ctx.clock.now().getTime();
  return Math.min(Math.max(left, 0), inFlightQuietMs(ctx));
}

/** Asks the tracker for the issue carrying the export's marker (see @svc/webhooks issueLookupRequest for how). */
async function lookForExportIssue(ctx: DeliveryContext, config: IssueTarget, credentials: IssueCredentials, exportId: string, since: Date): Promise<Lookup> {
  let found: CreatedIssue | null = null;
  for (let page = 1; page <= GITHUB_LOOKUP_MAX_PAGES; page++) {
    const query = { exportId, since, page };
    const sent = await send(ctx, issueLookupRequest(config, credentials, query), LOOKUP_RESPONSE_LIMIT_BYTES);
    if ('unsafe' in sent) return sent;
    const outcome = outcomeOfHttp(sent.result);
    if (outcome !== 'success') return { failure: failureOf(sent.result), outcome };
    let read;
    try {
      read = readIssueLookup(config, query, sent.result.body);
    } catch (err) {
      return { failure: { status: null, error: `unexpected answer: ${(err as Error).message}`, retryAfter: null }, outcome: 'http_error' };
    }
    // Pages run newest first: a later page's marked issue is older, and the oldest is the export's own.
    if (read.found) found = read.found;
    if (!read.nextPage) return { found };
  }
  if (found) return { found };
  if (config.kind === 'github') return searchGitHubFurtherBack(ctx, config, credentials, exportId, since);
  return { failure: { status: null, error: 'the tracker listed more issues than expected', retryAfter: null }, outcome: 'http_error' };
}

/** More issues since the first request than the list's pages hold: GitHub's search, whose lag is harmless this far back. */
async function searchGitHubFurtherBack(ctx: DeliveryContext, config: IssueTarget, credentials: IssueCredentials, exportId: string, since: Date): Promise<Lookup> {
  const sent = await send(ctx, githubMarkerSearchRequest(config, credentials, exportId, since), LOOKUP_RESPONSE_LIMIT_BYTES);
  if ('unsafe' in sent) return sent;
  const outcome = outcomeOfHttp(sent.result);
  if (outcome !== 'success') return { failure: failureOf(sent.result), outcome };
  try {
    const read = readGithubMarkerSearch(config, exportId, sent.result.body, since);
    // Never create after a search that could not finish: a second issue is what this is all about.
    if (read.found || read.complete) return { found: read.found };
    return { failure: { status: null, error: 'GitHub search results were incomplete', retryAfter: null }, outcome: 'http_error' };
  } catch (err) {
    return { failure: { status: null, error: `unexpected answer: ${(err as Error).message}`, retryAfter: null }, outcome: 'http_error' };
  }
}

function failureOf(result: HttpResult): Failure {
  const status = result.response?.status ?? null;
  const retryAfter = result.response?.headers['retry-after'];
  return {
    status,
    error: status !== null ? `HTTP ${status}${trackerMessage(result)}` : `${result.error?.message ?? 'no response'}`,
    retryAfter: typeof retryAfter === 'string' ? retryAfter : null,
  };
}

/** Retry 5xx, 408, 429 and failures without a status on the webhook backoff (Retry-After honoured); fail anything else. */
function decide(ctx: DeliveryContext, attempt: number, failure: Failure): Finish {
  const { status, error, retryAfter } = failure;
  if (status !== null && status < 500 && !RETRIED_STATUSES.has(status)) return { status: 'failed', error };
  const decision = nextAttempt(attempt, { status, retryAfter, now: ctx.clock.now() }, webhookRetryPolicy(ctx.config));
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
  /** This run's create request: until when another may not be sent (see claimCreate). */
  quiet: { createQuietUntil?: Date | null } = {},
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
    ctx.prisma.findingIssueExport.updateMany({ where: { id: row.id, attemptCount: row.attemptCount }, data: { ...exportUpdate, ...quiet, attemptCount: attempt } }),
    ...(target ? [ctx.prisma.issueExportTarget.update({ where: { id: target.id }, data: targetUpdate })] : []),
  ]);
  ctx.logger.info('Issue export attempt', { export_id: row.id, attempt, outcome, status: end.status });
  if (end.status === 'pending') throw new RetryableDeliveryError(`Issue export attempt ${attempt} failed (${end.error})`, end.delayMs ?? 0, outcome);
  return { status: end.status, attempt, outcome };
}
