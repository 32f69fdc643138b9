// The personal-data inventory: every text, JSON, text-array and byte column of prisma/schema.prisma, each with the
// one class that says what a GDPR erasure may do with it. The erasure job (apps/worker/src/erasure.ts) reads ONLY
// this list: it never discovers columns in the database, so a column nobody classified is never written.
// apps/api/test/personal-data-inventory.test.ts compares it with the live schema and fails on a column missing here.
//
// Classes:
// - account: the person's own account (users row, sign-in identities, personal tokens, security notices). Written
//   or deleted only when the request names a user who belongs to no other organization, and only that user's rows.
// - reference: rows that point at the person by id within the organization (an audit entry's actor): the label
//   becomes the pseudonym, the IP and user agent are cleared.
// - email_keyed: rows of the organization keyed by an e-mail address (invitations, report share grants,
//   notification recipients): the exact address (case-insensitive) is replaced, or removed from a list.
// - free_text: text of the organization's rows that may quote the person: the exact e-mail is replaced always,
//   the name only when `searchableName` accepts it. `bytes` (report PDFs) are derived: regenerated, not edited.
// - never: ids, credentials, hashes, tokens, sealed values, URLs, organization names, settings, enums, source
//   code. No erasure writes them, whatever the person's name or e-mail is.

export type PersonalDataClass = 'account' | 'reference' | 'email_keyed' | 'free_text' | 'never';
export type StoredKind = 'text' | 'json' | 'text_array' | 'bytes';

/** How a table's rows belong to one organization. */
export type TableScope =
  | { organizationColumn: string }
  /** A child table without its own organization column: its rows belong to the parent row's organization. */
  | { parent: { table: string; foreignKey: string; key: string; organizationColumn: string } }
  /** No organization: only the person's own account rows, selected by user id. */
  | { account: { userColumn: string } }
  /** Never written by an erasure. */
  | 'untouched';

export interface InventoryTable {
  table: string;
  /** The unique column free-text batches walk in order (keyset pagination). */
  key: string;
  scope: TableScope;
  columns: Record<string, [StoredKind, PersonalDataClass]>;
}

const ORG = { organizationColumn: 'organization_id' } as const;
const N: [StoredKind, PersonalDataClass] = ['text', 'never'];
const FREE: [StoredKind, PersonalDataClass] = ['text', 'free_text'];
const FREE_JSON: [StoredKind, PersonalDataClass] = ['json', 'free_text'];

export const PERSONAL_DATA_INVENTORY: readonly InventoryTable[] = [
  { table: 'access_grants', key: 'id', scope: 'untouched', columns: { id: N, organization_id: N, project_id: N, assessment_id: N, user_id: N, team_id: N } },
  {
    table: 'api_keys',
    key: 'id',
    scope: ORG,
    columns: { id: N, organization_id: N, user_id: N, name: FREE, display_prefix: N, key_hash: N, revoked_reason: N, scopes: ['text_array', 'never'] },
  },
  {
    table: 'assessments',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, project_id: N, created_by_id: N, status: N,
      name: FREE, description: FREE, notes: FREE, summary: FREE_JSON,
      settings: ['json', 'never'],
    },
  },
  {
    table: 'audit_events',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, actor_type: N, actor_id: N, action: N, target_type: N, target_id: N,
      actor_label: ['text', 'reference'], ip: ['text', 'reference'], user_agent: ['text', 'reference'],
      metadata: FREE_JSON,
    },
  },
  // Single-use tokens of the account: deleted with it, never edited.
  { table: 'email_tokens', key: 'id', scope: { account: { userColumn: 'user_id' } }, columns: { id: N, user_id: N, purpose: N, token_hash: N } },
  {
    table: 'erasure_requests',
    key: 'id',
    scope: 'untouched',
    columns: {
      id: N, organization_id: N, subject_user_id: N, subject_email_key: N, subject_enc: N, status: N, pseudonym_name: N,
      pseudonym_email: N, requested_by_id: N, confirmed_by_id: N, error: N, receipt: ['json', 'never'], preview: ['json', 'never'],
      progress: ['json', 'never'],
    },
  },
  { table: 'events', key: 'id', scope: ORG, columns: { id: N, organization_id: N, type: N, project_id: N, assessment_id: N, data: FREE_JSON } },
  {
    table: 'finding_issue_exports',
    key: 'id',
    scope: ORG,
    columns: { id: N, organization_id: N, finding_id: N, target_id: N, status: N, external_key: N, external_url: N, last_error: FREE },
  },
  {
    table: 'findings',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, project_id: N, assessment_id: N, assignee_id: N, fingerprint: N, severity: N, original_severity: N, status: N,
      title: FREE, location: FREE, description: FREE,
    },
  },
  { table: 'fix_verifications', key: 'id', scope: ORG, columns: { id: N, organization_id: N, finding_id: N, status: N, result: FREE } },
  {
    table: 'integrations',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, kind: N, auth_method: N, credential_enc: N, credential_hint: N, installation_id: N, base_url: N,
      workspace_id: N, status: N, created_by_id: N, name: FREE,
    },
  },
  // A retried POST's stored answer: sealed, and gone 24 h after the request (the worker's sweep), like the key itself.
  {
    table: 'idempotency_keys',
    key: 'organization_id',
    scope: 'untouched',
    columns: { organization_id: N, credential: N, key: N, request_hash: N, state: N, lock_token: N, response_body_enc: N },
  },
  {
    table: 'invitations',
    key: 'id',
    scope: ORG,
    columns: { id: N, organization_id: N, invited_by_id: N, token_hash: N, email: ['text', 'email_keyed'] },
  },
  {
    table: 'issue_export_targets',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, kind: N, base_url: N, repository: N, project_key: N, issue_type: N, credentials_enc: N, credential_destination: N,
      name: FREE, last_error: FREE,
    },
  },
  { table: 'memberships', key: 'id', scope: 'untouched', columns: { id: N, organization_id: N, user_id: N } },
  {
    table: 'oauth_identities',
    key: 'id',
    scope: { account: { userColumn: 'user_id' } },
    columns: { id: N, user_id: N, provider: ['text', 'account'], subject: ['text', 'account'], email: ['text', 'account'] },
  },
  { table: 'organizations', key: 'id', scope: 'untouched', columns: { id: N, name: N } },
  {
    table: 'personal_source_connections',
    key: 'id',
    scope: { account: { userColumn: 'user_id' } },
    columns: {
      id: N, user_id: N, provider: ['text', 'account'], subject: ['text', 'account'], login: ['text', 'account'],
      scopes: ['text_array', 'account'], token_enc: ['text', 'account'],
    },
  },
  { table: 'pr_reviews', key: 'id', scope: 'untouched', columns: { id: N, organization_id: N, project_id: N, repository: N, verdict: N, url: N } },
  // Uploaded source code and where it came from are out of reach (docs/domain.md, "GDPR erasure").
  {
    table: 'project_sources',
    key: 'project_id',
    scope: 'untouched',
    columns: { project_id: N, organization_id: N, kind: N, repository_url: N, default_branch: N, archive_id: N },
  },
  { table: 'projects', key: 'id', scope: ORG, columns: { id: N, organization_id: N, name: FREE, description: FREE } },
  {
    table: 'report_shares',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, report_id: N, kind: N, token_hash: N, created_by_id: N, revoked_by_id: N,
      email: ['text', 'email_keyed'],
    },
  },
  // The text a stored PDF was rendered from: rewritten like the rows it was taken from, so that the erasure's report
  // step finds the PDFs that named the person by the pseudonym in it, whatever those rows became since.
  {
    table: 'report_rendered_texts',
    key: 'report_id',
    scope: { parent: { table: 'reports', foreignKey: 'report_id', key: 'id', organizationColumn: 'organization_id' } },
    columns: { report_id: N, text: FREE },
  },
  {
    table: 'reports',
    key: 'id',
    scope: ORG,
    columns: { id: N, organization_id: N, assessment_id: N, status: N, requested_by_id: N, title: FREE, error: FREE, pdf: ['bytes', 'free_text'] },
  },
  // Mails owed to the account (security notices): deleted with it, never edited.
  {
    table: 'security_notices',
    key: 'id',
    scope: { account: { userColumn: 'user_id' } },
    columns: { id: N, user_id: N, kind: N, details: ['json', 'account'], ip: ['text', 'account'] },
  },
  { table: 'sessions', key: 'id', scope: 'untouched', columns: { id: N, user_id: N, organization_id: N } },
  {
    table: 'source_archives',
    key: 'id',
    scope: 'untouched',
    columns: { id: N, organization_id: N, project_id: N, assessment_id: N, sha256: N, storage_prefix: N, created_by_id: N },
  },
  { table: 'source_files', key: 'archive_id', scope: 'untouched', columns: { archive_id: N, organization_id: N, path: N, sha256: N } },
  { table: 'spend_limits', key: 'id', scope: 'untouched', columns: { id: N, organization_id: N, project_id: N, kind: N } },
  { table: 'team_integrations', key: 'id', scope: 'untouched', columns: { id: N, organization_id: N, team_id: N, integration_id: N, kind: N } },
  { table: 'team_members', key: 'team_id', scope: 'untouched', columns: { team_id: N, user_id: N } },
  { table: 'teams', key: 'id', scope: ORG, columns: { id: N, organization_id: N, name: FREE, description: FREE } },
  { table: 'usage_records', key: 'id', scope: ORG, columns: { id: N, organization_id: N, project_id: N, description: FREE } },
  {
    table: 'users',
    key: 'id',
    scope: { account: { userColumn: 'id' } },
    columns: {
      id: N, email: ['text', 'account'], name: ['text', 'account'], password_hash: ['text', 'account'],
      totp_secret_enc: ['text', 'account'], totp_pending_enc: ['text', 'account'],
    },
  },
  {
    table: 'webhook_attempts',
    key: 'id',
    scope: { parent: { table: 'webhook_deliveries', foreignKey: 'delivery_id', key: 'id', organizationColumn: 'organization_id' } },
    columns: { id: N, delivery_id: N, outcome: N, response_body: FREE, error: FREE, response_headers: FREE_JSON },
  },
  {
    table: 'webhook_deliveries',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, subscription_id: N, event_id: N, event_type: N, payload_format: N, wait_reason: N, redelivery_of: N,
      hec_ack_channel: N, hec_ack_destination: N,
      payload: FREE_JSON, failure_reason: FREE,
    },
  },
  {
    table: 'webhook_subscriptions',
    key: 'id',
    scope: ORG,
    columns: {
      id: N, organization_id: N, project_id: N, assessment_id: N, url: N, payload_format: N, kind: N, breaker_state: N,
      disabled_reason: N, splunk_index: N, splunk_channel: N, secret_enc: N, previous_secret_enc: N, authorization_enc: N,
      azure_credentials_enc: N, configured_by_user_id: N, url_enc: N, credential_destination: N, signature_scheme: N, events: ['text_array', 'never'], severity_filter: ['text_array', 'never'], status_filter: ['text_array', 'never'],
      email_recipients: ['text_array', 'email_keyed'], name: FREE,
    },
  },
];

export interface InventoryColumn {
  table: string;
  column: string;
  kind: StoredKind;
  class: PersonalDataClass;
}

export function inventoryColumns(): InventoryColumn[] {
  return PERSONAL_DATA_INVENTORY.flatMap((t) =>
    Object.entries(t.columns).map(([column, [kind, cls]]) => ({ table: t.table, column, kind, class: cls })),
  );
}

export function inventoryTable(table: string): InventoryTable {
  const found = PERSONAL_DATA_INVENTORY.find((t) => t.table === table);
  if (!found) throw new Error(`No inventory entry for ${table}`);
  return found;
}

/** One free-text pass: a table of the organization and its free-text columns that can be edited in place. */
export interface FreeTextPass {
  table: string;
  key: string;
  scope: Exclude<TableScope, 'untouched' | { account: unknown }>;
  columns: Array<{ column: string; kind: Exclude<StoredKind, 'bytes'> }>;
}

/** The free-text passes of an erasure, in a fixed order (the job records its progress as an index into it). */
export function freeTextPasses(): FreeTextPass[] {
  const passes: FreeTextPass[] = [];
  for (const t of PERSONAL_DATA_INVENTORY) {
    const columns = Object.entries(t.columns)
      .filter(([, [kind, cls]]) => cls === 'free_text' && kind !== 'bytes')
      .map(([column, [kind]]) => ({ column, kind: kind as Exclude<StoredKind, 'bytes'> }));
    if (columns.length === 0) continue;
    if (t.scope === 'untouched' || 'account' in t.scope) throw new Error(`${t.table} has free text but no organization scope`);
    passes.push({ table: t.table, key: t.key, scope: t.scope, columns });
  }
  return passes;
}
