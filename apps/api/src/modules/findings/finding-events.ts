// The `data` of the finding events: public identifiers and the finding's own fields only (no internal ids,
// no description text, no assignee, no source content). finding.status_changed adds previous_status;
// finding.sla_breached (packages/outbox/src/sla-scan.ts) adds sla_days and due_at.
import type { Finding } from '@svc/db';

export function findingEventData(f: Finding) {
  return {
    finding_id: f.id,
    assessment_id: f.assessmentId,
    project_id: f.projectId,
    title: f.title,
    severity: f.severity,
    status: f.status,
    location: f.location,
    fingerprint: f.fingerprint,
  };
}
