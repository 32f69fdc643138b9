// Drops the run's database (set KEEP_TEST_DB=1 to keep it for inspection).
const { Client } = require('pg');

module.exports = async function globalTeardown() {
  const dbName = process.env.TEST_DATABASE_NAME;
  if (!dbName || process.env.KEEP_TEST_DB === '1') return;
  const admin = new Client({
    connectionString: process.env.TEST_DATABASE_ADMIN_URL || 'postgresql://postgres@127.0.0.1:5432/postgres',
  });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
};
