// Subscription health (DESIGN.md): 3 consecutive terminal delivery failures -> `failing`; 10 consecutive terminal
// failures spanning at least 24 h -> `disabled` automatically. Any success resets the count and returns `failing`
// to `active`. Pure functions of the current state; the caller holds the row lock while it applies them.

/** The subscription statuses (the database enum SubscriptionStatus). */
export const SUBSCRIPTION_STATUSES = ['active', 'failing', 'disabled'] as const;
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

/** Why a route was disabled when the person who last configured it lost the organization-wide role or left. */
export const CONFIGURER_LOST_ROLE_REASON =
  'configured by someone without an organization-wide role: an owner or admin must re-enable it';

/** The thresholds; defaults are DESIGN.md's, and the config module's defaults (WEBHOOK_*_FAILURES, ...) come from here. */
export interface HealthRules {
  failingAfterFailures: number;
  disableAfterFailures: number;
  disableMinSpanMs: number;
}

export const DEFAULT_HEALTH_RULES: HealthRules = Object.freeze({
  failingAfterFailures: 3,
  disableAfterFailures: 10,
  disableMinSpanMs: 24 * 3600 * 1000,
});

export interface SubscriptionHealth {
  status: SubscriptionStatus;
  consecutiveFailures: number;
  firstFailureAt: Date | null;
  disabledReason: string | null;
}

export function healthAfterSuccess(current: SubscriptionHealth): SubscriptionHealth {
  return {
    ...current,
    status: current.status === 'failing' ? 'active' : current.status,
    consecutiveFailures: 0,
    firstFailureAt: null,
  };
}

export function healthAfterTerminalFailure(
  current: SubscriptionHealth,
  now: Date,
  rules: HealthRules = DEFAULT_HEALTH_RULES,
): SubscriptionHealth {
  const consecutiveFailures = current.consecutiveFailures + 1;
  const firstFailureAt = current.firstFailureAt ?? now;
  const next = { ...current, consecutiveFailures, firstFailureAt };
  if (current.status === 'disabled') return next;
  const spanMs = now.getTime() - firstFailureAt.getTime();
  if (consecutiveFailures >= rules.disableAfterFailures && spanMs >= rules.disableMinSpanMs) {
    const reason = `${consecutiveFailures} consecutive failed deliveries over ${Math.floor(spanMs / 3600_000)} hours`;
    return { ...next, status: 'disabled', disabledReason: reason };
  }
  if (consecutiveFailures >= rules.failingAfterFailures) return { ...next, status: 'failing' };
  return next;
}

export function healthAfterUnsafeUrl(current: SubscriptionHealth, reason: string): SubscriptionHealth {
  return { ...current, status: 'disabled', disabledReason: `URL became unsafe: ${reason}` };
}

export function healthAfterGone(current: SubscriptionHealth): SubscriptionHealth {
  return { ...current, status: 'disabled', disabledReason: 'the receiver answered 410 Gone: the endpoint no longer exists' };
}
