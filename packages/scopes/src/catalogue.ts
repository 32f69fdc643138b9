/** A concrete scope name of the form `category:action`, e.g. `projects:read`. */
export type Scope = string;

export interface ScopeDefinition {
  readonly name: Scope;
  readonly category: string;
  /** The "Grants" text of the specification. */
  readonly description: string;
}

// Category -> [action, grants]. Order and wording follow the specification's tables.
const TABLE: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, string]>]> = [
  ['org', [
    ['read', 'View organization profile, settings, metadata'],
    ['update', 'Change organization name, image, settings'],
    ['delete', 'Permanently delete the organization (owner only)'],
    ['transfer_ownership', 'Transfer owner role (owner only)'],
  ]],
  ['audit', [
    ['read', 'View audit-log events and action metadata'],
    ['export', 'Download audit-log events'],
  ]],
  ['governance', [
    ['read', 'View retention, SLA, erasure-request settings'],
    ['manage', 'Update retention and remediation SLA policies'],
    ['erase', 'File, cancel, retry GDPR erasure requests'],
  ]],
  ['profile', [
    ['read', 'View own profile and notification preferences'],
    ['update', 'Update own profile and notification preferences'],
  ]],
  ['billing', [
    ['read', 'View credit balance, invoices, usage'],
    ['manage', 'Add credits, change plan, update payment methods'],
  ]],
  ['members', [
    ['read', 'List members'],
    ['invite', 'Create invite links, send e-mail invites'],
    ['remove', "Revoke a member's access"],
    ['change_role', 'Promote or demote member roles'],
  ]],
  ['teams', [
    ['read', 'List teams and memberships'],
    ['create', 'Create a team'],
    ['update', 'Edit team metadata'],
    ['delete', 'Delete a team'],
    ['manage_members', 'Add or remove team members'],
  ]],
  ['integrations', [
    ['read', 'View connected source-host, chat integrations'],
    ['manage', 'Connect or disconnect integrations'],
    ['bind_team', 'Route integrations to a team'],
  ]],
  ['issue_exports', [
    ['read', 'View issue export targets and status'],
    ['configure', 'Create, update, revoke issue export targets'],
  ]],
  ['notification_targets', [
    ['read', 'View notification targets and delivery status'],
    ['configure', 'Create, update, revoke notification targets'],
    ['test', 'Send test messages to notification targets'],
  ]],
  ['source', [
    ['connect_personal', 'Connect a personal source-host account'],
    ['upload_zip', 'Upload zipped source for an assessment'],
    ['read_artifacts', 'Read extracted files of uploaded source'],
    ['download_archive', 'Download the original source archive'],
  ]],
  ['projects', [
    ['read', 'View projects and attached assessments'],
    ['create', 'Create projects'],
    ['update', 'Edit metadata, archive/unarchive'],
    ['delete', 'Permanently delete a project'],
    ['manage_source', 'Attach or update source repository or archive'],
  ]],
  ['assessments', [
    ['read', 'View assessments, drafts, traffic, files'],
    ['create', 'Launch assessments'],
    ['update', 'Edit draft metadata, settings, notes'],
    ['cancel', 'Cancel a running assessment'],
    ['emergency_stop', 'Emergency-stop an assessment'],
    ['archive', 'Soft-archive completed assessments'],
    ['delete', 'Permanently delete an assessment and its findings'],
    ['manage_access', 'Add or remove users/teams from an assessment'],
  ]],
  ['findings', [
    ['read', 'View findings'],
    ['triage', 'Confirm, dismiss, reassign findings'],
    ['edit_severity', 'Override severity'],
    ['accept_risk', 'Accept a finding as known risk'],
    ['suppress', 'Permanently suppress a finding'],
    ['export_issue', 'Export a finding to an external issue tracker'],
    ['export', 'Download findings as SARIF, JSON or CSV'],
  ]],
  ['reports', [
    ['read', 'View reports'],
    ['generate', 'Build a report from an assessment'],
    ['publish', 'Publish a report to a shareable URL'],
    ['share', 'Grant external access to a report'],
    ['revoke_share', 'Revoke external access'],
    ['download', 'Download a PDF report'],
  ]],
  ['api_keys', [
    ['read', 'List API keys you own'],
    ['create', 'Mint API keys'],
    ['revoke', 'Revoke API keys'],
    // Reserved by the specification: grants nothing; no endpoint requires it.
    ['rotate', 'Reserved for future use'],
  ]],
  ['webhooks', [
    ['read', 'View subscriptions and delivery logs; list subscriptions, deliveries, attempts'],
    ['create', 'Create subscriptions'],
    ['update', 'Edit subscriptions, test delivery, rotate secrets'],
    ['delete', 'Delete subscriptions'],
  ]],
];

/** Every scope of the specification, in the specification's order. */
export const SCOPE_CATALOGUE: ReadonlyArray<ScopeDefinition> = Object.freeze(
  TABLE.flatMap(([category, actions]) =>
    actions.map(([action, description]) =>
      Object.freeze({ name: `${category}:${action}`, category, description }),
    ),
  ),
);

export const ALL_SCOPES: ReadonlyArray<Scope> = Object.freeze(SCOPE_CATALOGUE.map((s) => s.name));

export const SCOPE_CATEGORIES: ReadonlyArray<string> = Object.freeze(TABLE.map(([category]) => category));

const KNOWN_SCOPES: ReadonlySet<string> = new Set(ALL_SCOPES);
const KNOWN_CATEGORIES: ReadonlySet<string> = new Set(SCOPE_CATEGORIES);

/** Exact, case-sensitive membership in the catalogue. Wildcards are not scopes. */
export function isKnownScope(name: unknown): name is Scope {
  return typeof name === 'string' && KNOWN_SCOPES.has(name);
}

export function isKnownCategory(category: unknown): category is string {
  return typeof category === 'string' && KNOWN_CATEGORIES.has(category);
}

/** The concrete scopes of one category, in catalogue order; empty for an unknown category. */
export function scopesOfCategory(category: string): Scope[] {
  return SCOPE_CATALOGUE.filter((s) => s.category === category).map((s) => s.name);
}

/** Code-unit order, so the result does not depend on the locale. */
export function sortedUnique(names: Iterable<string>): string[] {
  return [...new Set(names)].sort();
}
