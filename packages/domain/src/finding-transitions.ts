// Which finding status may follow which, in one table. Every status change, whichever route or job makes it
// (triage, fix verification, monitoring), goes through changeFindingStatus in the API's findings.service.ts,
// which checks this table.
//
// - `suppressed` is final.
// - `fixed` comes back only through a regression (monitoring finds it again): fixed -> regressed.
// - `regressed` is reachable only from `fixed`; nothing returns to `open` (open is the status of a new finding).
// - dismissed and accepted_risk can be re-triaged (confirm), which reopens the SLA window.
import type { FindingStatus } from './findings';

export const FINDING_TRANSITIONS: Readonly<Record<FindingStatus, readonly FindingStatus[]>> = {
  open: ['confirmed', 'dismissed', 'accepted_risk', 'suppressed', 'fixed'],
  confirmed: ['dismissed', 'accepted_risk', 'suppressed', 'fixed'],
  dismissed: ['confirmed', 'suppressed'],
  accepted_risk: ['confirmed', 'suppressed', 'fixed'],
  fixed: ['regressed'],
  regressed: ['confirmed', 'dismissed', 'accepted_risk', 'suppressed', 'fixed'],
  suppressed: [],
};

export function canChangeFindingStatus(from: string, to: string): boolean {
  return (FINDING_TRANSITIONS[from as FindingStatus] ?? []).includes(to as FindingStatus);
}
