// Resend and recover (DESIGN.md "Delivery operations"): which deliveries may be sent again, and the bounds of a
// recovery window.

export const RECOVERY_MAX_AGE_MS = 30 * 24 * 3600 * 1000;
export const RECOVERY_MAX_DELIVERIES = 10_000;

/** Why a delivery may not be resent, or null when it may: only finished deliveries of a live subscription. */
export function resendRefusal(
  delivery: { status: string },
  subscription: { status: string; deletedAt: Date | null },
): string | null {
  if (delivery.status === 'pending') return 'The delivery is still pending; it can be resent once it has succeeded or failed.';
  if (subscription.deletedAt) return 'The subscription is deleted.';
  if (subscription.status === 'disabled') return 'The subscription is not active; re-enable it first.';
  return null;
}

export interface RecoveryWindow {
  since: Date;
  until: Date;
}

/** The window to recover, or the reason it is refused: since before until, neither in the future, since at most 30 days back. */
export function recoveryWindow(since: Date, until: Date | undefined, now: Date): RecoveryWindow | string {
  const end = until ?? now;
  if (since.getTime() >= end.getTime()) return '`since` must be before `until`.';
  if (end.getTime() > now.getTime()) return '`until` must not be in the future.';
  if (now.getTime() - since.getTime() > RECOVERY_MAX_AGE_MS) return '`since` must be at most 30 days ago.';
  return { since, until: end };
}
