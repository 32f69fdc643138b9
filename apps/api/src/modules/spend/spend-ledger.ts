// Credit amounts and totals. Amounts are Prisma Decimals (numeric(14,2)) inside the service and strings with two
// decimals ("12.50") in JSON, so no amount ever goes through a binary float.
import { Prisma, type Tx } from '@svc/db';

export type Decimal = Prisma.Decimal;

export const ZERO = new Prisma.Decimal(0);

/** "12.50": the JSON form of an amount. */
export function formatCredits(value: Prisma.Decimal | null | undefined): string {
  return (value ?? ZERO).toFixed(2);
}

/** Spend of one scope: the whole organization (projectId null) or one project. */
export async function spentIn(tx: Tx, organizationId: string, projectId: string | null): Promise<Prisma.Decimal> {
  const sum = await tx.usageRecord.aggregate({
    where: { organizationId, ...(projectId !== null && { projectId }) },
    _sum: { credits: true },
  });
  return sum._sum.credits ?? ZERO;
}

/** Serialises spend changes of one organization (usage, limit changes), so no crossing is missed or doubled. */
export async function lockOrganizationSpend(tx: Tx, organizationId: string): Promise<void> {
  await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${organizationId} FOR UPDATE`;
}
