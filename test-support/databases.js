// Databases for the test run. The run's database (global-setup.js) is shared by test files that only touch
// their own organizations; a file whose code scans every organization (the outbox relay, the retention purge,
// worker processes with their schedulers) gets a database of its own, so it never touches another file's rows.
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const { Client } = require('pg');

const ROOT = path.resolve(__dirname, '..');

function adminUrl() {
  return process.env.TEST_DATABASE_ADMIN_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
}

async function adminQuery(sql, serverAdminUrl = adminUrl()) {
  const admin = new Client({ connectionString: serverAdminUrl });
  await admin.connect();
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/** Creates a database, applies the migrations, returns its URL. `serverAdminUrl`: another server (default: the run's). */
async function createMigratedDatabase(name, serverAdminUrl = adminUrl()) {
  await adminQuery(`CREATE DATABASE "${name}"`, serverAdminUrl);
  const url = new URL(serverAdminUrl);
  url.pathname = `/${name}`;
  execFileSync(path.join(ROOT, 'node_modules/.bin/prisma'), ['migrate', 'deploy'], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: url.toString() },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return url.toString();
}

async function dropDatabase(name) {
  if (process.env.KEEP_TEST_DB === '1') return;
  await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
}

/** A database of its own for one test file: `{ url, drop() }`. */
async function createIsolatedDatabase() {
  const name = `${process.env.TEST_DATABASE_NAME || 'svc_test'}_${randomBytes(4).toString('hex')}`;
  const url = await createMigratedDatabase(name);
  return { url, drop: () => dropDatabase(name) };
}

module.exports = { createMigratedDatabase, dropDatabase, createIsolatedDatabase };
