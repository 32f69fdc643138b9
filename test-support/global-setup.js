// Runs once before the suite: creates a fresh PostgreSQL database for this run and applies the migrations,
// so no test depends on what an earlier run left behind. Workers inherit the environment set here.
const { randomBytes } = require('node:crypto');
const { createMigratedDatabase } = require('./databases');

module.exports = async function globalSetup() {
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const dbName = `svc_test_${runId}`;
  process.env.DATABASE_URL = await createMigratedDatabase(dbName);
  process.env.TEST_DATABASE_NAME = dbName;
  process.env.TEST_RUN_ID = runId;
  process.env.REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  process.env.NODE_ENV = 'test';
};
