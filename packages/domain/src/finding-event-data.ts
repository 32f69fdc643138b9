// The `data` of the finding events: public identifiers and the finding's own fields only (no internal ids, no
// description text, no assignee, no source content). finding.status_changed adds previous_status;
// finding.sla_breached adds sla_days and due_at. The API (triage) and the worker (SLA scan) both build it with this function.

export interface FindingFields {
  id: string;
  assessmentId: string;
  projectId: string;
  title: string;
  severity: string;
  status: string;
  location: string | null;
  fingerprint: string;
}

export function findingEventData(f: FindingFields) {
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
