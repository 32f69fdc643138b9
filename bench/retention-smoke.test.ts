// Keeps `npm run bench:retention` from rotting: runs it end to end with tiny sizes (the real API and worker
// processes, its own database and Redis prefix) and checks that it prints its table and exits by itself, leaving
// neither its database nor its keys behind. Not a measurement: nothing here asserts a time. Uses the existing build
// (`npm test` builds before jest runs).
import { createRequire } from 'node:module';
import path from 'node:path';
import { Client } from 'pg';
import { BENCH_ROOT, runBenchScript } from './support/run-script';

// ioredis as bench/run.js loads it (the worker's dependency, not the root's).
interface RedisClient {
  keys(pattern: string): Promise<string[]>;
  disconnect(): void;
}
const { Redis } = createRequire(path.join(BENCH_ROOT, 'apps/worker/package.json'))('ioredis') as { Redis: new (url: string) => RedisClient };
const LIMIT_MS = 150_000; // about 40 s alone on the 2-core machine
const ADMIN_URL = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

// A bench that printed its table but does not exit is what this test is for: SIGTERM (its clean-up), then SIGKILL.
const runRetention = () =>
  runBenchScript(
    'bench/retention.js',
    { BENCH_RETENTION_N: '2000', BENCH_RETENTION_DRAIN_EVENTS: '200', BENCH_RETENTION_ORG_DELIVERIES: '1000', BENCH_RETENTION_CYCLES: '1' },
    LIMIT_MS,
    15_000,
  );

it('runs with tiny sizes, prints its table and exits by itself, leaving no database or keys', async () => {
  const run = await runRetention();
  // A failure shows the start of stderr (the error's message) and its end.
  const told = (text: string) => (text.length <= 4000 ? text : `${text.slice(0, 2000)}\n…\n${text.slice(-2000)}`);
  expect({ code: run.code, stderr: run.code === 0 ? '' : told(run.stderr) }).toEqual({ code: 0, stderr: '' });
  const table = run.stdout.split('\n').filter((line) => line.startsWith('| '));
  expect(table[0]).toMatch(/^\| figure +\| value +\| target +\|$/);
  expect(table.some((line) => line.startsWith('| purge 2000 expired beside 2000 retained'))).toBe(true);
  expect(table.some((line) => line.startsWith('| drain during purge / without'))).toBe(true);

  const runId = /database and Redis prefix (bench_[a-z0-9_]+)/.exec(run.stderr)?.[1];
  expect(runId).toBeDefined();
  const admin = new Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [runId]);
    expect(rows).toHaveLength(0);
  } finally {
    await admin.end();
  }
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  try {
    expect(await redis.keys(`${runId}*`)).toEqual([]);
  } finally {
    redis.disconnect();
  }
}, 180_000);
