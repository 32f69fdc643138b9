import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client';
import { pgFields } from './pg-fields';

export * from './generated/prisma/client';
export { pgFields } from './pg-fields';

/**
 * A Prisma client that talks to PostgreSQL through the pg driver adapter (no query-engine binary).
 * `connectTimeoutMs` bounds the wait for a pool connection: without it a query waits forever while PostgreSQL is
 * unreachable (pg's default is no timeout).
 */
export function createPrismaClient(databaseUrl: string, options: { max?: number; connectTimeoutMs?: number } = {}): PrismaClient {
  const adapter = new PrismaPg({
    ...pgFields(databaseUrl),
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
  });
  return new PrismaClient({ adapter });
}

/** The client handed to a `$transaction(async (tx) => ...)` callback. */
export type Tx = Omit<PrismaClient, '$connect' | '$disconnect' | '$on' | '$transaction' | '$extends'>;
export type Db = PrismaClient;
export * from './ids';
export * from './sealed';
export * from './errors';
export * from './tenancy';
