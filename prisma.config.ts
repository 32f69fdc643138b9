// Prisma CLI configuration. Prisma's native schema engine cannot be downloaded on our machines, so the CLI
// runs on the JS engine through the pg driver adapter (see shared/DESIGN.md, "Toolchain facts").
import 'dotenv/config';
import { defineConfig } from 'prisma/config';
import { PrismaPg } from '@prisma/adapter-pg';

const DEFAULT_DATABASE_URL = 'postgresql://postgres@127.0.0.1:5432/security_service';

// The adapter is given discrete fields: a connection string loses the empty-password case.
function pgFields(databaseUrl: string) {
  const url = new URL(databaseUrl);
  return {
    host: decodeURIComponent(url.hostname),
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username || 'postgres'),
    password: decodeURIComponent(url.password),
    database: decodeURIComponent(url.pathname.replace(/^\//, '')),
  };
}

export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  async adapter() {
    return new PrismaPg(pgFields(process.env.DATABASE_URL ?? DEFAULT_DATABASE_URL));
  },
});
