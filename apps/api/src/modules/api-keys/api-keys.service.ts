// Minting, listing and revoking API keys. A key's scopes must lie within its creator's role bundle (and, when
// the creator is itself a key, within that key's scopes); wildcards are expanded before storage. The
// organization's lifecycle policy decides the expiration; creation and revocation are audited.
import { resolveRequestedScopes, roleBundle, roleRank } from '@svc/scopes';
import type { ApiKey, Tx } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { invalidateCachedPrincipals } from '../../auth/auth-epochs';
import { conflict, forbidden, notFound, unauthorized, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';
import { displayPrefix, generateApiKeyValue, hashApiKey } from '../../auth/api-key-material';
import type { RateLimiters } from '../../http/rate-limit';
import { recordAs, type RequestMeta } from '../audit/audit.context';
import { lockOwnRole, lockOwnRoleAndMember, RECHECKED_TRANSACTION, requireCommittedScope } from '../access/own-role';
import { confirmSensitiveChange } from '../auth/reauthentication';
import { keyNoticeAllowance, recordSecurityNotice, sendSecurityNoticeNow } from '../auth/security-notices';
import { expirationUnderPolicy, loadKeyPolicy } from '../key-policy/key-policy.service';

export function presentApiKey(key: ApiKey) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.displayPrefix,
    scopes: key.scopes,
    user_id: key.userId,
    expires_at: key.expiresAt?.toISOString() ?? null,
    last_used_at: key.lastUsedAt?.toISOString() ?? null,
    revoked_at: key.revokedAt?.toISOString() ?? null,
    created_at: key.createdAt.toISOString(),
  };
}

function checkRequestedScopes(principal: Principal, requested: string[]): string[] {
  const result = resolveRequestedScopes(requested, principal.role);
  if (!result.ok) {
    const names = result.scopes.join(', ');
    switch (result.reason) {
      case 'unknown_scope':
        throw unprocessable(`Unknown scopes: ${names}.`);
      case 'wildcard_not_allowed':
        throw forbidden(`Only owners may create keys with wildcard scopes: ${names}.`);
      case 'outside_bundle':
        throw forbidden(`Scopes outside your role's bundle: ${names}.`, { scopes: result.scopes });
    }
  }
  const beyondCaller = result.scopes.filter((s) => !principal.scopes.has(s));
  if (beyondCaller.length > 0) {
    throw forbidden(`Scopes beyond the calling key's own: ${beyondCaller.join(', ')}.`, { scopes: beyondCaller });
  }
  return result.scopes;
}

/**
 * A key minted by a key expires no later than the calling key (as its scopes lie within the calling key's): a
 * short-lived key must not hand out a lasting one. None asked for: the calling key's expiration; a later one: 422.
 */
function withinCallingKeyLifetime(
  principal: Principal,
  chosen: { expiresAt: Date | null; autoFilled: boolean },
  asked: boolean,
): { expiresAt: Date | null; autoFilled: boolean } {
  const limit = principal.kind === 'api_key' ? principal.apiKeyExpiresAt : null;
  if (!limit || (chosen.expiresAt && chosen.expiresAt <= limit)) return chosen;
  if (asked) {
    throw unprocessable(`expires_at is beyond the expiration of the calling API key: at most ${limit.toISOString()}.`);
  }
  return { expiresAt: limit, autoFilled: chosen.autoFilled };
}

export async function createApiKey(
  deps: AppDeps,
  limiters: RateLimiters,
  principal: Principal,
  input: { name: string; scopes: string[]; expires_at?: Date; current_password?: string },
  meta: RequestMeta,
) {
  const scopes = checkRequestedScopes(principal, input.scopes);
  const now = deps.clock.now();
  if (input.expires_at && input.expires_at <= now) throw unprocessable('expires_at must be in the future.');
  const policy = await loadKeyPolicy(deps, principal.organizationId);
  // None asked by an expiring key: its expiration stands in for the one require_expiration asks for (the key expires).
  const inherited = principal.kind === 'api_key' ? (principal.apiKeyExpiresAt ?? undefined) : undefined;
  const requireOnly = policy.enabled && policy.requireExpiration && policy.maxLifetimeDays === null;
  const underPolicy = expirationUnderPolicy(policy, input.expires_at ?? (requireOnly ? inherited : undefined), now);
  const { expiresAt, autoFilled } = withinCallingKeyLifetime(principal, underPolicy, input.expires_at !== undefined);
  // After every check of the request: one that would fail anyway does not ask for the password.
  await confirmSensitiveChange(deps, limiters, principal, input.current_password, 'api_key_create', meta);
  const value = generateApiKeyValue();
  // A key made from a session is told to its owner (security-notices.ts), up to the hourly limit; one minted by a key
  // is not: a pipeline minting short-lived keys would flood its owner, and that key was trusted with minting already.
  const notice = principal.kind === 'session' ? await keyNoticeAllowance(deps, principal.userId) : null;
  const { key, noticeId } = await scopedTo(deps.prisma, principal).$transaction(async (tx) => {
    // The caller's membership, share-locked until the key commits (lockOwnRole). A
    // removal from the organization (DELETE /members/:id, a GDPR erasure) deletes that row, then revokes the member's
    // keys: it either waits and then revokes this one too, or went first, and no key is left to someone no longer a
    // member (one that would come back to life if they joined again).
    const role = await lockOwnRole(tx, principal);
    if (!role) throw unauthorized('You are no longer a member of this organization.');
    // Demoted while the request ran: the scopes are checked against the role as committed, so no key is stored with
    // scopes beyond its creator's bundle (they would be inert, and come back with a later promotion).
    if (role !== principal.role) {
      if (!roleBundle(role).has('api_keys:create')) throw forbidden(`Minting API keys needs a role you no longer hold (yours is now ${role}).`);
      checkRequestedScopes({ ...principal, role }, input.scopes);
    }
    const created = await tx.apiKey.create({
      data: {
        id: newId('key'),
        organizationId: principal.organizationId,
        userId: principal.userId,
        name: input.name,
        displayPrefix: displayPrefix(value),
        keyHash: hashApiKey(value, deps.config.apiKeyPepper),
        scopes,
        expiresAt,
      },
    });
    await recordAs(tx, principal, meta, now, {
      action: 'api_key.created',
      target: { type: 'api_key', id: created.id },
      metadata: {
        name: created.name,
        prefix: created.displayPrefix,
        scopes,
        expires_at: expiresAt?.toISOString() ?? null,
        ...(autoFilled && { expires_at_set_by_policy: true }),
      },
    });
    if (!notice) return { key: created, noticeId: null };
    const organization = await tx.organization.findUniqueOrThrow({ where: { id: principal.organizationId }, select: { name: true } });
    const noticeId = await recordSecurityNotice(
      tx,
      principal.userId,
      {
        kind: 'api_key_created',
        key: { name: created.name, prefix: created.displayPrefix, expiresAt: created.expiresAt, scopeCount: created.scopes.length },
        organizationName: organization.name,
        lastThisHour: notice.lastThisHour,
      },
      meta,
      now,
    );
    return { key: created, noticeId };
  }, RECHECKED_TRANSACTION);
  // Not awaited: the key exists, and its value must reach the caller whatever happens to the notice.
  if (noticeId) sendSecurityNoticeNow(deps, noticeId, principal.userId);
  return { ...presentApiKey(key), key: value };
}

/** Admins and owners see every key of the organization; everybody else their own (query through scopedTo). */
function visibleKeysFilter(principal: Principal) {
  const seesAll = roleRank(principal.role) >= roleRank('admin');
  return seesAll ? {} : { userId: principal.userId };
}

export async function listApiKeys(deps: AppDeps, principal: Principal, query: PageQuery) {
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).apiKey.findMany({ ...args, where: { ...args.where, ...visibleKeysFilter(principal) } });
  return toPage(rows, query, presentApiKey);
}

/**
 * An admin sees every key of the organization, but revokes only those of people whose role is not above theirs (as
 * members.service.ts changes no role above the caller's): else an admin could cut off the owner's automation.
 */
async function requireNotAboveCaller(deps: AppDeps, principal: Principal, keyOwnerId: string): Promise<void> {
  if (keyOwnerId === principal.userId) return;
  const owner = await scopedTo(deps.prisma, principal).membership.findFirst({ where: { userId: keyOwnerId }, select: { role: true } });
  if (owner && roleRank(owner.role) > roleRank(principal.role)) throw keyOwnerAbove(owner.role);
}

const keyOwnerAbove = (role: string) => forbidden(`You cannot revoke the API key of someone whose role (${role}) is above yours.`);

/**
 * The checks above against the roles as committed now, both memberships held until the revocation commits
 * (own-role.ts): demoted below admin while the request ran, the caller revokes only their own keys; the key's owner
 * raised above them meanwhile, not theirs.
 */
async function requireStillMayRevoke(tx: Pick<Tx, '$queryRaw'>, principal: Principal, keyOwnerId: string): Promise<void> {
  if (keyOwnerId === principal.userId) {
    requireCommittedScope(await lockOwnRole(tx, principal), 'api_keys:revoke', 'Revoking API keys');
    return;
  }
  const { own, member } = await lockOwnRoleAndMember(tx, principal, keyOwnerId, 'SHARE');
  const role = requireCommittedScope(own, 'api_keys:revoke', 'Revoking API keys');
  if (roleRank(role) < roleRank('admin')) throw forbidden(`Revoking other people's API keys needs a role you no longer hold (yours is now ${role}).`);
  if (member && roleRank(member) > roleRank(role)) throw keyOwnerAbove(member);
}

export async function revokeApiKey(deps: AppDeps, principal: Principal, id: string, meta: RequestMeta): Promise<void> {
  const key = await scopedTo(deps.prisma, principal).apiKey.findFirst({ where: { id, ...visibleKeysFilter(principal) } });
  if (!key) throw notFound('API key');
  await requireNotAboveCaller(deps, principal, key.userId);
  if (key.revokedAt) throw conflict('API key is already revoked.');
  const now = deps.clock.now();
  await deps.prisma.$transaction(async (tx) => {
    await requireStillMayRevoke(tx, principal, key.userId);
    // Conditional, so a concurrent revocation (or the inactivity job) records one revocation, not two.
    const { count } = await tx.apiKey.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: now, revokedReason: 'user' } });
    if (count !== 1) throw conflict('API key is already revoked.');
    await recordAs(tx, principal, meta, now, {
      action: 'api_key.revoked',
      target: { type: 'api_key', id },
      metadata: { name: key.name, prefix: key.displayPrefix, reason: 'user', owner_user_id: key.userId },
    });
  }, RECHECKED_TRANSACTION);
  await invalidateCachedPrincipals(deps, { organizationIds: [key.organizationId] });
}
