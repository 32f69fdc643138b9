// The remediation SLA rule: the governance routes, the finding presentation (`sla_due_at`) and the worker's SLA
// scan use it. The scan's SQL (apps/worker/src/sla-scan.ts) is built from SLA_DAYS_COLUMNS and SLA_OPEN_STATUSES
// below, and apps/worker/test/sla-scan.test.ts checks that the SQL and this code agree on every case.
//
// The rule:
// - each severity has a window in days, or null (no SLA for that severity);
// - a finding is "open" for SLA purposes while its status is open, confirmed or regressed;
// - its window counts from `openedAt`, the time it (re)entered an open status: a regression, or a re-triage out
//   of dismissed/accepted_risk, resets it (and clears the breach mark, so a new breach can be reported);
// - it is in breach when openedAt + days x 24 h < now (strictly: at the exact due instant it is not yet late).
// Days are 24-hour periods of UTC time; no calendar or business-day arithmetic.

import { SEVERITIES, type Severity } from './findings';

/** Every severity can carry a window. */
export const SLA_SEVERITIES = SEVERITIES;
export type SlaSeverity = Severity;

/** Days per severity; null = no SLA. */
export type SlaPolicy = Record<SlaSeverity, number | null>;

/** The organization default (issue 4): critical 7 days, high 30, medium 90, low 180, info none. */
export const DEFAULT_SLA_POLICY: Readonly<SlaPolicy> = Object.freeze({ critical: 7, high: 30, medium: 90, low: 180, info: null });

/** Bounds of a configured window, in days. */
export const MIN_SLA_DAYS = 1;
export const MAX_SLA_DAYS = 3650;

/** Statuses in which a finding still awaits remediation, so its SLA runs. */
export const SLA_OPEN_STATUSES = ['open', 'confirmed', 'regressed'] as const;

const DAY_MS = 24 * 3600 * 1000;

export function isSlaOpenStatus(status: string): boolean {
  return (SLA_OPEN_STATUSES as readonly string[]).includes(status);
}

export function slaDaysFor(policy: SlaPolicy, severity: string): number | null {
  return (SLA_SEVERITIES as readonly string[]).includes(severity) ? policy[severity as SlaSeverity] : null;
}

export function slaDueAt(openedAt: Date, days: number): Date {
  return new Date(openedAt.getTime() + days * DAY_MS);
}

export interface SlaFinding {
  status: string;
  severity: string;
  openedAt: Date;
}

/** When the finding's SLA window ends, or null when no SLA runs for it (closed status, or no window for its severity). */
export function findingSlaDueAt(finding: SlaFinding, policy: SlaPolicy): Date | null {
  if (!isSlaOpenStatus(finding.status)) return null;
  const days = slaDaysFor(policy, finding.severity);
  return days === null ? null : slaDueAt(finding.openedAt, days);
}

/** The organizations table's column holding each severity's window (the SLA scan's SQL is built from it). */
export const SLA_DAYS_COLUMNS: Readonly<Record<SlaSeverity, string>> = Object.freeze({
  critical: 'sla_critical_days',
  high: 'sla_high_days',
  medium: 'sla_medium_days',
  low: 'sla_low_days',
  info: 'sla_info_days',
});

/** The organization columns that hold the policy. */
export interface SlaColumns {
  slaCriticalDays: number | null;
  slaHighDays: number | null;
  slaMediumDays: number | null;
  slaLowDays: number | null;
  slaInfoDays: number | null;
}

export function slaPolicyFromColumns(c: SlaColumns): SlaPolicy {
  return { critical: c.slaCriticalDays, high: c.slaHighDays, medium: c.slaMediumDays, low: c.slaLowDays, info: c.slaInfoDays };
}

export function slaPolicyToColumns(p: SlaPolicy): SlaColumns {
  return { slaCriticalDays: p.critical, slaHighDays: p.high, slaMediumDays: p.medium, slaLowDays: p.low, slaInfoDays: p.info };
}
