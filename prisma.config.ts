// Prisma CLI configuration. Prisma's native schema engine cannot be downloaded on our machines, so the CLI
// runs on the JS engine through the pg driver adapter (see shared/DESIGN.md, "Toolchain facts").
import 'dotenv/config';
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';
import { pgFields } from './packages/db/src/pg-fields';

const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/security_service';
// schema.prisma reads env("DATABASE_URL"); commands that never connect (generate) still need a value.
process.env.DATABASE_URL ??= DEFAULT_DATABASE_URL;

export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  async adapter() {
    return new PrismaPg(pgFields(process.env.DATABASE_URL));
  },
});
