// Runs once before the suite: creates a fresh PostgreSQL database for this run and applies the migrations,
// so no test depends on what an earlier run left behind. Workers inherit the environment set here.
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const { Client } = require('pg');

const ROOT = path.resolve(__dirname, '..');

function adminUrl() {
  return process.env.TEST_DATABASE_ADMIN_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
}

module.exports = async function globalSetup() {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const dbName = `svc_test_${runId}`;
  const admin = new Client({ connectionString: adminUrl() });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${dbName}"`);
  await admin.end();

  const url = new URL(adminUrl());
  url.pathname = `/${dbName}`;
  process.env.DATABASE_URL = url.toString();
  process.env.TEST_DATABASE_NAME = dbName;
  process.env.TEST_RUN_ID = runId;
  process.env.REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  process.env.NODE_ENV = 'test';

  execFileSync(path.join(ROOT, 'node_modules/.bin/prisma'), ['migrate', 'deploy'], {
    cwd: ROOT,
    env: process.env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
};
