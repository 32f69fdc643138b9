// Webhook subscriptions: create, read, update, soft-delete, rotate the signing secret, send a test event.
// Every function takes the LevelContext the route resolved, so one implementation serves all three levels.
import {
  EVENT_TYPES,
  PAYLOAD_FORMATS,
  SIGNATURE_SCHEMES,
  generateSigningSecret,
  isEventType,
  isPayloadFormat,
  isSignatureScheme,
  sentinelSchema,
  sentinelUrlProblem,
  credentialDestination,
} from '@svc/webhooks';
import { FINDING_STATUSES, SEVERITIES, isFindingStatus, isSeverity } from '@svc/domain';
import type { WebhookSubscription } from '@svc/db';
import { describeTargetRejection, resolveWebhookTarget } from '@svc/net';
import { outboxDeps, withOutbox } from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import { badRequest, conflict, forbidden, notFound, unprocessable } from '../../http/errors';
import { hasScope, type Scope } from '@svc/scopes';
import type { Principal } from '../../auth/principal';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, Prisma, scopedTo, type Scoped, type Tx } from '@svc/db';
import { seal } from '@svc/db';
import { recordAs, type Acting } from '../audit/audit.context';
import { confirmRoutingRole } from '../access/event-routing';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import { credentialsRebound, destinationChange, refuseCredentialLeftBehind } from '../../http/credential-binding';
import { subscriptionsOf, WEBHOOK_KIND, type LevelContext } from './levels';
import { refuseOperationalBelowOrganization } from './operational-events';
import type { ConfirmSensitiveChange } from '../auth/reauthentication';
import { lockOrganization } from '../organizations/organization-lock';

export const MAX_LIVE_SUBSCRIPTIONS = 25;

export interface SubscriptionInput {
  name?: string;
  url?: string;
  events?: string[];
  active?: boolean;
  severity_filter?: string[] | null;
  status_filter?: string[] | null;
  payload_format?: string;
  splunk_index?: string | null;
  authorization?: string | null;
  splunk_channel?: string | null;
  rate_limit?: number | null;
  azure_tenant_id?: string | null;
  azure_client_id?: string | null;
  azure_client_secret?: string | null;
  signature_scheme?: string;
  hec_ack?: boolean;
}

/** The API view of a subscription; the previous secret's expiry shows only while its grace period runs. */
export function presentSubscription(s: WebhookSubscription, now: Date) {
  const graceRunning = s.previousSecretExpiresAt !== null && s.previousSecretExpiresAt.getTime() > now.getTime();
  return {
    id: s.id,
    name: s.name,
    url: s.url,
    events: s.events,
    active: s.status !== 'disabled',
    status: s.status,
    severity_filter: s.hasSeverityFilter ? s.severityFilter : null,
    status_filter: s.hasStatusFilter ? s.statusFilter : null,
    payload_format: s.payloadFormat,
    splunk_index: s.splunkIndex,
    has_authorization: s.authorizationEnc !== null,
    splunk_channel: s.splunkChannel,
    hec_ack: s.hecAck,
    has_azure_credentials: s.azureCredentialsEnc !== null,
    signature_scheme: s.signatureScheme,
    level: s.level,
    project_id: s.projectId,
    assessment_id: s.assessmentId,
    previous_secret_expires_at: graceRunning ? s.previousSecretExpiresAt!.toISOString() : null,
    disabled_reason: s.status === 'disabled' ? s.disabledReason : null,
    rate_limit: s.rateLimit,
    // The worker's circuit breaker for this endpoint (docs/webhooks.md "Delivery isolation"); `until`: the next probe.
    breaker: { state: s.breakerState, until: s.breakerState === 'open' ? (s.breakerUntil?.toISOString() ?? null) : null },
    created_at: s.createdAt.toISOString(),
    updated_at: s.updatedAt.toISOString(),
  };
}

/** 422 naming the values of a list field that are outside its allowed list (events, filters). */
export function refuseOutside(values: string[] | null | undefined, allowed: readonly string[], ok: (v: string) => boolean, field: string) {
  const bad = (values ?? []).filter((v) => !ok(v));
  if (bad.length > 0) throw unprocessable(`${field} has values outside ${allowed.join(', ')}: ${bad.join(', ')}.`);
}

async function checkedUrl(deps: AppDeps, url: string): Promise<string> {
  const check = await resolveWebhookTarget(url, { allowedHosts: deps.config.webhooks.allowedHosts, dns: deps.config.webhooks.dns });
  if (!check.ok) throw unprocessable(`Webhook URL refused: ${describeTargetRejection(check.reason)}.`);
  return check.target.url.toString();
}

/** The Entra ID app credentials sealed as one value, null to remove them, undefined when not in the input. */
function sealedAzureCredentials(input: SubscriptionInput, key: Buffer): string | null | undefined {
  if (input.azure_client_secret === undefined) return undefined;
  if (input.azure_client_secret === null || !input.azure_tenant_id || !input.azure_client_id) return null;
  const credentials = { tenant_id: input.azure_tenant_id, client_id: input.azure_client_id, client_secret: input.azure_client_secret };
  return seal(JSON.stringify(credentials), key);
}

/** Format-specific rules on the subscription as it will be (the stored one merged with the input). */
function refuseFormatMismatch(input: SubscriptionInput, current: WebhookSubscription | null): void {
  const format = input.payload_format ?? current?.payloadFormat ?? 'service';
  const url = input.url ?? current?.url ?? '';
  if (format === 'microsoft_sentinel' && (input.url !== undefined || input.payload_format !== undefined)) {
    const problem = sentinelUrlProblem(url);
    if (problem) {
      throw unprocessable(
        `A microsoft_sentinel URL must be a Logs Ingestion URL, https://<endpoint>/dataCollectionRules/<dcr-immutable-id>/streams/<stream>?api-version=<version>: ${problem}.`,
      );
    }
  }
  if (input.azure_client_secret && format !== 'microsoft_sentinel') {
    throw unprocessable('azure_tenant_id, azure_client_id and azure_client_secret apply to payload_format microsoft_sentinel only.');
  }
  if (input.splunk_channel && format !== 'splunk_hec') {
    throw unprocessable('splunk_channel applies to payload_format splunk_hec only.');
  }
}

/** Indexer acknowledgement is asked on a HEC channel: hec_ack needs splunk_hec and a splunk_channel, as it will be. */
function refuseHecAckWithoutChannel(input: SubscriptionInput, current: WebhookSubscription | null): void {
  const hecAck = input.hec_ack ?? current?.hecAck ?? false;
  if (!hecAck) return;
  const format = input.payload_format ?? current?.payloadFormat ?? 'service';
  const channel = input.splunk_channel !== undefined ? input.splunk_channel : (current?.splunkChannel ?? null);
  if (format !== 'splunk_hec' || !channel) {
    throw unprocessable('hec_ack requires payload_format splunk_hec and a splunk_channel (indexer acknowledgement is per HEC channel); turn hec_ack off first to change either.');
  }
}

/** Validates the values (422) and maps them to columns; only the fields present in the input. */
async function toColumns(deps: AppDeps, input: SubscriptionInput, current: WebhookSubscription | null = null) {
  refuseOutside(input.events, EVENT_TYPES, isEventType, 'events');
  refuseOutside(input.severity_filter, SEVERITIES, isSeverity, 'severity_filter');
  refuseOutside(input.status_filter, FINDING_STATUSES, isFindingStatus, 'status_filter');
  if (input.payload_format !== undefined && !isPayloadFormat(input.payload_format)) {
    throw unprocessable(`payload_format must be one of ${PAYLOAD_FORMATS.join(', ')}.`);
  }
  if (input.signature_scheme !== undefined && !isSignatureScheme(input.signature_scheme)) {
    throw unprocessable(`signature_scheme must be one of ${SIGNATURE_SCHEMES.join(', ')}.`);
  }
  refuseFormatMismatch(input, current);
  refuseHecAckWithoutChannel(input, current);
  const key = deps.config.encryptionKey;
  const azureCredentialsEnc = sealedAzureCredentials(input, key);
  const url = input.url === undefined ? undefined : await checkedUrl(deps, input.url);
  // A new URL or credential (re)binds the credentials to the URL's destination; the worker sends them nowhere else.
  const rebinds = url !== undefined || input.authorization !== undefined || input.azure_client_secret !== undefined;
  return {
    ...(input.name !== undefined && { name: input.name }),
    ...(url !== undefined && { url }),
    ...(rebinds && { credentialDestination: credentialDestination(url ?? current!.url) }),
    ...(input.events !== undefined && { events: input.events }),
    ...(input.severity_filter !== undefined && {
      severityFilter: input.severity_filter ?? [],
      hasSeverityFilter: input.severity_filter !== null,
    }),
    ...(input.status_filter !== undefined && {
      statusFilter: input.status_filter ?? [],
      hasStatusFilter: input.status_filter !== null,
    }),
    ...(input.payload_format !== undefined && { payloadFormat: input.payload_format }),
    ...(input.splunk_index !== undefined && { splunkIndex: input.splunk_index }),
    ...(input.rate_limit !== undefined && { rateLimit: input.rate_limit }),
    ...(input.authorization !== undefined && {
      authorizationEnc: input.authorization === null ? null : seal(input.authorization, key),
    }),
    ...(input.splunk_channel !== undefined && { splunkChannel: input.splunk_channel }),
    ...(azureCredentialsEnc !== undefined && { azureCredentialsEnc }),
    ...(input.signature_scheme !== undefined && { signatureScheme: input.signature_scheme }),
    ...(input.hec_ack !== undefined && { hecAck: input.hec_ack }),
    ...(input.active === true && { status: 'active' as const, consecutiveFailures: 0, firstFailureAt: null, disabledReason: null }),
    ...(input.active === false && { status: 'disabled' as const, disabledReason: 'disabled by a user' }),
  };
}

/** The host of a webhook URL: its path and query may carry a receiver's token, so the audit log keeps only this. */
function urlHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '';
  }
}

/** Public facts about a subscription change for the audit log: field names and non-secret values only. */
function auditedInput(input: SubscriptionInput) {
  return {
    fields: Object.keys(input).filter((k) => input[k as keyof SubscriptionInput] !== undefined).sort(),
    ...(input.name !== undefined && { name: input.name }),
    ...(input.url !== undefined && { url_host: urlHost(input.url) }),
    ...(input.events !== undefined && { events: input.events }),
    ...(input.active !== undefined && { active: input.active }),
    ...(input.severity_filter !== undefined && { severity_filter: input.severity_filter }),
    ...(input.status_filter !== undefined && { status_filter: input.status_filter }),
    ...(input.payload_format !== undefined && { payload_format: input.payload_format }),
    ...(input.splunk_index !== undefined && { splunk_index: input.splunk_index }),
    // Only whether the receiver credential changed (a key named like a credential would be dropped by the redaction).
    ...(input.authorization !== undefined && { receiver_header: input.authorization === null ? 'removed' : 'set' }),
    ...(input.splunk_channel !== undefined && { splunk_channel: input.splunk_channel }),
    ...(input.rate_limit !== undefined && { rate_limit: input.rate_limit }),
    ...(input.azure_client_secret !== undefined && { azure_app: input.azure_client_secret === null ? 'removed' : 'set' }),
    ...(input.signature_scheme !== undefined && { signature_scheme: input.signature_scheme }),
    ...(input.hec_ack !== undefined && { hec_ack: input.hec_ack }),
  };
}

function levelOf(ctx: LevelContext) {
  return { level: ctx.level, project_id: ctx.projectId, assessment_id: ctx.assessmentId };
}

function refuseOverLimit(live: number): void {
  if (live >= MAX_LIVE_SUBSCRIPTIONS) {
    throw badRequest(`An organization may have at most ${MAX_LIVE_SUBSCRIPTIONS} webhook subscriptions; delete one first.`);
  }
}

export async function createSubscription(
  deps: AppDeps,
  ctx: LevelContext,
  input: SubscriptionInput,
  by: Acting,
  confirm: ConfirmSensitiveChange,
) {
  refuseOperationalBelowOrganization(input.events, ctx.level);
  const columns = await toColumns(deps, input);
  // The limit first (read again under the lock below): a request that would fail anyway does not ask for the password.
  refuseOverLimit(await scopedTo(deps.prisma, ctx).webhookSubscription.count({ where: { deletedAt: null, kind: WEBHOOK_KIND } }));
  // Where the organization's signed events go, and a secret to sign with: sudo mode (reauthentication.ts).
  await confirm('webhook_create');
  const secret = generateSigningSecret();
  const now = deps.clock.now();
  const subscription = await scopedTo(deps.prisma, ctx).$transaction(async (tx) => {
    // Serialises concurrent creations in one organization, so the limit cannot be overrun by a race. NO KEY UPDATE
    // (lockOrganization), not UPDATE: the organization's inserts (an audit entry of a role change that holds the
    // creator's membership, which confirmRoutingRole waits for) must not wait for it, or the two deadlock.
    await lockOrganization(tx, ctx.organizationId);
    await confirmRoutingRole(tx, by.principal);
    refuseOverLimit(await tx.webhookSubscription.count({ where: { deletedAt: null, kind: WEBHOOK_KIND } }));
    const created = await tx.webhookSubscription.create({
      data: {
        id: newId('whsub'),
        organizationId: ctx.organizationId,
        level: ctx.level,
        projectId: ctx.projectId,
        assessmentId: ctx.assessmentId,
        secretEnc: seal(secret, deps.config.encryptionKey),
        name: columns.name!,
        url: columns.url!,
        events: columns.events!,
        ...columns,
        configuredByUserId: by.principal.userId,
      },
    });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'webhook.subscription_created',
      target: { type: 'webhook_subscription', id: created.id },
      metadata: { ...levelOf(ctx), ...auditedInput(input) },
    });
    return created;
  }, RECHECKED_TRANSACTION);
  return { ...presentSubscription(subscription, deps.clock.now()), secret };
}

export async function findSubscription(deps: AppDeps, ctx: LevelContext, id: string): Promise<WebhookSubscription> {
  const subscription = await scopedTo(deps.prisma, ctx).webhookSubscription.findFirst({ where: { id, ...subscriptionsOf(ctx) } });
  if (!subscription) throw notFound('Webhook subscription');
  return subscription;
}

export async function listSubscriptions(deps: AppDeps, ctx: LevelContext, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, ctx).webhookSubscription.findMany({ ...args, where: { ...args.where, ...subscriptionsOf(ctx) } });
  const now = deps.clock.now();
  return toPage(rows, query, (row) => presentSubscription(row, now));
}

export async function updateSubscription(
  deps: AppDeps,
  ctx: LevelContext,
  id: string,
  input: SubscriptionInput,
  by: Acting,
  confirm: ConfirmSensitiveChange,
) {
  const current = await findSubscription(deps, ctx, id);
  const before = current;
  refuseOperationalBelowOrganization(input.events, current.level);
  refuseCredentialLeftBehind('url', { url: current.url, boundTo: current.credentialDestination }, input.url, [
    { field: 'authorization', stored: current.authorizationEnc !== null, supplied: input.authorization !== undefined },
    { field: 'azure_tenant_id, azure_client_id and azure_client_secret', stored: current.azureCredentialsEnc !== null, supplied: input.azure_client_secret !== undefined },
  ]);
  const columns = await toColumns(deps, input, current);
  // A new destination for the subscription's signed events: sudo mode (the other fields do not ask). Compared as
  // stored, normalised by checkedUrl: the stored URL in another spelling (HTTPS://, :443) is no new destination.
  if (columns.url !== undefined && columns.url !== current.url) await confirm('webhook_url_change');
  // So is turning a disabled one back on: its events flow again to a URL someone else may have chosen (a configurer
  // who since lost the role, the breaker after a receiver that went away).
  else if (input.active === true && current.status === 'disabled') await confirm('webhook_reenable');
  const now = deps.clock.now();
  const updated = await scopedTo(deps.prisma, ctx).$transaction(async (tx) => {
    await confirmRoutingRole(tx, by.principal);
    // Only over the URL and credentials checked above: a concurrent change of any makes this request start over.
    const { count } = await tx.webhookSubscription.updateMany({
      where: { id, ...subscriptionsOf(ctx), url: current.url, authorizationEnc: current.authorizationEnc, azureCredentialsEnc: current.azureCredentialsEnc },
      data: { ...columns, configuredByUserId: by.principal.userId },
    });
    if (count !== 1) throw conflict('The subscription changed while this request ran; read it again and retry.');
    const row = await tx.webhookSubscription.findUniqueOrThrow({ where: { id } });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'webhook.subscription_updated',
      target: { type: 'webhook_subscription', id },
      metadata: {
        ...levelOf(ctx),
        ...auditedInput(input),
        ...destinationChange(current.url, input.url),
        ...credentialsRebound(current.credentialDestination, row.credentialDestination, row.authorizationEnc !== null || row.azureCredentialsEnc !== null),
      },
    });
    if (before.status !== 'active' && row.status === 'active') {
      await recordAs(tx, by.principal, by.meta, now, {
        action: 'webhook.subscription_reenabled',
        target: { type: 'webhook_subscription', id },
        metadata: { ...levelOf(ctx), previous_status: before.status, previous_disabled_reason: before.disabledReason },
      });
    }
    return row;
  }, RECHECKED_TRANSACTION);
  return presentSubscription(updated, now);
}

export async function deleteSubscription(deps: AppDeps, ctx: LevelContext, id: string, by: Acting): Promise<void> {
  const subscription = await findSubscription(deps, ctx, id);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, ctx).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'webhooks:delete', 'Deleting webhook subscriptions');
    // Only while live: deleted meanwhile (another DELETE, or its project's or assessment's deletion, which audits it)
    // it is not deleted or recorded a second time.
    const { count } = await tx.webhookSubscription.updateMany({ where: { id, ...subscriptionsOf(ctx) }, data: { deletedAt: now } });
    if (count !== 1) throw notFound('Webhook subscription');
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'webhook.subscription_deleted',
      target: { type: 'webhook_subscription', id },
      metadata: { ...levelOf(ctx), name: subscription.name },
    });
  }, RECHECKED_TRANSACTION);
}

/**
 * The options of a transaction around deleteWithSubscriptions. Prisma ends an interactive transaction after 5 s by
 * default (500 to the client, nothing deleted); a cascade through a large project's findings, reports and source
 * files, or one waiting for a row another transaction holds, takes longer, and had no such limit as the single
 * DELETE it was before it ran in a transaction.
 */
export const DELETION_TRANSACTION = { timeout: 10 * 60 * 1000 } as const;

/** What goes with a project or an assessment when it is deleted: its subscriptions (and theirs, an assessment's). */
export type SubscriptionsOwner = { projectId: string } | { assessmentId: string };

/**
 * Deleting a project or an assessment deletes its live webhook subscriptions with it: that needs `webhooks:delete`
 * too (SPEC's role table: a manager, who may delete projects, has no webhook access). 403 naming the scope.
 */
function refuseSubscriptionsWithoutScope(principal: Principal, owner: SubscriptionsOwner, live: number): void {
  if (live === 0 || hasScope(principal.scopes, 'webhooks:delete')) return;
  const what = 'assessmentId' in owner ? 'assessment' : 'project';
  throw forbidden(`Missing required scope: webhooks:delete. Deleting this ${what} would delete its ${live} webhook subscription${live === 1 ? '' : 's'}.`);
}

/** The same check before a deletion's first step outside its transaction (a project's delivery history goes first). */
export async function requireMayDeleteSubscriptionsOf(db: Pick<Tx, 'webhookSubscription'>, principal: Principal, owner: SubscriptionsOwner): Promise<void> {
  if (hasScope(principal.scopes, 'webhooks:delete')) return;
  const live = await db.webhookSubscription.count({ where: { organizationId: principal.organizationId, kind: WEBHOOK_KIND, deletedAt: null, ...owner } });
  refuseSubscriptionsWithoutScope(principal, owner, live);
}

/**
 * Runs `remove` (the deletion of a project or an assessment, whose foreign keys cascade to its subscriptions) and,
 * when it removed the owner, audits each live subscription that went with it as deleted, like one deleted on its
 * own, saying what took it. Inside the deleting transaction: the events commit or roll back with the deletion.
 */
export async function deleteWithSubscriptions(
  tx: Scoped<Tx>,
  owner: SubscriptionsOwner,
  by: Acting,
  at: Date,
  remove: () => Promise<boolean>,
): Promise<boolean> {
  const organizationId = by.principal.organizationId;
  const ofAssessment = 'assessmentId' in owner;
  const ownerId = ofAssessment ? owner.assessmentId : owner.projectId;
  // The row being deleted, held as its DELETE would hold it: a subscription being created under it (its INSERT holds
  // this row through the foreign key, FOR KEY SHARE) commits first and is listed, or waits and then finds its owner
  // gone. Only this row: the organization's row would hold up every org-wide writer (usage, uploads, creations
  // elsewhere) for as long as the cascade runs.
  const ownerTable = Prisma.raw(ofAssessment ? 'assessments' : 'projects');
  if (ofAssessment) {
    // An assessment's project first (FOR KEY SHARE, as holdTargetRows takes it): the project's deletion holds that row,
    // then every subscription with its project_id (an assessment's too), then cascades into the assessment. Holding the
    // assessment before its project, the two deletions deadlocked (409); this way this one waits for the project's
    // deletion and then finds the assessment gone, or the project's deletion waits for this one.
    await tx.$queryRaw`
      SELECT p.id FROM projects p JOIN assessments a ON a.project_id = p.id
       WHERE a.id = ${ownerId} AND a.organization_id = ${organizationId}
         FOR KEY SHARE OF p`;
  }
  await tx.$queryRaw`SELECT id FROM ${ownerTable} WHERE id = ${ownerId} AND organization_id = ${organizationId} FOR UPDATE`;
  // The live ones, held until the cascade removes them: one deleted on its own meanwhile (DELETE .../subscriptions/:id
  // soft-deletes and audits it) either went first and is not listed, or waits and then finds it gone. FOR NO KEY
  // UPDATE, as that soft-delete takes: a delivery's foreign key (FOR KEY SHARE) is not held up by it.
  const doomed = await tx.$queryRaw<Array<{ id: string; name: string; level: string; project_id: string | null; assessment_id: string | null }>>`
    SELECT id, name, level::text AS level, project_id, assessment_id FROM webhook_subscriptions
     WHERE organization_id = ${organizationId} AND kind = ${WEBHOOK_KIND} AND deleted_at IS NULL
       AND ${Prisma.raw(ofAssessment ? 'assessment_id' : 'project_id')} = ${ownerId}
     ORDER BY id
       FOR NO KEY UPDATE`;
  refuseSubscriptionsWithoutScope(by.principal, owner, doomed.length);
  if (!(await remove())) return false;
  if (doomed.length === 0) return true;
  const reason = ofAssessment ? 'assessment_deleted' : 'project_deleted';
  await recordAs(
    tx,
    by.principal,
    by.meta,
    at,
    doomed.map((s) => ({
      action: 'webhook.subscription_deleted' as const,
      target: { type: 'webhook_subscription', id: s.id },
      metadata: { level: s.level, project_id: s.project_id ?? undefined, assessment_id: s.assessment_id ?? undefined, name: s.name, reason },
    })),
  );
  return true;
}

/** The new secret signs from now on; the previous one keeps signing alongside it for the grace window. */
export async function rotateSecret(deps: AppDeps, ctx: LevelContext, id: string, by: Acting, confirm: ConfirmSensitiveChange) {
  const current = await findSubscription(deps, ctx, id);
  // The new secret is in the answer: whoever holds it can sign events the receiver trusts. Sudo mode.
  await confirm('webhook_secret_rotate');
  const secret = generateSigningSecret();
  const now = deps.clock.now();
  const graceEnds = new Date(now.getTime() + deps.config.webhooks.secretGraceHours * 3600 * 1000);
  await scopedTo(deps.prisma, ctx).$transaction(async (tx) => {
    // The role as committed (the password check takes a while): a demoted admin does not walk away with a secret the
    // receiver trusts. Before the subscription's row, as a role change takes them (it disables its member's routes).
    await confirmRoutingRole(tx, by.principal);
    await tx.webhookSubscription.update({
      where: { id },
      data: {
        secretEnc: seal(secret, deps.config.encryptionKey),
        previousSecretEnc: current.secretEnc,
        previousSecretExpiresAt: graceEnds,
      },
    });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'webhook.secret_rotated',
      target: { type: 'webhook_subscription', id },
      metadata: { ...levelOf(ctx), name: current.name, grace_period_ends_at: graceEnds.toISOString() },
    });
  }, RECHECKED_TRANSACTION);
  return { id, secret, previous_secret_expires_at: graceEnds.toISOString() };
}

const TEST_EVENT_REFUSED = {
  gone: 'Webhook subscription',
  disabled: 'The subscription is disabled: re-activate it (PATCH with active: true) before sending a test event.',
};

export async function sendTestEvent(deps: AppDeps, ctx: LevelContext, id: string, by: Acting) {
  const subscription = await findSubscription(deps, ctx, id);
  if (subscription.status === 'disabled') throw conflict(TEST_EVENT_REFUSED.disabled);
  return publishTestDelivery(deps, subscription, { principal: by.principal, scope: 'webhooks:update', action: 'Sending test deliveries' }, TEST_EVENT_REFUSED);
}

/**
 * The subscription's (or notification target's) row as committed, locked in `mode` until the transaction ends
 * (undefined: gone, its project or assessment deleted with it). Taken after the caller's membership (own-role.ts): a
 * soft deletion, a disabling (a role change disables its member's routes) or an edit running at the same time waits
 * for the transaction, or committed first and is seen here. Raw SQL is not scoped: the organization is named here.
 */
export async function holdSubscriptionRow(
  tx: Pick<Tx, '$queryRaw'>,
  organizationId: string,
  id: string,
  mode: 'SHARE' | 'UPDATE',
): Promise<{ status: string; deletedAt: Date | null } | undefined> {
  const [row] = await tx.$queryRaw<Array<{ status: string; deleted_at: Date | null }>>`
    SELECT status::text AS status, deleted_at FROM webhook_subscriptions
     WHERE id = ${id} AND organization_id = ${organizationId}
       FOR ${Prisma.raw(mode)}`;
  return row && { status: row.status, deletedAt: row.deleted_at };
}

/**
 * One synthetic webhook.test event delivered to this one subscription (or notification target) only. `sender` still
 * holds `scope` with their role as committed, and the subscription is still live, both checked inside the transaction
 * that publishes it (own-role.ts): else 403, or `refused` (404 naming `gone`, 409 saying `disabled`).
 */
export async function publishTestDelivery(
  deps: AppDeps,
  subscription: WebhookSubscription,
  sender: { principal: Principal; scope: Scope; action: string },
  refused: { gone: string; disabled: string },
) {
  const published = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (tx, publish) => {
      await requireStillHolds(tx, sender.principal, sender.scope, sender.action);
      // Deleted (or gone with its project or assessment) or disabled while the request ran: nothing is sent, as when
      // that was so before it started (404, 409); never an event without its delivery.
      const live = await holdSubscriptionRow(tx, subscription.organizationId, subscription.id, 'SHARE');
      if (!live || live.deletedAt) throw notFound(refused.gone);
      if (live.status === 'disabled') throw conflict(refused.disabled);
      return publish({
        type: 'webhook.test',
        organizationId: subscription.organizationId,
        projectId: subscription.projectId,
        assessmentId: subscription.assessmentId,
        onlySubscriptionId: subscription.id,
        data: { subscription_id: subscription.id, message: 'This is a test delivery.' },
      });
    },
    () => deps.clock.now(),
    RECHECKED_TRANSACTION,
  );
  return { event_id: published.eventId, delivery_id: published.deliveryIds[0] };
}

/** The Log Analytics columns and DCR fragments for the subscription's event types (SIEM side of microsoft_sentinel). */
export async function subscriptionSentinelSchema(deps: AppDeps, ctx: LevelContext, id: string) {
  const subscription = await findSubscription(deps, ctx, id);
  const events = subscription.events.filter(isEventType);
  return { subscription_id: subscription.id, events, ...sentinelSchema(events, subscription.url) };
}
