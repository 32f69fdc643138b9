// Literal copies of the specification's tables, kept apart from the implementation so a test fails
// when either drifts.

export const EXPECTED_CATALOGUE: Record<string, Record<string, string>> = {
  org: {
    'org:read': 'View organization profile, settings, metadata',
    'org:update': 'Change organization name, image, settings',
    'org:delete': 'Permanently delete the organization (owner only)',
    'org:transfer_ownership': 'Transfer owner role (owner only)',
  },
  audit: {
    'audit:read': 'View audit-log events and action metadata',
    'audit:export': 'Download audit-log events',
  },
  governance: {
    'governance:read': 'View retention, SLA, erasure-request settings',
    'governance:manage': 'Update retention and remediation SLA policies',
    'governance:erase': 'File, cancel, retry GDPR erasure requests',
  },
  profile: {
    'profile:read': 'View own profile and notification preferences',
    'profile:update': 'Update own profile and notification preferences',
  },
  billing: {
    'billing:read': 'View credit balance, invoices, usage',
    'billing:manage': 'Add credits, change plan, update payment methods',
  },
  members: {
    'members:read': 'List members',
    'members:invite': 'Create invite links, send e-mail invites',
    'members:remove': "Revoke a member's access",
    'members:change_role': 'Promote or demote member roles',
  },
  teams: {
    'teams:read': 'List teams and memberships',
    'teams:create': 'Create a team',
    'teams:update': 'Edit team metadata',
    'teams:delete': 'Delete a team',
    'teams:manage_members': 'Add or remove team members',
  },
  integrations: {
    'integrations:read': 'View connected source-host, chat integrations',
    'integrations:manage': 'Connect or disconnect integrations',
    'integrations:bind_team': 'Route integrations to a team',
  },
  issue_exports: {
    'issue_exports:read': 'View issue export targets and status',
    'issue_exports:configure': 'Create, update, revoke issue export targets',
  },
  notification_targets: {
    'notification_targets:read': 'View notification targets and delivery status',
    'notification_targets:configure': 'Create, update, revoke notification targets',
    'notification_targets:test': 'Send test messages to notification targets',
  },
  source: {
    'source:connect_personal': 'Connect a personal source-host account',
    'source:upload_zip': 'Upload zipped source for an assessment',
    'source:read_artifacts': 'Read extracted files of uploaded source',
    'source:download_archive': 'Download the original source archive',
  },
  projects: {
    'projects:read': 'View projects and attached assessments',
    'projects:create': 'Create projects',
    'projects:update': 'Edit metadata, archive/unarchive',
    'projects:delete': 'Permanently delete a project',
    'projects:manage_source': 'Attach or update source repository or archive',
  },
  assessments: {
    'assessments:read': 'View assessments, drafts, traffic, files',
    'assessments:create': 'Launch assessments',
    'assessments:update': 'Edit draft metadata, settings, notes',
    'assessments:cancel': 'Cancel a running assessment',
    'assessments:emergency_stop': 'Emergency-stop an assessment',
    'assessments:archive': 'Soft-archive completed assessments',
    'assessments:delete': 'Permanently delete an assessment and its findings',
    'assessments:manage_access': 'Add or remove users/teams from an assessment',
  },
  findings: {
    'findings:read': 'View findings',
    'findings:triage': 'Confirm, dismiss, reassign findings',
    'findings:edit_severity': 'Override severity',
    'findings:accept_risk': 'Accept a finding as known risk',
    'findings:suppress': 'Permanently suppress a finding',
    'findings:export_issue': 'Export a finding to an external issue tracker',
    'findings:export': 'Download findings as SARIF, JSON or CSV',
  },
  reports: {
    'reports:read': 'View reports',
    'reports:generate': 'Build a report from an assessment',
    'reports:publish': 'Publish a report to a shareable URL',
    'reports:share': 'Grant external access to a report',
    'reports:revoke_share': 'Revoke external access',
    'reports:download': 'Download a PDF report',
  },
  api_keys: {
    'api_keys:read': 'List API keys you own',
    'api_keys:create': 'Mint API keys',
    'api_keys:revoke': 'Revoke API keys',
    'api_keys:rotate': 'Reserved for future use',
  },
  webhooks: {
    'webhooks:read': 'View subscriptions and delivery logs; list subscriptions, deliveries, attempts',
    'webhooks:create': 'Create subscriptions',
    'webhooks:update': 'Edit subscriptions, test delivery, rotate secrets',
    'webhooks:delete': 'Delete subscriptions',
  },
};

export const EXPECTED_COUNTS: Record<string, number> = {
  org: 4,
  audit: 2,
  governance: 3,
  profile: 2,
  billing: 2,
  members: 4,
  teams: 5,
  integrations: 3,
  issue_exports: 2,
  notification_targets: 3,
  source: 4,
  projects: 5,
  assessments: 8,
  findings: 7,
  reports: 6,
  api_keys: 4,
  webhooks: 4,
};

export const EXPECTED_TOTAL = 68;

export const OWNER_BUNDLE = [
  'org:read', 'org:update', 'org:delete', 'org:transfer_ownership',
  'audit:read', 'audit:export',
  'governance:read', 'governance:manage', 'governance:erase',
  'profile:read', 'profile:update',
  'billing:read', 'billing:manage',
  'members:read', 'members:invite', 'members:remove', 'members:change_role',
  'teams:read', 'teams:create', 'teams:update', 'teams:delete', 'teams:manage_members',
  'integrations:read', 'integrations:manage', 'integrations:bind_team',
  'issue_exports:read', 'issue_exports:configure',
  'notification_targets:read', 'notification_targets:configure', 'notification_targets:test',
  'source:connect_personal', 'source:upload_zip', 'source:read_artifacts', 'source:download_archive',
  'projects:read', 'projects:create', 'projects:update', 'projects:delete', 'projects:manage_source',
  'assessments:read', 'assessments:create', 'assessments:update', 'assessments:cancel',
  'assessments:emergency_stop', 'assessments:archive', 'assessments:delete', 'assessments:manage_access',
  'findings:read', 'findings:triage', 'findings:edit_severity', 'findings:accept_risk',
  'findings:suppress', 'findings:export_issue', 'findings:export',
  'reports:read', 'reports:generate', 'reports:publish', 'reports:share', 'reports:revoke_share',
  'reports:download',
  'api_keys:read', 'api_keys:create', 'api_keys:revoke', 'api_keys:rotate',
  'webhooks:read', 'webhooks:create', 'webhooks:update', 'webhooks:delete',
];

// Owner minus org:delete and org:transfer_ownership.
export const ADMIN_BUNDLE = [
  'org:read', 'org:update',
  'audit:read', 'audit:export',
  'governance:read', 'governance:manage', 'governance:erase',
  'profile:read', 'profile:update',
  'billing:read', 'billing:manage',
  'members:read', 'members:invite', 'members:remove', 'members:change_role',
  'teams:read', 'teams:create', 'teams:update', 'teams:delete', 'teams:manage_members',
  'integrations:read', 'integrations:manage', 'integrations:bind_team',
  'issue_exports:read', 'issue_exports:configure',
  'notification_targets:read', 'notification_targets:configure', 'notification_targets:test',
  'source:connect_personal', 'source:upload_zip', 'source:read_artifacts', 'source:download_archive',
  'projects:read', 'projects:create', 'projects:update', 'projects:delete', 'projects:manage_source',
  'assessments:read', 'assessments:create', 'assessments:update', 'assessments:cancel',
  'assessments:emergency_stop', 'assessments:archive', 'assessments:delete', 'assessments:manage_access',
  'findings:read', 'findings:triage', 'findings:edit_severity', 'findings:accept_risk',
  'findings:suppress', 'findings:export_issue', 'findings:export',
  'reports:read', 'reports:generate', 'reports:publish', 'reports:share', 'reports:revoke_share',
  'reports:download',
  'api_keys:read', 'api_keys:create', 'api_keys:revoke', 'api_keys:rotate',
  'webhooks:read', 'webhooks:create', 'webhooks:update', 'webhooks:delete',
];

export const MANAGER_BUNDLE = [
  'org:read',
  'profile:read', 'profile:update',
  'members:read',
  'teams:read',
  'integrations:read',
  // SPEC: read on issue exports, notification targets and source artifacts, nothing else of those categories.
  'issue_exports:read',
  'notification_targets:read',
  'source:read_artifacts',
  'projects:read', 'projects:create', 'projects:update', 'projects:delete', 'projects:manage_source',
  'assessments:read', 'assessments:create', 'assessments:update', 'assessments:cancel',
  'assessments:emergency_stop', 'assessments:archive', 'assessments:manage_access',
  'findings:read', 'findings:triage', 'findings:edit_severity', 'findings:accept_risk',
  'findings:export_issue', 'findings:export',
  'reports:read', 'reports:generate', 'reports:publish', 'reports:share', 'reports:revoke_share',
  'reports:download',
  'api_keys:read', 'api_keys:create', 'api_keys:revoke',
];

export const MEMBER_BUNDLE = [
  'org:read',
  'profile:read', 'profile:update',
  'members:read',
  'teams:read',
  'integrations:read',
  'issue_exports:read',
  'projects:read',
  'assessments:read',
  'findings:read', 'findings:triage',
  'reports:read',
  'api_keys:read', 'api_keys:revoke',
];

export const EXPECTED_BUNDLES = {
  owner: OWNER_BUNDLE,
  admin: ADMIN_BUNDLE,
  manager: MANAGER_BUNDLE,
  member: MEMBER_BUNDLE,
} as const;

export function sorted(values: Iterable<string>): string[] {
  return [...values].sort();
}
