/** True when a write failed on a unique constraint (Prisma's P2002), e.g. a concurrent insert won the race. */
export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: string }).code === 'P2002';
}
