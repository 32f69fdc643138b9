// Every API route of /api/v1, gathered from the modules.
import type { AppDeps } from './app-deps';
import type { RateLimiters } from './http/rate-limit';
import type { RouteSpec } from './http/route';
import { apiKeyRoutes } from './modules/api-keys/api-keys.routes';
import { authRoutes } from './modules/auth/auth.routes';
import { oauthRoutes } from './modules/oauth/oauth.routes';
import { organizationRoutes } from './modules/organizations/organizations.routes';
import { memberRoutes } from './modules/members/members.routes';
import { invitationRoutes } from './modules/invitations/invitations.routes';
import { teamRoutes } from './modules/teams/teams.routes';
import { projectRoutes } from './modules/projects/projects.routes';
import { assessmentRoutes } from './modules/assessments/assessments.routes';
import { grantRoutes } from './modules/grants/grants.routes';
import { webhookRoutes } from './modules/webhooks/webhooks.routes';
import { auditRoutes } from './modules/audit/audit.routes';
import { keyPolicyRoutes } from './modules/key-policy/key-policy.routes';
import { findingRoutes } from './modules/findings/findings.routes';
import { governanceRoutes } from './modules/governance/governance.routes';
import { erasureRoutes } from './modules/erasure/erasure.routes';
import { integrationRoutes } from './modules/integrations/integrations.routes';
import { sourceConnectionRoutes } from './modules/source-connections/source-connections.routes';
import { reportRoutes } from './modules/reports/reports.routes';
import { reportShareRoutes } from './modules/report-shares/report-shares.routes';
import { fixVerificationRoutes } from './modules/fix-verifications/fix-verifications.routes';
import { prReviewRoutes } from './modules/pr-reviews/pr-reviews.routes';
import { monitoringRoutes } from './modules/monitoring/monitoring.routes';
import { spendRoutes } from './modules/spend/spend.routes';
import { sourceRoutes } from './modules/source/source.routes';
import { notificationTargetRoutes } from './modules/notification-targets/notification-targets.routes';
import { issueExportRoutes } from './modules/issue-exports/issue-exports.routes';

export function apiRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [...authRoutes(deps, limiters), ...oauthRoutes(deps), ...apiKeyRoutes(deps, limiters),
    ...organizationRoutes(deps, limiters),
    ...keyPolicyRoutes(deps),
    ...auditRoutes(deps),
    ...memberRoutes(deps, limiters),
    ...invitationRoutes(deps, limiters),
    ...teamRoutes(deps),
    ...projectRoutes(deps),
    ...assessmentRoutes(deps),
    ...grantRoutes(deps),
    ...webhookRoutes(deps, limiters),
    ...notificationTargetRoutes(deps, limiters),
    ...issueExportRoutes(deps, limiters),
    ...findingRoutes(deps),
    ...governanceRoutes(deps),
    ...erasureRoutes(deps),
    ...integrationRoutes(deps, limiters),
    ...sourceConnectionRoutes(deps),
    ...reportRoutes(deps),
    ...reportShareRoutes(deps, limiters),
    ...fixVerificationRoutes(deps),
    ...prReviewRoutes(deps),
    ...monitoringRoutes(deps),
    ...spendRoutes(deps),
    ...sourceRoutes(deps)];
}
