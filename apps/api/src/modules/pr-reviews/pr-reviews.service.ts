// PR security reviews: the engine reviews a pull request of a project's repository and posts the outcome here
// (repository, PR number, verdict, findings count, link). Recording one publishes `pr_review.completed` in the
// same transaction. Recording needs write access to the project, reading needs read access; a project of
// another organization answers 404. Reviews are not recorded on an archived project (409).
import { RECHECKED_TRANSACTION } from '../access/own-role';
import type { PrReview } from '@svc/db';
import { outboxDeps, withOutbox } from '@svc/outbox';
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { conflict, notFound, notFoundAs, unprocessable } from '../../http/errors';
import { pageArgs, toPage, type PageQuery } from '../../http/pagination';
import { newId, scopedTo } from '@svc/db';
import { requireProjectAccess, requireStillMayAccess } from '../access/access.service';

export const PR_REVIEW_VERDICTS = ['approved', 'changes_requested', 'commented'] as const;

export interface PrReviewInput {
  repository: string;
  pr_number: number;
  verdict: string;
  findings_count: number;
  url?: string | null;
}

export function presentPrReview(r: PrReview) {
  return {
    id: r.id,
    project_id: r.projectId,
    repository: r.repository,
    pr_number: r.prNumber,
    verdict: r.verdict,
    findings_count: r.findingsCount,
    url: r.url,
    created_at: r.createdAt.toISOString(),
  };
}

const ARCHIVED = 'The project is archived: unarchive it to record PR reviews.';

/** Engine: records a posted PR review and publishes pr_review.completed. */
export async function recordPrReview(deps: AppDeps, principal: Principal, projectId: string, input: PrReviewInput) {
  if (!(PR_REVIEW_VERDICTS as readonly string[]).includes(input.verdict)) {
    throw unprocessable(`verdict must be one of ${PR_REVIEW_VERDICTS.join(', ')}.`);
  }
  const project = await requireProjectAccess(deps, principal, projectId, 'write');
  if (project.archivedAt) throw conflict(ARCHIVED);
  const now = deps.clock.now();
  const review = await withOutbox(
    outboxDeps(deps, deps.deliveryQueue),
    async (raw, publish) => {
      const tx = scopedTo(raw, principal);
      await requireStillMayAccess(tx, principal, { kind: 'project', id: project.id }, { scope: 'assessments:update', action: 'Recording PR reviews', need: 'write', hold: true });
      // Read again after the re-check, as createAssessment does: an archiving committed while the request ran is seen here.
      const fresh = await tx.project.findFirst({ where: { id: project.id }, select: { archivedAt: true } });
      if (!fresh) throw notFound('Project');
      if (fresh.archivedAt) throw conflict(ARCHIVED);
      const created = await tx.prReview.create({
        data: {
          id: newId('prr', now.getTime()),
          organizationId: project.organizationId,
          projectId: project.id,
          repository: input.repository,
          prNumber: input.pr_number,
          verdict: input.verdict,
          findingsCount: input.findings_count,
          url: input.url ?? null,
          createdAt: now,
        },
      });
      await publish({
        type: 'pr_review.completed',
        organizationId: created.organizationId,
        projectId: created.projectId,
        data: {
          pr_review_id: created.id,
          project_id: created.projectId,
          repository: created.repository,
          pr_number: created.prNumber,
          verdict: created.verdict,
          findings_count: created.findingsCount,
          url: created.url,
        },
      });
      return created;
    },
    () => now,
    RECHECKED_TRANSACTION,
  );
  return presentPrReview(review);
}

export async function listPrReviews(
  deps: AppDeps,
  principal: Principal,
  projectId: string,
  query: PageQuery & { repository?: string; verdict?: string },
) {
  const project = await requireProjectAccess(deps, principal, projectId, 'read');
  const args = pageArgs(query);
  const rows = await scopedTo(deps.prisma, principal).prReview.findMany({
    ...args,
    where: {
      ...args.where,
      projectId: project.id,
      ...(query.repository && { repository: query.repository }),
      ...(query.verdict && { verdict: query.verdict }),
    },
  });
  return toPage(rows, query, presentPrReview);
}

export async function getPrReview(deps: AppDeps, principal: Principal, id: string) {
  const review = await scopedTo(deps.prisma, principal).prReview.findFirst({ where: { id } });
  if (!review) throw notFound('PR review');
  await notFoundAs('PR review', requireProjectAccess(deps, principal, review.projectId, 'read'));
  return presentPrReview(review);
}
