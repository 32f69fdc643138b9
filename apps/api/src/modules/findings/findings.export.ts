// Finding exports: SARIF 2.1.0, JSON and CSV renderings of the findings a query selects. The renderers are pure
// (presented findings in, text out); exportFindings reads the rows and sends the response.
import type { Response } from 'express';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { loadSlaPolicy } from '../governance/governance.service';
import { findingsWhere, presentFinding, type FindingFilters, type PresentedFinding } from './findings.service';
import { scopedTo } from '@svc/db';
import { csvField } from '../../http/csv';

export const EXPORT_FORMATS = ['sarif', 'json', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const TOOL_NAME = 'Security Assessment Service';
export const TOOL_VERSION = '1.0.0';
/** The finalized SARIF 2.1.0 schema, as GitHub code scanning and the SARIF SDK refer to it. */
export const SARIF_SCHEMA_URI = 'https://json.schemastore.org/sarif-2.1.0.json';

// ---------------------------------------------------------------------------------------------------------------
// SARIF 2.1.0

/** SARIF result levels by severity; GitHub code scanning reads `security-severity` (0.0-10.0) from the rule. */
const SARIF_LEVEL: Record<string, 'error' | 'warning' | 'note'> = { critical: 'error', high: 'error', medium: 'warning', low: 'note', info: 'note' };
const SECURITY_SEVERITY: Record<string, string> = { critical: '9.5', high: '8.0', medium: '5.5', low: '3.0', info: '0.0' };

/** Statuses a SARIF consumer should show as suppressed (SARIF 3.35), with the justification given. */
const SUPPRESSED_BECAUSE: Record<string, string> = {
  dismissed: 'Dismissed during triage.',
  accepted_risk: 'Accepted as a known risk.',
  suppressed: 'Permanently suppressed.',
};

/**
 * A finding's location as SARIF: `path`, `path:line` or `path:line:column` (and URLs) become a physical location
 * whose URI is percent-encoded into a valid URI reference; anything with spaces ("POST /login", "Login form") is a
 * logical location.
 */
export function sarifLocation(location: string | null) {
  if (!location) return undefined;
  if (/\s/.test(location)) return { logicalLocations: [{ fullyQualifiedName: location }] };
  let path = location;
  let region: { startLine: number; startColumn?: number } | undefined;
  const withLine = location.includes('://') ? null : /^(.+?):(\d+)(?::(\d+))?$/.exec(location);
  if (withLine && Number(withLine[2]) >= 1) {
    path = withLine[1];
    region = { startLine: Number(withLine[2]), ...(withLine[3] && Number(withLine[3]) >= 1 && { startColumn: Number(withLine[3]) }) };
  }
  return { physicalLocation: { artifactLocation: { uri: encodeURI(path) }, ...(region && { region }) } };
}

export function renderSarif(findings: PresentedFinding[]) {
  const ruleIndex = new Map<string, number>();
  const rules: object[] = [];
  for (const f of findings) {
    if (ruleIndex.has(f.fingerprint)) continue;
    ruleIndex.set(f.fingerprint, rules.length);
    rules.push({
      id: f.fingerprint,
      shortDescription: { text: f.title },
      defaultConfiguration: { level: SARIF_LEVEL[f.severity] ?? 'warning' },
      properties: { 'security-severity': SECURITY_SEVERITY[f.severity] ?? '5.5', tags: ['security'] },
    });
  }
  const results = findings.map((f) => {
    const location = sarifLocation(f.location);
    const fixed = f.status === 'fixed';
    const suppression = SUPPRESSED_BECAUSE[f.status];
    return {
      ruleId: f.fingerprint,
      ruleIndex: ruleIndex.get(f.fingerprint)!,
      // A fixed finding is a check that now passes (SARIF: kind "pass" has level "none").
      kind: fixed ? 'pass' : 'fail',
      level: fixed ? 'none' : (SARIF_LEVEL[f.severity] ?? 'warning'),
      message: { text: f.description ? `${f.title}\n\n${f.description}` : f.title },
      ...(location && { locations: [location] }),
      partialFingerprints: { 'findingFingerprint/v1': f.fingerprint },
      ...(suppression && { suppressions: [{ kind: 'external', status: 'accepted', justification: suppression }] }),
      properties: {
        finding_id: f.id,
        assessment_id: f.assessment_id,
        project_id: f.project_id,
        severity: f.severity,
        status: f.status,
        opened_at: f.opened_at,
        ...(f.sla_due_at && { sla_due_at: f.sla_due_at }),
      },
    };
  });
  return {
    $schema: SARIF_SCHEMA_URI,
    version: '2.1.0',
    runs: [{ tool: { driver: { name: TOOL_NAME, version: TOOL_VERSION, rules } }, results }],
  };
}

// ---------------------------------------------------------------------------------------------------------------
// CSV (RFC 4180)

export const CSV_COLUMNS = [
  'id', 'project_id', 'assessment_id', 'title', 'severity', 'original_severity', 'status', 'location', 'description',
  'fingerprint', 'assignee_user_id', 'opened_at', 'sla_due_at', 'sla_breached_at', 'fixed_at', 'created_at', 'updated_at',
] as const satisfies ReadonlyArray<keyof PresentedFinding>;


/** Header line and one record per finding, CRLF-terminated (RFC 4180 2.1-2.3). */
export function renderCsv(findings: PresentedFinding[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const f of findings) lines.push(CSV_COLUMNS.map((c) => csvField(f[c])).join(','));
  return lines.map((l) => `${l}\r\n`).join('');
}

// ---------------------------------------------------------------------------------------------------------------

const BATCH = 1000;

export async function exportFindings(
  deps: AppDeps,
  principal: Principal,
  query: FindingFilters & { format: ExportFormat },
  res: Response,
): Promise<void> {
  const where = await findingsWhere(deps, principal, query);
  const policy = await loadSlaPolicy(deps, principal.organizationId);
  const db = scopedTo(deps.prisma, principal);
  const findings: PresentedFinding[] = [];
  // Oldest first, read in batches along the id (time-ordered) so a large export never holds one huge query.
  for (let cursor: string | undefined; ; ) {
    const rows = await db.finding.findMany({
      where: { ...where, ...(cursor && { id: { gt: cursor } }) },
      orderBy: { id: 'asc' },
      take: BATCH,
    });
    findings.push(...rows.map((f) => presentFinding(f, policy)));
    if (rows.length < BATCH) break;
    cursor = rows[rows.length - 1].id;
  }
  const stamp = deps.clock.now().toISOString().slice(0, 10);
  const send = (type: string, extension: string, body: string) =>
    res
      .status(200)
      .set({ 'Content-Type': type, 'Content-Disposition': `attachment; filename="findings-${stamp}.${extension}"` })
      .send(body);
  switch (query.format) {
    case 'sarif':
      send('application/sarif+json', 'sarif', JSON.stringify(renderSarif(findings)));
      return;
    case 'json':
      send('application/json', 'json', JSON.stringify({ exported_at: deps.clock.now().toISOString(), count: findings.length, data: findings }));
      return;
    case 'csv':
      send('text/csv; charset=utf-8', 'csv', renderCsv(findings));
      return;
  }
}
