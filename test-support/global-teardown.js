// Drops the run's database (set KEEP_TEST_DB=1 to keep it for inspection).
const { dropDatabase } = require('./databases');

module.exports = async function globalTeardown() {
  if (process.env.TEST_DATABASE_NAME) await dropDatabase(process.env.TEST_DATABASE_NAME);
};
