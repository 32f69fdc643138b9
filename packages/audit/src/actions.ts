// The audit-log actions: every security-relevant change the API or the worker records. Filters accept these
// names only.
export const AUDIT_ACTIONS = [
  'auth.login',
  'auth.login_failed',
  'auth.logout',
  'auth.password_changed',
  'auth.password_reset',
  'auth.password_reset_requested',
  'auth.2fa_enabled',
  'auth.2fa_disabled',
  'api_key.created',
  'api_key.revoked',
  'api_key_policy.updated',
  'member.role_changed',
  'member.removed',
  'organization.ownership_transferred',
  'access_grant.created',
  'access_grant.updated',
  'access_grant.deleted',
  'team.created',
  'team.updated',
  'team.deleted',
  'team.member_added',
  'team.member_removed',
  'organization.renamed',
  'invitation.created',
  'invitation.revoked',
  'invitation.accepted',
  'governance.sla_updated',
  'webhook.subscription_created',
  'webhook.subscription_updated',
  'webhook.subscription_deleted',
  'webhook.secret_rotated',
  'webhook.delivery_resent',
  'webhook.deliveries_recovered',
  'webhook.subscription_failing',
  'webhook.breaker_opened',
  'webhook.subscription_disabled',
  'webhook.subscription_reenabled',
  'source.uploaded',
  'source.archive_downloaded',
  'project.source_changed',
  'project.source_removed',
  'notification_target.created',
  'notification_target.updated',
  'notification_target.revoked',
  'issue_export_target.created',
  'issue_export_target.updated',
  'issue_export_target.revoked',
  'finding.issue_exported',
  'report.published',
  'report.unpublished',
  'report.share_granted',
  'report.share_revoked',
  'report.share_viewed',
  'report.share_downloaded',
  'erasure.requested',
  'erasure.confirmed',
  'erasure.cancelled',
  'erasure.retried',
  'erasure.completed',
  'erasure.failed',
  'integration.connected',
  'integration.disconnected',
  'integration.team_bound',
  'integration.team_unbound',
  'source.personal_connected',
  'source.personal_disconnected',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export function isAuditAction(value: string): value is AuditAction {
  return (AUDIT_ACTIONS as readonly string[]).includes(value);
}

/**
 * Who did it: a user (by session), an API key, the service itself (scheduled jobs), or a report share (somebody
 * outside the organization holding a published or shared report link: who they are is not known, which link is).
 */
export type AuditActor =
  | { type: 'user'; id: string; /** the user's e-mail */ label: string | null }
  | { type: 'api_key'; id: string; /** the key's display prefix */ label: string }
  | { type: 'report_share'; id: string; /** "published link" or the grantee's e-mail */ label: string }
  | { type: 'system' };

export const AUDIT_ACTOR_TYPES = ['user', 'api_key', 'report_share', 'system'] as const;

export const SYSTEM_ACTOR: AuditActor = { type: 'system' };
