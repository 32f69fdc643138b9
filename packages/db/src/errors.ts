/**
 * True when a write failed on a unique constraint, e.g. a concurrent insert won the race: Prisma's P2002 from a
 * model query, or PostgreSQL's own 23505 from a raw statement.
 */
export function isUniqueViolation(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, meta } = err as { code?: string; meta?: { code?: string } };
  return code === 'P2002' || meta?.code === '23505' || /\b23505\b|unique constraint/i.test(String((err as Error).message));
}
