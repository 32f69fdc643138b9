// Whether a GDPR erasure is under way in an organization: confirmed and not completed, that is `erasing`, or `failed`
// after its confirmation (a retry resumes where it stopped). Its free-text passes walk each table forward once: a
// report stored, or an event written, behind a pass that has moved on keeps the person's name or address for good.
// So while one is under way no report is stored or announced (reports/report-job.ts) and no SLA breach is published
// (sla-scan.ts); they wait for it to complete (a failed one: for its retry).
import { Prisma } from '@svc/db';

/** The erasure requests under way in `organizationId` (a where clause for prisma.erasureRequest). */
export function erasuresUnderWay(organizationId: string): Prisma.ErasureRequestWhereInput {
  return { organizationId, OR: [{ status: 'erasing' }, { status: 'failed', confirmedAt: { not: null } }] };
}

/** The same test in SQL, for the organization in `organizationColumn` (a column of the enclosing query). */
export function erasureUnderWaySql(organizationColumn: string): Prisma.Sql {
  return Prisma.sql`EXISTS (SELECT 1 FROM erasure_requests e WHERE e.organization_id = ${Prisma.raw(organizationColumn)}
    AND (e.status = 'erasing' OR (e.status = 'failed' AND e.confirmed_at IS NOT NULL)))`;
}
