// Notification targets: Slack, Microsoft Teams and e-mail destinations for people. A target is a kind of outbound
// subscription: it lives in webhook_subscriptions (kind = slack | teams | email, payload_format the same word), so
// events reach it through the same outbox, relay, retries, health and attempt log as webhooks; the worker renders
// a human-readable message for it (packages/webhooks, notifications). The webhook routes never see targets.
import { EVENT_TYPES, NOTIFICATION_KINDS, generateSigningSecret, isEventType, type NotificationKind } from '@svc/webhooks';
import { SEVERITIES, isSeverity } from '@svc/domain';
import { chatUrlOf, newId, Prisma, scopedTo, seal, sealedChatUrl, unseal, type WebhookSubscription } from '@svc/db';
import { describeTargetRejection, resolveWebhookTarget } from '@svc/net';
import type { AppDeps } from '../../app-deps';
import { badRequest, conflict, notFound, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { recordAs, type Acting } from '../audit/audit.context';
import { confirmRoutingRole } from '../access/event-routing';
import { publishTestDelivery, refuseOutside } from '../webhooks/subscriptions.service';
import type { ConfirmSensitiveChange, ReauthenticatedOperation } from '../auth/reauthentication';
import { lockOrganization } from '../organizations/organization-lock';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';

export const MAX_LIVE_TARGETS = 25;

export interface TargetInput {
  name?: string;
  kind?: NotificationKind;
  url?: string;
  recipients?: string[];
  events?: string[];
  severity_filter?: string[] | null;
  active?: boolean;
}

interface Tenant {
  organizationId: string;
}

/** Delivery status of a target, from its attempt log. */
interface TargetStatus {
  last_sent_at: Date | null;
  last_error: string | null;
  last_error_at: Date | null;
}

const NO_STATUS: TargetStatus = { last_sent_at: null, last_error: null, last_error_at: null };
const targetsOf = { kind: { in: [...NOTIFICATION_KINDS] }, deletedAt: null };

function hostOf(url: string): string | null {
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}

export function presentTarget(t: WebhookSubscription, status: TargetStatus = NO_STATUS) {
  return {
    id: t.id,
    name: t.name,
    kind: t.kind as NotificationKind,
    // The whole URL is the channel's credential (anyone holding a Slack webhook URL can post): never returned.
    url_host: t.kind === 'email' ? null : hostOf(t.url),
    recipients: t.emailRecipients,
    events: t.events,
    severity_filter: t.hasSeverityFilter ? t.severityFilter : null,
    active: t.status !== 'disabled',
    status: t.status,
    disabled_reason: t.status === 'disabled' ? t.disabledReason : null,
    last_sent_at: status.last_sent_at?.toISOString() ?? null,
    last_error: status.last_error,
    last_error_at: status.last_error_at?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
    updated_at: t.updatedAt.toISOString(),
  };
}

/** Last successful attempt and last failed attempt (with what went wrong) of each target, in one statement. */
async function statusOf(deps: AppDeps, ids: string[]): Promise<Map<string, TargetStatus>> {
  if (ids.length === 0) return new Map();
  const rows = await deps.prisma.$queryRaw<Array<TargetStatus & { id: string }>>(Prisma.sql`
    SELECT t.id,
      (SELECT max(a.started_at) FROM webhook_deliveries d JOIN webhook_attempts a ON a.delivery_id = d.id
        WHERE d.subscription_id = t.id AND a.outcome = 'success') AS last_sent_at,
      e.started_at AS last_error_at, e.message AS last_error
    FROM unnest(${ids}::text[]) AS t(id)
    LEFT JOIN LATERAL (
      SELECT a.started_at,
             CASE WHEN a.response_status IS NOT NULL THEN 'HTTP ' || a.response_status
                  ELSE a.outcome || coalesce(': ' || a.error, '') END AS message
      FROM webhook_deliveries d JOIN webhook_attempts a ON a.delivery_id = d.id
      WHERE d.subscription_id = t.id AND a.outcome <> 'success'
      ORDER BY a.started_at DESC LIMIT 1) e ON true`);
  return new Map(rows.map((r) => [r.id, { last_sent_at: r.last_sent_at, last_error: r.last_error, last_error_at: r.last_error_at }]));
}

async function presentWithStatus(deps: AppDeps, target: WebhookSubscription) {
  return presentTarget(target, (await statusOf(deps, [target.id])).get(target.id));
}

/**
 * A chat webhook URL must pass the webhooks' public-address rule, refused like a webhook URL (422); the worker checks
 * it again at every send.
 */
async function checkedUrl(deps: AppDeps, url: string): Promise<string> {
  const check = await resolveWebhookTarget(url, { allowedHosts: deps.config.webhooks.allowedHosts, dns: deps.config.webhooks.dns });
  if (!check.ok) throw unprocessable(`Notification target URL refused: ${describeTargetRejection(check.reason)}.`);
  return check.target.url.toString();
}

/** The input with its URL checked and normalised as it will be stored (checkedUrl): what the change is judged on. */
async function checkedInput(deps: AppDeps, input: TargetInput, kind: NotificationKind): Promise<TargetInput> {
  refuseOutside(input.events, EVENT_TYPES, isEventType, 'events');
  refuseOutside(input.severity_filter, SEVERITIES, isSeverity, 'severity_filter');
  if (kind === 'email' && input.url !== undefined) throw unprocessable('An e-mail target has recipients, not a url.');
  if (kind !== 'email' && input.recipients !== undefined) throw unprocessable(`A ${kind} target has a url, not recipients.`);
  return input.url === undefined ? input : { ...input, url: await checkedUrl(deps, input.url) };
}

/** Maps a checked input (checkedInput) to columns; only the fields present. */
function toColumns(deps: AppDeps, input: TargetInput) {
  return {
    ...(input.name !== undefined && { name: input.name }),
    // The URL is the channel's credential: sealed; only its origin stays readable (url_host).
    ...(input.url !== undefined && sealedChatUrl(input.url, deps.config.encryptionKey)),
    ...(input.recipients !== undefined && { emailRecipients: input.recipients }),
    ...(input.events !== undefined && { events: input.events }),
    ...(input.severity_filter !== undefined && {
      severityFilter: input.severity_filter ?? [],
      hasSeverityFilter: input.severity_filter !== null,
    }),
    ...(input.active === true && { status: 'active' as const, consecutiveFailures: 0, firstFailureAt: null, disabledReason: null }),
    ...(input.active === false && { status: 'disabled' as const, disabledReason: 'disabled by a user' }),
  };
}

/** Public facts of a change for the audit log: never the URL's path or query (the credential). */
function auditedInput(input: TargetInput) {
  return {
    fields: Object.keys(input).filter((k) => input[k as keyof TargetInput] !== undefined).sort(),
    ...(input.name !== undefined && { name: input.name }),
    ...(input.kind !== undefined && { kind: input.kind }),
    ...(input.url !== undefined && { url_host: hostOf(input.url) }),
    ...(input.recipients !== undefined && { recipients: input.recipients.length }),
    ...(input.events !== undefined && { events: input.events }),
    ...(input.severity_filter !== undefined && { severity_filter: input.severity_filter }),
    ...(input.active !== undefined && { active: input.active }),
  };
}

function refuseOverLimit(live: number): void {
  if (live >= MAX_LIVE_TARGETS) {
    throw badRequest(`An organization may have at most ${MAX_LIVE_TARGETS} notification targets; revoke one first.`);
  }
}

export async function createTarget(deps: AppDeps, tenant: Tenant, input: TargetInput, by: Acting, confirm: ConfirmSensitiveChange) {
  const kind = input.kind!;
  const columns = toColumns(deps, await checkedInput(deps, input, kind));
  // The limit first (read again under the lock below): a request that would fail anyway does not ask for the password.
  refuseOverLimit(await scopedTo(deps.prisma, tenant).webhookSubscription.count({ where: targetsOf }));
  // A new outside address the organization's findings and reports go to: sudo mode (reauthentication.ts).
  await confirm('notification_target_create');
  const now = deps.clock.now();
  const created = await scopedTo(deps.prisma, tenant).$transaction(async (tx) => {
    // As a webhook's creation (subscriptions.service.ts): the limit's lock, NO KEY UPDATE.
    await lockOrganization(tx, tenant.organizationId);
    await confirmRoutingRole(tx, by.principal);
    refuseOverLimit(await tx.webhookSubscription.count({ where: targetsOf }));
    const target = await tx.webhookSubscription.create({
      data: {
        id: newId('ntgt'),
        organizationId: tenant.organizationId,
        level: 'organization',
        kind,
        payloadFormat: kind,
        // Unused by chat and e-mail receivers; the column is shared with webhooks, which sign with it.
        secretEnc: seal(generateSigningSecret(), deps.config.encryptionKey),
        name: columns.name!,
        url: columns.url ?? '',
        events: columns.events!,
        severityFilter: [],
        statusFilter: [],
        ...columns,
        configuredByUserId: by.principal.userId,
      },
    });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'notification_target.created',
      target: { type: 'notification_target', id: target.id },
      metadata: auditedInput(input),
    });
    return target;
  }, RECHECKED_TRANSACTION);
  return presentTarget(created);
}

export async function findTarget(deps: AppDeps, tenant: Tenant, id: string): Promise<WebhookSubscription> {
  const target = await scopedTo(deps.prisma, tenant).webhookSubscription.findFirst({ where: { id, ...targetsOf } });
  if (!target) throw notFound('Notification target');
  return target;
}

export async function readTarget(deps: AppDeps, tenant: Tenant, id: string) {
  return presentWithStatus(deps, await findTarget(deps, tenant, id));
}

export async function listTargets(deps: AppDeps, tenant: Tenant, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, tenant).webhookSubscription.findMany({ ...args, where: { ...args.where, ...targetsOf } });
  const status = await statusOf(deps, rows.map((r) => r.id));
  return toPage(rows, query, (row) => presentTarget(row, status.get(row.id)));
}

/**
 * What of a checked PATCH needs sudo mode, null when nothing: a chat URL other than the stored one (both as checkedUrl
 * normalises them), a recipient not already one (removing or reordering never asks: it sends to fewer), or turning a
 * disabled target back on (its messages flow again to an address someone else may have chosen, as for webhooks).
 */
function sensitivePartOf(deps: AppDeps, current: WebhookSubscription, input: TargetInput): ReauthenticatedOperation | null {
  const storedUrl = () => chatUrlOf(current, (sealed) => unseal(sealed, deps.config.encryptionKey));
  if (input.url !== undefined && input.url !== storedUrl()) return 'notification_target_destination_change';
  if (input.recipients?.some((r) => !current.emailRecipients.includes(r))) return 'notification_target_destination_change';
  if (input.active === true && current.status === 'disabled') return 'notification_target_reenable';
  return null;
}

export async function updateTarget(
  deps: AppDeps,
  tenant: Tenant,
  id: string,
  input: TargetInput,
  by: Acting,
  confirm: ConfirmSensitiveChange,
) {
  const current = await findTarget(deps, tenant, id);
  const checked = await checkedInput(deps, input, current.kind as NotificationKind);
  const sensitive = sensitivePartOf(deps, current, checked);
  if (sensitive !== null) await confirm(sensitive);
  const columns = toColumns(deps, checked);
  const now = deps.clock.now();
  const updated = await scopedTo(deps.prisma, tenant).$transaction(async (tx) => {
    await confirmRoutingRole(tx, by.principal);
    // Only over the destination and status judged above: a concurrent change of either makes this request start over
    // (else a PATCH that asked nothing could write back an address, or turn on a target, nobody confirmed).
    const { count } = await tx.webhookSubscription.updateMany({
      where: {
        id,
        ...targetsOf,
        url: current.url,
        urlEnc: current.urlEnc,
        emailRecipients: { equals: current.emailRecipients },
        ...(sensitive === null && input.active === true && { status: { not: 'disabled' } }),
      },
      data: { ...columns, configuredByUserId: by.principal.userId },
    });
    if (count !== 1) throw conflict('The notification target changed while this request ran; read it again and retry.');
    const row = await tx.webhookSubscription.findUniqueOrThrow({ where: { id } });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'notification_target.updated',
      target: { type: 'notification_target', id },
      metadata: { kind: current.kind, ...auditedInput(input) },
    });
    return row;
  }, RECHECKED_TRANSACTION);
  return presentWithStatus(deps, updated);
}

/** Revoked targets receive nothing more; their delivery history stays until retention purges it. */
export async function revokeTarget(deps: AppDeps, tenant: Tenant, id: string, by: Acting): Promise<void> {
  const target = await findTarget(deps, tenant, id);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, tenant).$transaction(async (tx) => {
    await requireStillHolds(tx, by.principal, 'notification_targets:configure', 'Revoking notification targets');
    await tx.webhookSubscription.update({ where: { id }, data: { deletedAt: now } });
    await recordAs(tx, by.principal, by.meta, now, {
      action: 'notification_target.revoked',
      target: { type: 'notification_target', id },
      metadata: { kind: target.kind, name: target.name },
    });
  }, RECHECKED_TRANSACTION);
}

const TEST_MESSAGE_REFUSED = {
  gone: 'Notification target',
  disabled: 'The target is disabled: re-activate it (PATCH with active: true) before sending a test message.',
};

export async function sendTestMessage(deps: AppDeps, tenant: Tenant, id: string, by: Acting) {
  const target = await findTarget(deps, tenant, id);
  if (target.status === 'disabled') throw conflict(TEST_MESSAGE_REFUSED.disabled);
  return publishTestDelivery(deps, target, { principal: by.principal, scope: 'notification_targets:test', action: 'Sending test messages' }, TEST_MESSAGE_REFUSED);
}
