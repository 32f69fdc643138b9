// Organization integrations: a source host (GitHub, by token or App installation, optionally GitHub Enterprise) and
// a chat workspace (Slack). Credentials are write-only: sealed with the service key like webhook secrets, shown
// back only as a four-character hint. A GitHub Enterprise base URL passes the webhooks' public-address rule when
// saved (the worker's transport checks and pins it again at every call). Nothing is called at connect time: an
// integration is `connected` until a check by the worker says otherwise.
//
// bind_team: a team can have one integration per kind; the team's projects (those it holds a grant on) use it by
// default. A project's effective integration per kind: the binding of a team with access to it (the oldest
// binding when several teams do), else the organization's integration of that kind when it has exactly one.
import type { Integration, Prisma } from '@svc/db';
import { newId, scopedTo, seal } from '@svc/db';
import { describeTargetRejection, resolveWebhookTarget } from '@svc/net';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { notFound, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import type { ConfirmSensitiveChange } from '../auth/reauthentication';
import { requireProjectAccess } from '../access/access.service';
import { findTeam, holdTeam } from '../teams/teams.service';
import { INTEGRATION_KINDS, type IntegrationKind } from './integrations.schemas';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';

type IntegrationRow = Integration & { teamBindings: Array<{ teamId: string }> };
const withTeams = { include: { teamBindings: { select: { teamId: true }, orderBy: { createdAt: 'asc' as const } } } } as const;

export function presentIntegration(i: IntegrationRow) {
  return {
    id: i.id,
    kind: i.kind,
    name: i.name,
    auth_method: i.authMethod,
    credential_hint: i.credentialHint,
    app_installation_id: i.installationId,
    base_url: i.baseUrl,
    workspace_id: i.workspaceId,
    status: i.status,
    team_ids: i.teamBindings.map((b) => b.teamId),
    created_at: i.createdAt.toISOString(),
    updated_at: i.updatedAt.toISOString(),
  };
}

export type ConnectInput =
  | { kind: 'github'; name: string; token?: string; app_installation_id?: string; base_url?: string | null }
  | { kind: 'slack'; name: string; bot_token: string; workspace_id: string };

const hint = (credential: string) => `…${credential.slice(-4)}`;

/** A GitHub Enterprise base URL must be https and resolve only to public addresses, like a webhook URL. */
async function checkedBaseUrl(deps: AppDeps, url: string | null | undefined): Promise<string | null> {
  if (!url) return null;
  const check = await resolveWebhookTarget(url, { allowedHosts: deps.config.webhooks.allowedHosts, dns: deps.config.webhooks.dns });
  if (!check.ok) throw unprocessable(`GitHub Enterprise base URL refused: ${describeTargetRejection(check.reason)}.`);
  return check.target.url.toString().replace(/\/+$/, '');
}

async function columnsOf(deps: AppDeps, input: ConnectInput) {
  const key = deps.config.encryptionKey;
  if (input.kind === 'slack') {
    return { authMethod: 'bot_token', credentialEnc: seal(input.bot_token, key), credentialHint: hint(input.bot_token), workspaceId: input.workspace_id };
  }
  const baseUrl = await checkedBaseUrl(deps, input.base_url);
  if (input.token) return { authMethod: 'token', credentialEnc: seal(input.token, key), credentialHint: hint(input.token), baseUrl };
  return { authMethod: 'app_installation', installationId: input.app_installation_id!, baseUrl };
}

export async function connectIntegration(
  deps: AppDeps,
  principal: Principal,
  input: ConnectInput,
  meta: RequestMeta,
  confirm: ConfirmSensitiveChange,
) {
  const columns = await columnsOf(deps, input);
  // A source host or chat workspace the organization's data will be read from or sent to: sudo mode (reauthentication.ts).
  await confirm('integration_create');
  const now = deps.clock.now();
  const id = newId('int', now.getTime());
  const created = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'integrations:manage', 'Connecting integrations');
    const row = await tx.integration.create({
      data: { id, organizationId: principal.organizationId, kind: input.kind, name: input.name, createdById: principal.userId, createdAt: now, ...columns },
      ...withTeams,
    });
    await recordAs(tx, principal, meta, now, {
      action: 'integration.connected',
      target: { type: 'integration', id },
      metadata: { kind: input.kind, name: input.name, auth_method: columns.authMethod, base_url: 'baseUrl' in columns ? columns.baseUrl ?? null : null },
    });
    return row;
  }, RECHECKED_TRANSACTION);
  return presentIntegration(created);
}

async function requireIntegration(deps: AppDeps, principal: Principal, id: string): Promise<IntegrationRow> {
  const row = await scopedTo(deps.prisma, principal).integration.findFirst({ where: { id }, ...withTeams });
  if (!row) throw notFound('Integration');
  return row;
}

export async function getIntegration(deps: AppDeps, principal: Principal, id: string) {
  return presentIntegration(await requireIntegration(deps, principal, id));
}

export async function listIntegrations(deps: AppDeps, principal: Principal, query: PageQuery & { kind?: IntegrationKind }) {
  const args = pageArgs(query);
  const where: Prisma.IntegrationWhereInput = { ...args.where, ...(query.kind && { kind: query.kind }) };
  const rows = await scopedTo(deps.prisma, principal).integration.findMany({ ...args, where, ...withTeams });
  return toPage(rows, query, presentIntegration);
}

/** Disconnecting deletes the integration and its sealed credential; team bindings go with it. */
export async function disconnectIntegration(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta): Promise<void> {
  const row = await requireIntegration(deps, principal, id);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'integrations:manage', 'Disconnecting integrations');
    const { count } = await tx.integration.deleteMany({ where: { id } });
    if (count !== 1) throw notFound('Integration');
    await recordAs(tx, principal, meta, now, {
      action: 'integration.disconnected',
      target: { type: 'integration', id },
      metadata: { kind: row.kind, name: row.name, teams_unbound: row.teamBindings.length },
    });
  }, RECHECKED_TRANSACTION);
}

/** Makes the integration the team's default of its kind (replacing the team's previous one of that kind). */
export async function bindTeam(deps: AppDeps, principal: Principal, id: string, teamId: string, meta: RequestMeta) {
  const integration = await requireIntegration(deps, principal, id);
  const team = await findTeam(deps, principal, teamId);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // The caller's membership before the team's row, in the order of own-role.ts: a team's deletion or rename (which
    // holds its caller's membership, then waits for the team) and a demotion of this caller would otherwise close a
    // cycle. Two binds of the team at once (a retried PUT) take turns: each deleting what it found and then
    // inserting, the second insert hit the one-per-kind unique key (500).
    await requireStillHolds(tx, principal, 'integrations:bind_team', 'Binding integrations to teams');
    await holdTeam(tx, team.id, 'NO KEY UPDATE');
    await tx.teamIntegration.deleteMany({ where: { teamId: team.id, kind: integration.kind } });
    await tx.teamIntegration.create({
      data: { id: newId('tint', now.getTime()), organizationId: principal.organizationId, teamId: team.id, integrationId: id, kind: integration.kind, createdAt: now },
    });
    await recordAs(tx, principal, meta, now, {
      action: 'integration.team_bound',
      target: { type: 'integration', id },
      metadata: { kind: integration.kind, team_id: team.id, team_name: team.name },
    });
  }, RECHECKED_TRANSACTION);
  return presentIntegration(await requireIntegration(deps, principal, id));
}

export async function unbindTeam(deps: AppDeps, principal: Principal, id: string, teamId: string, meta: RequestMeta) {
  const integration = await requireIntegration(deps, principal, id);
  const team = await findTeam(deps, principal, teamId);
  const now = deps.clock.now();
  await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    await requireStillHolds(tx, principal, 'integrations:bind_team', 'Unbinding integrations from teams');
    const { count } = await tx.teamIntegration.deleteMany({ where: { teamId: team.id, integrationId: id } });
    if (count !== 1) throw notFound('Team binding');
    await recordAs(tx, principal, meta, now, {
      action: 'integration.team_unbound',
      target: { type: 'integration', id },
      metadata: { kind: integration.kind, team_id: team.id, team_name: team.name },
    });
  }, RECHECKED_TRANSACTION);
  return presentIntegration(await requireIntegration(deps, principal, id));
}

/** Which integration of each kind a project uses by default, and why. */
export async function projectIntegrations(deps: AppDeps, principal: Principal, projectId: string) {
  const project = await requireProjectAccess(deps, principal, projectId, 'read');
  const db = scopedTo(deps.prisma, principal);
  const data = [];
  for (const kind of INTEGRATION_KINDS) {
    const binding = await db.teamIntegration.findFirst({
      where: { kind, team: { grants: { some: { projectId: project.id } } } },
      orderBy: { createdAt: 'asc' },
      select: { teamId: true, integrationId: true },
    });
    if (binding) {
      data.push({ kind, integration: presentIntegration(await requireIntegration(deps, principal, binding.integrationId)), source: 'team', team_id: binding.teamId });
      continue;
    }
    const only = await db.integration.findMany({ where: { kind }, take: 2, ...withTeams });
    data.push(only.length === 1
      ? { kind, integration: presentIntegration(only[0]), source: 'organization', team_id: null }
      : { kind, integration: null, source: null, team_id: null });
  }
  return { data };
}
