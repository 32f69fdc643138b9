import { Prisma } from './generated/prisma/client';

/**
 * A Date as the value of a timestamp(3) column in raw SQL. The columns hold UTC wall time (as Prisma writes them),
 * so the instant is converted to UTC whatever the session's time zone; null stays NULL.
 */
export const utcTimestamp = (at: Date | null): Prisma.Sql =>
  Prisma.sql`(${at === null ? null : at.toISOString()}::timestamptz AT TIME ZONE 'UTC')`;
