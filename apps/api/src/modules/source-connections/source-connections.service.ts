// Personal source-host connections (source:connect_personal): a person's own GitHub account, connected through
// the sign-in's OAuth flow (apps/api/src/modules/oauth) as a separate grant with repository read access, so that
// assessments can read their private repositories. One connection per person and provider, kept across their
// organizations; the token is sealed at rest with the service key and never returned. Disconnecting needs only
// profile:update, so a person whose role lost source:connect_personal can still remove their token.
import type { PersonalSourceConnection } from '@svc/db';
import { newId, seal } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { notFound } from '../../http/errors';
import { recordInUserOrganizations, type RequestMeta } from '../audit/audit.context';
import type { ProviderName, SourceAccount } from '../oauth/provider';

type Deps = Pick<AppDeps, 'prisma' | 'config' | 'clock'>;

export function presentConnection(c: PersonalSourceConnection) {
  return {
    provider: c.provider,
    login: c.login,
    account_id: c.subject,
    scopes: c.scopes,
    connected_at: c.updatedAt.toISOString(),
  };
}

export async function listConnections(deps: AppDeps, principal: Principal) {
  const rows = await deps.prisma.personalSourceConnection.findMany({ where: { userId: principal.userId }, orderBy: { provider: 'asc' } });
  return { data: rows.map(presentConnection) };
}

/** Stores (or replaces) the person's connection after the provider granted it; audited in their organizations. */
export async function saveConnection(deps: Deps, userId: string, provider: ProviderName, account: SourceAccount, meta: RequestMeta) {
  const now = deps.clock.now();
  const data = { subject: account.subject, login: account.login, scopes: account.scopes, tokenEnc: seal(account.accessToken, deps.config.encryptionKey) };
  await deps.prisma.$transaction(async (tx) => {
    await tx.personalSourceConnection.upsert({
      where: { userId_provider: { userId, provider } },
      create: { id: newId('psc', now.getTime()), userId, provider, createdAt: now, ...data },
      update: data,
    });
    await recordInUserOrganizations(tx, userId, meta, now, {
      action: 'source.personal_connected',
      target: { type: 'user', id: userId },
      metadata: { provider, login: account.login, scopes: account.scopes },
    });
  });
}

export async function disconnect(deps: AppDeps, principal: Principal, provider: string, meta: RequestMeta): Promise<void> {
  const now = deps.clock.now();
  await deps.prisma.$transaction(async (tx) => {
    const { count } = await tx.personalSourceConnection.deleteMany({ where: { userId: principal.userId, provider } });
    if (count !== 1) throw notFound('Connection');
    await recordInUserOrganizations(tx, principal.userId, meta, now, {
      action: 'source.personal_disconnected',
      target: { type: 'user', id: principal.userId },
      metadata: { provider },
    });
  });
}
