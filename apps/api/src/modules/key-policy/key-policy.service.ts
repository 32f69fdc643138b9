// The organization's API-key lifecycle policy (SPEC: API key). Off by default; when on it can require an
// expiration, cap a key's lifetime (and fill in the expiration when none is given), have the worker warn before
// expiry and revoke keys unused for too long (apps/worker/src/key-lifecycle.ts).
import type { Organization } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { invalidateCachedPrincipals } from '../../auth/auth-epochs';
import { notFound, unprocessable } from '../../http/errors';
import { RECHECKED_TRANSACTION, requireStillHolds } from '../access/own-role';
import { lockOrganization } from '../organizations/organization-lock';
import { recordAs, type RequestMeta } from '../audit/audit.context';

const DAY_MS = 24 * 3600 * 1000;

export interface KeyPolicy {
  enabled: boolean;
  requireExpiration: boolean;
  /** null: no cap (and nothing to fill in). */
  maxLifetimeDays: number | null;
  /** null: no expiry warning. */
  warnDaysBefore: number | null;
  /** null: keys are never revoked for inactivity. */
  inactivityDays: number | null;
}

export interface KeyPolicyInput {
  enabled: boolean;
  require_expiration?: boolean;
  max_lifetime_days?: number | null;
  warn_days_before?: number | null;
  inactivity_days?: number | null;
}

const policyColumns = {
  keyPolicyEnabled: true,
  keyPolicyRequireExpiry: true,
  keyPolicyMaxLifetimeDays: true,
  keyPolicyWarnDays: true,
  keyPolicyInactivityDays: true,
} as const;

type PolicyColumns = Pick<
  Organization,
  'keyPolicyEnabled' | 'keyPolicyRequireExpiry' | 'keyPolicyMaxLifetimeDays' | 'keyPolicyWarnDays' | 'keyPolicyInactivityDays'
>;

export function keyPolicyOf(org: PolicyColumns): KeyPolicy {
  return {
    enabled: org.keyPolicyEnabled,
    requireExpiration: org.keyPolicyRequireExpiry,
    maxLifetimeDays: org.keyPolicyMaxLifetimeDays,
    warnDaysBefore: org.keyPolicyWarnDays,
    inactivityDays: org.keyPolicyInactivityDays,
  };
}

export function presentKeyPolicy(policy: KeyPolicy) {
  return {
    enabled: policy.enabled,
    require_expiration: policy.requireExpiration,
    max_lifetime_days: policy.maxLifetimeDays,
    warn_days_before: policy.warnDaysBefore,
    inactivity_days: policy.inactivityDays,
  };
}

export async function loadKeyPolicy(deps: Pick<AppDeps, 'prisma'>, organizationId: string): Promise<KeyPolicy> {
  const org = await deps.prisma.organization.findUnique({ where: { id: organizationId }, select: policyColumns });
  if (!org) throw notFound('Organization');
  return keyPolicyOf(org);
}

export async function getKeyPolicy(deps: AppDeps, principal: Principal) {
  return presentKeyPolicy(await loadKeyPolicy(deps, principal.organizationId));
}

export async function updateKeyPolicy(deps: AppDeps, principal: Principal, input: KeyPolicyInput, meta: RequestMeta) {
  const now = deps.clock.now();
  const result = await deps.prisma.$transaction(async (tx) => {
    // The row locked before it is read: two changes at once each keep the other's fields, and audit what they replaced.
    await lockOrganization(tx, principal.organizationId);
    await requireStillHolds(tx, principal, 'org:update', 'Changing the API-key policy');
    const current = await tx.organization.findUnique({ where: { id: principal.organizationId }, select: policyColumns });
    if (!current) throw notFound('Organization');
    const before = keyPolicyOf(current);
    const after: KeyPolicy = {
      enabled: input.enabled,
      requireExpiration: input.require_expiration ?? before.requireExpiration,
      maxLifetimeDays: input.max_lifetime_days !== undefined ? input.max_lifetime_days : before.maxLifetimeDays,
      warnDaysBefore: input.warn_days_before !== undefined ? input.warn_days_before : before.warnDaysBefore,
      inactivityDays: input.inactivity_days !== undefined ? input.inactivity_days : before.inactivityDays,
    };
    if (after.maxLifetimeDays !== null && after.warnDaysBefore !== null && after.warnDaysBefore >= after.maxLifetimeDays) {
      throw unprocessable(
        `warn_days_before (${after.warnDaysBefore}) must be shorter than max_lifetime_days (${after.maxLifetimeDays}).`,
      );
    }
    await tx.organization.update({
      where: { id: principal.organizationId },
      data: {
        keyPolicyEnabled: after.enabled,
        keyPolicyRequireExpiry: after.requireExpiration,
        keyPolicyMaxLifetimeDays: after.maxLifetimeDays,
        keyPolicyWarnDays: after.warnDaysBefore,
        keyPolicyInactivityDays: after.inactivityDays,
      },
    });
    await recordAs(tx, principal, meta, now, {
      action: 'api_key_policy.updated',
      target: { type: 'organization', id: principal.organizationId },
      metadata: { before: presentKeyPolicy(before), after: presentKeyPolicy(after) },
    });
    return presentKeyPolicy(after);
  }, RECHECKED_TRANSACTION);
  await invalidateCachedPrincipals(deps, { organizationIds: [principal.organizationId] });
  return result;
}

/**
 * The expiration a new key gets under the policy, or a 422 naming the broken rule: none given and
 * `require_expiration` without a maximum lifetime; one beyond `max_lifetime_days`. None given with a maximum
 * lifetime: filled in as now + the maximum lifetime.
 */
export function expirationUnderPolicy(
  policy: KeyPolicy,
  requested: Date | undefined,
  now: Date,
): { expiresAt: Date | null; autoFilled: boolean } {
  if (!policy.enabled) return { expiresAt: requested ?? null, autoFilled: false };
  const latest = policy.maxLifetimeDays === null ? null : new Date(now.getTime() + policy.maxLifetimeDays * DAY_MS);
  if (!requested) {
    if (latest) return { expiresAt: latest, autoFilled: true };
    if (policy.requireExpiration) {
      throw unprocessable(
        "The organization's API-key policy requires an expiration (rule require_expiration): send expires_at.",
      );
    }
    return { expiresAt: null, autoFilled: false };
  }
  if (latest && requested > latest) {
    throw unprocessable(
      `expires_at is beyond the maximum key lifetime of ${policy.maxLifetimeDays} days set by the organization's ` +
        `API-key policy (rule max_lifetime_days): at most ${latest.toISOString()}.`,
    );
  }
  return { expiresAt: requested, autoFilled: false };
}
