// Contract between assessment launch and spend caps: launching an assessment in a scope (organization or
// project) whose cap has been reached is refused with 400 until the cap is raised.
// Assessment launch calls this inside its transaction.
import type { Scoped, Tx } from '@svc/db';
import { badRequest } from '../../http/errors';
import { formatCredits, spentIn } from './spend-ledger';

/**
 * Throws 400 "Spend cap reached ..." when the organization's cap, or the cap of `projectId`, has been reached:
 * triggered (spend reached it and it was not raised since) or at or below the current spend of its scope.
 */
export async function assertWithinSpendCap(tx: Scoped<Tx>, projectId: string): Promise<void> {
  const caps = await tx.spendLimit.findMany({
    where: { kind: 'cap', OR: [{ projectId: null }, { projectId }] },
    orderBy: { projectId: { sort: 'asc', nulls: 'first' } },
  });
  for (const cap of caps) {
    const spent = await spentIn(tx, cap.projectId);
    if (cap.triggeredAt !== null || spent.gte(cap.credits)) {
      const scope = cap.projectId === null ? "the organization's" : "this project's";
      throw badRequest(
        `Spend cap reached: ${scope} cap is ${formatCredits(cap.credits)} credits and ${formatCredits(spent)} have been spent. ` +
          'Raise the cap to launch assessments.',
      );
    }
  }
}
