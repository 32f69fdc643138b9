// The three levels a subscription can live at. Each level knows where its routes hang, who may use them, and
// which subscriptions belong to it; everything else about webhooks is one implementation for all three.
import type { WebhookLevel } from '@svc/db';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { forbidden } from '../../http/errors';
import { hasOrgWideWrite, requireAssessmentAccess, requireProjectAccess } from '../access/access.service';

/** webhook_subscriptions.kind of a webhook subscription; notification targets have their own kinds. */
export const WEBHOOK_KIND = 'webhook';

export interface LevelContext {
  level: WebhookLevel;
  organizationId: string;
  projectId: string | null;
  assessmentId: string | null;
}

export interface LevelDefinition {
  level: WebhookLevel;
  basePath: string;
  /** Checks the role rule of SPEC ("Role rules") and returns the level the request addresses. */
  resolve(deps: AppDeps, principal: Principal, params: Record<string, string>): Promise<LevelContext>;
}

export const LEVELS: readonly LevelDefinition[] = [
  {
    level: 'organization',
    basePath: '/webhooks',
    async resolve(_deps, principal) {
      if (!hasOrgWideWrite(principal)) throw forbidden('Organization-wide webhooks require the admin or owner role.');
      return { level: 'organization', organizationId: principal.organizationId, projectId: null, assessmentId: null };
    },
  },
  {
    level: 'project',
    basePath: '/projects/:projectId/webhooks',
    async resolve(deps, principal, params) {
      const project = await requireProjectAccess(deps, principal, params.projectId, 'write');
      return { level: 'project', organizationId: principal.organizationId, projectId: project.id, assessmentId: null };
    },
  },
  {
    level: 'assessment',
    basePath: '/assessments/:assessmentId/webhooks',
    async resolve(deps, principal, params) {
      const assessment = await requireAssessmentAccess(deps, principal, params.assessmentId, 'write');
      return {
        level: 'assessment',
        organizationId: principal.organizationId,
        projectId: assessment.projectId,
        assessmentId: assessment.id,
      };
    },
  },
];

/**
 * The live webhook subscriptions of exactly this level (never another level's, never a notification target, which
 * shares the table and the delivery pipeline); query through scopedTo(prisma, ctx) for the organization.
 */
export function subscriptionsOf(ctx: LevelContext) {
  const anchor =
    ctx.level === 'project' ? { projectId: ctx.projectId } : ctx.level === 'assessment' ? { assessmentId: ctx.assessmentId } : {};
  return { level: ctx.level, kind: WEBHOOK_KIND, deletedAt: null, ...anchor };
}
