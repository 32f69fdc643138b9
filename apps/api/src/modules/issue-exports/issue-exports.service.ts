// Issue exports: GitHub Issues and Jira targets (credentials sealed, write-only), and the export of a finding to
// one of them. The export itself is a job of the worker on the delivery queue (apps/worker/src/issue-export.ts):
// the same transport, URL-safety rule, retries and backoff as webhook deliveries.
import { credentialDestination, GITHUB_API_URL, type IssueTrackerKind } from '@svc/webhooks';
import { newId, scopedTo, seal, type FindingIssueExport, type IssueExportTarget, type Scoped, type Tx } from '@svc/db';
import { describeTargetRejection, resolveWebhookTarget } from '@svc/net';
import { enqueueIssueExport } from '@svc/queue';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, notFound, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { requireFindingAccess, requireStillMayChangeFinding } from '../findings/finding-access';
import { recordAs, type Acting } from '../audit/audit.context';
import type { ConfirmSensitiveChange } from '../auth/reauthentication';
import { credentialsRebound, destinationChange, refuseCredentialLeftBehind } from '../../http/credential-binding';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';

export interface IssueTargetInput {
  kind?: IssueTrackerKind;
  name?: string;
  base_url?: string;
  repository?: string;
  token?: string;
  project_key?: string;
  issue_type?: string;
  email?: string;
  api_token?: string;
}

interface Tenant {
  organizationId: string;
}

const GITHUB_ONLY = ['repository', 'token'] as const;
const JIRA_ONLY = ['project_key', 'issue_type', 'email', 'api_token'] as const;
const DEFAULT_JIRA_ISSUE_TYPE = 'Bug';

export function presentIssueTarget(t: IssueExportTarget) {
  return {
    id: t.id,
    name: t.name,
    kind: t.kind as IssueTrackerKind,
    base_url: t.baseUrl,
    repository: t.repository,
    project_key: t.projectKey,
    issue_type: t.issueType,
    has_credentials: t.credentialsEnc !== '',
    last_success_at: t.lastSuccessAt?.toISOString() ?? null,
    last_error: t.lastError,
    last_error_at: t.lastErrorAt?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
  };
}

/** A customer-configured URL (GitHub Enterprise API base, Jira site) passes the webhooks' public-address rule. */
async function checkedUrl(deps: AppDeps, url: string): Promise<string> {
  const check = await resolveWebhookTarget(url, { allowedHosts: deps.config.webhooks.allowedHosts, dns: deps.config.webhooks.dns });
  if (!check.ok) throw unprocessable(`Issue tracker URL refused: ${describeTargetRejection(check.reason)}.`);
  return check.target.url.toString().replace(/\/+$/, '');
}

function refuseOtherTrackerFields(input: IssueTargetInput, kind: IssueTrackerKind): void {
  const foreign = (kind === 'github' ? JIRA_ONLY : GITHUB_ONLY).filter((field) => input[field] !== undefined);
  if (foreign.length > 0) throw unprocessable(`A ${kind} target has no ${foreign.join(', ')}.`);
}

/** The credentials sealed as one value when the input carries them, undefined otherwise. */
function sealedCredentials(deps: AppDeps, input: IssueTargetInput, kind: IssueTrackerKind): string | undefined {
  if (kind === 'github') return input.token === undefined ? undefined : seal(JSON.stringify({ token: input.token }), deps.config.encryptionKey);
  if (input.api_token === undefined) return undefined;
  return seal(JSON.stringify({ email: input.email, api_token: input.api_token }), deps.config.encryptionKey);
}

async function toColumns(deps: AppDeps, input: IssueTargetInput, kind: IssueTrackerKind) {
  refuseOtherTrackerFields(input, kind);
  const credentialsEnc = sealedCredentials(deps, input, kind);
  return {
    ...(input.name !== undefined && { name: input.name }),
    ...(input.base_url !== undefined && { baseUrl: await checkedUrl(deps, input.base_url) }),
    ...(input.repository !== undefined && { repository: input.repository }),
    ...(input.project_key !== undefined && { projectKey: input.project_key }),
    ...(input.issue_type !== undefined && { issueType: input.issue_type }),
    ...(credentialsEnc !== undefined && { credentialsEnc }),
  };
}

const liveTargets = { deletedAt: null };

/** Public facts of a change for the audit log: field names and non-secret values, never a credential. */
function auditedInput(input: IssueTargetInput) {
  return {
    fields: Object.keys(input).filter((k) => input[k as keyof IssueTargetInput] !== undefined).sort(),
    ...(input.name !== undefined && { name: input.name }),
    ...(input.kind !== undefined && { kind: input.kind }),
    ...(input.base_url !== undefined && { base_url: input.base_url }),
    ...(input.repository !== undefined && { repository: input.repository }),
    ...(input.project_key !== undefined && { project_key: input.project_key }),
    ...((input.token !== undefined || input.api_token !== undefined) && { credentials_changed: 'replaced' }), // not `credentials`: the audit redaction drops such a key
  };
}

export async function createIssueTarget(deps: AppDeps, tenant: Tenant, input: IssueTargetInput, by: Acting, confirm: ConfirmSensitiveChange) {
  const kind = input.kind!;
  const columns = await toColumns(deps, input, kind);
  // Where the organization's findings will be sent, with credentials to post them: sudo mode (reauthentication.ts).
  await confirm('issue_target_create');
  const target = await scopedTo(deps.prisma, tenant).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'issue_exports:configure', 'Configuring issue trackers');
    const created = await tx.issueExportTarget.create({
      data: {
        id: newId('iexp'),
        organizationId: tenant.organizationId,
        kind,
        name: columns.name!,
        baseUrl: columns.baseUrl ?? GITHUB_API_URL,
        credentialsEnc: columns.credentialsEnc!,
        credentialDestination: credentialDestination(columns.baseUrl ?? GITHUB_API_URL),
        ...(kind === 'jira' && { issueType: DEFAULT_JIRA_ISSUE_TYPE }),
        ...columns,
      },
    });
    await recordAs(tx, by.principal, by.meta, deps.clock.now(), {
      action: 'issue_export_target.created',
      target: { type: 'issue_export_target', id: created.id },
      metadata: auditedInput(input),
    });
    return created;
  }, RECHECKED_TRANSACTION);
  return presentIssueTarget(target);
}

export async function findIssueTarget(deps: AppDeps, tenant: Tenant, id: string): Promise<IssueExportTarget> {
  const target = await scopedTo(deps.prisma, tenant).issueExportTarget.findFirst({ where: { id, ...liveTargets } });
  if (!target) throw notFound('Issue export target');
  return target;
}

export async function listIssueTargets(deps: AppDeps, tenant: Tenant, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, tenant).issueExportTarget.findMany({ ...args, where: { ...args.where, ...liveTargets } });
  return toPage(rows, query, presentIssueTarget);
}

/** The tracker's credential as the request names it: GitHub's token, Jira's API token (with its e-mail). */
function credentialField(current: IssueExportTarget, input: IssueTargetInput) {
  if (current.kind === 'github') return { field: 'token', stored: current.credentialsEnc !== '', supplied: input.token !== undefined };
  return { field: 'email and api_token', stored: current.credentialsEnc !== '', supplied: input.api_token !== undefined };
}

/**
 * Whether the change sends the target's findings somewhere else: another tracker URL (compared as stored, normalised
 * by checkedUrl: the stored URL in another spelling is no new destination), another repository or another project.
 */
function changesDestination(current: IssueExportTarget, columns: Awaited<ReturnType<typeof toColumns>>): boolean {
  return (
    (columns.baseUrl !== undefined && columns.baseUrl !== current.baseUrl) ||
    (columns.repository !== undefined && columns.repository !== current.repository) ||
    (columns.projectKey !== undefined && columns.projectKey !== current.projectKey)
  );
}

export async function updateIssueTarget(
  deps: AppDeps,
  tenant: Tenant,
  id: string,
  input: IssueTargetInput,
  by: Acting,
  confirm: ConfirmSensitiveChange,
) {
  const current = await findIssueTarget(deps, tenant, id);
  refuseCredentialLeftBehind('base_url', { url: current.baseUrl, boundTo: current.credentialDestination }, input.base_url, [credentialField(current, input)]);
  const columns = await toColumns(deps, input, current.kind as IssueTrackerKind);
  // A new destination for the target's findings: sudo mode (the name, issue type and credentials do not ask).
  if (changesDestination(current, columns)) await confirm('issue_target_destination_change');
  // A new URL or credential (re)binds the credentials to the URL's destination; the worker sends them nowhere else.
  const rebinds = columns.baseUrl !== undefined || columns.credentialsEnc !== undefined;
  const updated = await scopedTo(deps.prisma, tenant).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'issue_exports:configure', 'Configuring issue trackers');
    // Only over the destination and credential checked above: a concurrent change of any makes this request start over.
    const { count } = await tx.issueExportTarget.updateMany({
      where: {
        id,
        ...liveTargets,
        baseUrl: current.baseUrl,
        repository: current.repository,
        projectKey: current.projectKey,
        credentialsEnc: current.credentialsEnc,
      },
      data: { ...columns, ...(rebinds && { credentialDestination: credentialDestination(columns.baseUrl ?? current.baseUrl) }) },
    });
    if (count !== 1) throw conflict('The target changed while this request ran; read it again and retry.');
    const row = await tx.issueExportTarget.findUniqueOrThrow({ where: { id } });
    await recordAs(tx, by.principal, by.meta, deps.clock.now(), {
      action: 'issue_export_target.updated',
      target: { type: 'issue_export_target', id },
      metadata: {
        kind: current.kind,
        ...auditedInput(input),
        ...destinationChange(current.baseUrl, columns.baseUrl),
        ...credentialsRebound(current.credentialDestination, row.credentialDestination, row.credentialsEnc !== ''),
      },
    });
    return row;
  }, RECHECKED_TRANSACTION);
  return presentIssueTarget(updated);
}

/** A revoked target takes no new exports and its pending ones fail; exported issues keep their links. */
export async function revokeIssueTarget(deps: AppDeps, tenant: Tenant, id: string, by: Acting): Promise<void> {
  const target = await findIssueTarget(deps, tenant, id);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, tenant).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'issue_exports:configure', 'Revoking issue trackers');
    await tx.issueExportTarget.update({ where: { id }, data: { deletedAt: now, credentialsEnc: '' } });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'issue_export_target.revoked',
      target: { type: 'issue_export_target', id },
      metadata: { kind: target.kind, name: target.name },
    });
  }, RECHECKED_TRANSACTION);
}

export function presentIssueExport(e: FindingIssueExport, target: Pick<IssueExportTarget, 'name' | 'kind'> | null) {
  return {
    id: e.id,
    finding_id: e.findingId,
    target_id: e.targetId,
    target_name: target?.name ?? null,
    kind: (target?.kind as IssueTrackerKind | undefined) ?? null,
    status: e.status as 'pending' | 'succeeded' | 'failed',
    attempt_count: e.attemptCount,
    external_key: e.externalKey,
    external_url: e.externalUrl,
    last_error: e.lastError,
    next_attempt_at: e.nextAttemptAt?.toISOString() ?? null,
    completed_at: e.completedAt?.toISOString() ?? null,
    created_at: e.createdAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
  };
}

/**
 * Exports a finding to a target. Idempotent per (finding, target): an export that succeeded is returned as it is
 * (200, no second issue); a pending one is returned and its job enqueued again (a no-op while the job exists, a
 * recovery when its enqueue was lost); a failed one starts over with a fresh set of attempts. A new one is 202.
 */
export async function exportFinding(deps: AppDeps, by: Acting, findingId: string, targetId: string) {
  const { principal } = by;
  const finding = await requireFindingAccess(deps, principal, findingId, 'read');
  const target = await findIssueTarget(deps, principal, targetId);
  const { row, existing } = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // Demoted, or their read access taken away, while the request ran: nothing is filed for them (own-role.ts).
    await requireStillMayChangeFinding(tx, principal, finding, { scope: 'findings:export_issue', action: 'Exporting findings to issue trackers', need: 'read' });
    const stored = await claimExport(tx, principal.organizationId, finding.id, target.id);
    // The tracker still live, and held so until the commit: a revocation (an UPDATE of its row, after its revoker's
    // membership) either waits and then fails this export as it fails every pending one, or went first: 404, and
    // what claimExport wrote rolls back. After the export's row, as the worker takes them (finish: the export's row,
    // then the target's): before it, this waited for the worker's update of the export while the worker waited for it.
    await holdLiveTarget(tx, principal.organizationId, target.id);
    // Audited when this request files an export: a new one or a failed one started over, not one pending or done.
    if (stored.existing === null || stored.existing.status === 'failed') {
      await recordAs(tx, principal, by.meta, deps.clock.now(), {
        action: 'finding.issue_exported',
        target: { type: 'finding', id: finding.id },
        metadata: { export_id: stored.row.id, target_id: target.id, kind: target.kind, retry: stored.existing !== null },
      });
    }
    return stored;
  }, RECHECKED_TRANSACTION);
  if (existing?.status === 'succeeded') return { status: 200, body: presentIssueExport(existing, target) };
  await enqueue(deps, row);
  return { status: existing?.status === 'pending' ? 200 : 202, body: presentIssueExport(row, target) };
}

/** The target's row, share-locked until the commit; 404 when it was revoked (or never was) meanwhile. */
async function holdLiveTarget(tx: Scoped<Tx>, organizationId: string, targetId: string): Promise<void> {
  // Raw SQL is not scoped: the organization is named here.
  const rows = await tx.$queryRaw<unknown[]>`
    SELECT id FROM issue_export_targets
     WHERE id = ${targetId} AND organization_id = ${organizationId} AND deleted_at IS NULL
       FOR SHARE`;
  if (rows.length === 0) throw notFound('Issue export target');
}

/**
 * The export of (finding, target) to run: a new one, a failed one started over (pending again, fresh attempts), or the
 * one pending or succeeded as it is; `existing` is the row as it was (null when new). Two exports at once: the unique
 * (finding, target) lets one row in and the other waits for it and then takes it as existing (one issue, one entry).
 */
async function claimExport(tx: Scoped<Tx>, organizationId: string, findingId: string, targetId: string): Promise<{ row: FindingIssueExport; existing: FindingIssueExport | null }> {
  // Raw SQL is not scoped: the organization is named here.
  const inserted = await tx.$queryRaw<Array<{ id: string }>>`
    INSERT INTO finding_issue_exports (id, organization_id, finding_id, target_id, updated_at)
    VALUES (${newId('iexj')}, ${organizationId}, ${findingId}, ${targetId}, now())
    ON CONFLICT (finding_id, target_id) DO NOTHING
    RETURNING id`;
  const pair = { findingId, targetId };
  if (inserted.length) return { row: await tx.findingIssueExport.findFirstOrThrow({ where: pair }), existing: null };
  const existing = await tx.findingIssueExport.findFirstOrThrow({ where: pair });
  if (existing.status !== 'failed') return { row: existing, existing };
  const restarted = await tx.findingIssueExport.updateMany({
    where: { id: existing.id, status: 'failed' },
    data: { status: 'pending', attemptCount: 0, lastError: null, nextAttemptAt: null, completedAt: null },
  });
  const row = await tx.findingIssueExport.findFirstOrThrow({ where: pair });
  // Started over meanwhile by another export: this one found it pending.
  return { row, existing: restarted.count ? existing : row };
}

async function enqueue(deps: AppDeps, row: FindingIssueExport): Promise<void> {
  try {
    await enqueueIssueExport(deps.deliveryQueue, row.id, Math.max(1, deps.config.webhooks.maxAttempts - row.attemptCount));
  } catch (err) {
    deps.logger.warn('Enqueueing an issue export failed; exporting again re-enqueues it', {
      export_id: row.id,
      error: err instanceof Error ? err.message : String(err),
    });
  }
}

export async function listFindingExports(deps: AppDeps, principal: Principal, findingId: string) {
  const finding = await requireFindingAccess(deps, principal, findingId, 'read');
  const db = scopedTo(deps.prisma, principal);
  const rows = await db.findingIssueExport.findMany({ where: { findingId: finding.id }, orderBy: { id: 'asc' } });
  const targets = await db.issueExportTarget.findMany({ where: { id: { in: rows.map((r) => r.targetId) } }, select: { id: true, name: true, kind: true } });
  const byId = new Map(targets.map((t) => [t.id, t]));
  return { data: rows.map((r) => presentIssueExport(r, byId.get(r.targetId) ?? null)) };
}
