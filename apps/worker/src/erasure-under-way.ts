// Whether a GDPR erasure is under way in an organization: `erasing`, or `failed` in the middle of its free-text passes
// or at its reports step (a retry resumes where it stopped). Those passes walk each table forward once: a report
// stored, or an event written, behind a pass that has moved on keeps the person's name or address for good; and the
// reports step finds the PDFs to render again by the pseudonym the passes wrote, which a PDF stored after them does
// not hold. So while one is under way no report is stored or announced (reports/report-job.ts) and no SLA breach is
// published (sla-scan.ts); they wait for it to complete, a failed one for its retry (the governance page says so).
// One that failed before its first pass (the person owns the organization, say) or after the reports step holds
// nothing: nothing can land behind a pass.
import { Prisma } from '@svc/db';

/** The prefix of the free-text passes' step names in an erasure's progress (erasure.ts passStep). */
export const FREE_TEXT_STEP = 'free_text:';

/** The step that finds the reports to render again (erasure.ts LAST_STEPS), after the free-text passes. */
export const REPORTS_STEP = 'reports';

/** The erasure requests under way in `organizationId` (a where clause for prisma.erasureRequest). */
export function erasuresUnderWay(organizationId: string): Prisma.ErasureRequestWhereInput {
  return {
    organizationId,
    OR: [
      { status: 'erasing' },
      { status: 'failed', progress: { path: ['step'], string_starts_with: FREE_TEXT_STEP } },
      { status: 'failed', progress: { path: ['step'], equals: REPORTS_STEP } },
    ],
  };
}

/** The same test in SQL, for the organization in `organizationColumn` (a column of the enclosing query). */
export function erasureUnderWaySql(organizationColumn: string): Prisma.Sql {
  return Prisma.sql`EXISTS (SELECT 1 FROM erasure_requests e WHERE e.organization_id = ${Prisma.raw(organizationColumn)}
    AND (e.status = 'erasing' OR (e.status = 'failed'
      AND (starts_with(e.progress->>'step', ${FREE_TEXT_STEP}) OR e.progress->>'step' = ${REPORTS_STEP}))))`;
}
