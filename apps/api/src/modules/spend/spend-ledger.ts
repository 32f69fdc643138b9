// Credit amounts and totals. Amounts are Prisma Decimals (numeric(14,2)) inside the service and strings with two
// decimals ("12.50") in JSON, so no amount ever goes through a binary float.
import { Prisma, organizationOf, type Scoped, type Tx } from '@svc/db';

export type Decimal = Prisma.Decimal;

export const ZERO = new Prisma.Decimal(0);

/** "12.50": the JSON form of an amount. */
export function formatCredits(value: Prisma.Decimal | null | undefined): string {
  return (value ?? ZERO).toFixed(2);
}

/** Spend of one scope of the client's organization: all of it (projectId null) or one project. */
export async function spentIn(tx: Scoped<Tx>, projectId: string | null): Promise<Prisma.Decimal> {
  const sum = await tx.usageRecord.aggregate({
    where: projectId !== null ? { projectId } : {},
    _sum: { credits: true },
  });
  return sum._sum.credits ?? ZERO;
}

/**
 * Serialises spend changes of the client's organization (usage, limit changes), so no crossing is missed or doubled.
 * FOR NO KEY UPDATE, as every lock of the organization's row takes it (own-role.ts): it does not hold up the rows
 * other transactions insert for the organization, a role change's audit entry among them.
 */
export async function lockOrganizationSpend(tx: Scoped<Tx>): Promise<void> {
  await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${organizationOf(tx)} FOR NO KEY UPDATE`;
}
