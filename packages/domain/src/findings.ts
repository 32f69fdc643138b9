// The finding vocabulary: severities (most severe first) and statuses. The API validates with it, the worker
// renders reports with it, the webhook filters match on it.

export const SEVERITIES = ['critical', 'high', 'medium', 'low', 'info'] as const;
export type Severity = (typeof SEVERITIES)[number];

export const FINDING_STATUSES = [
  'open',
  'confirmed',
  'dismissed',
  'accepted_risk',
  'suppressed',
  'fixed',
  'regressed',
] as const;
export type FindingStatus = (typeof FINDING_STATUSES)[number];

/** True when `value` is one of the strings of `list` (a type guard for `as const` lists). */
export function isOneOf<T extends string>(list: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (list as readonly string[]).includes(value);
}

export function isSeverity(value: unknown): value is Severity {
  return isOneOf(SEVERITIES, value);
}

export function isFindingStatus(value: unknown): value is FindingStatus {
  return isOneOf(FINDING_STATUSES, value);
}
