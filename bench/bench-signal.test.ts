// `npm run bench` stopped with Ctrl-C (SIGINT) cleans up after itself: its API and worker processes stopped, its
// database dropped, its Redis prefix deleted, exit status 130. Uses the existing build, as bench-smoke.test.ts does.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Client } from 'pg';

const ROOT = path.resolve(__dirname, '..');
const ADMIN_URL = process.env.TEST_DATABASE_ADMIN_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
// ioredis as bench/run.js loads it (the worker's dependency, not the root's).
interface RedisClient {
  keys(pattern: string): Promise<string[]>;
  del(...keys: string[]): Promise<number>;
  quit(): Promise<unknown>;
}
const { Redis } = createRequire(path.join(ROOT, 'apps/worker/package.json'))('ioredis') as { Redis: new (url: string) => RedisClient };

let bench: ChildProcess | null = null;
let runId: string | null = null;
let pg: Client;
let redis: RedisClient;

beforeAll(async () => {
  pg = new Client({ connectionString: ADMIN_URL });
  await pg.connect();
  redis = new Redis(REDIS_URL);
});

afterAll(async () => {
  // Whatever a failing run left: the bench itself, its database, its keys.
  if (bench && bench.exitCode === null && bench.signalCode === null) bench.kill('SIGKILL');
  if (runId) {
    await pg.query(`DROP DATABASE IF EXISTS ${runId} WITH (FORCE)`);
    const keys = await redis.keys(`${runId}*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  await pg.end();
  await redis.quit();
});

/** The bench's run id (its database's name and its Redis prefix), once its database exists. */
async function databaseOf(pid: number, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // bench/run.js names both `bench_<pid>_<time>`.
    const { rows } = await pg.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1`, [`bench\\_${pid}\\_%`]);
    if (rows.length > 0) return rows[0].datname;
    if (Date.now() > deadline) throw new Error(`no database of bench ${pid} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Live processes started with this REDIS_PREFIX (the bench's API and workers), from /proc (Linux). */
function processesOf(prefix: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`REDIS_PREFIX=${prefix}`);
      } catch {
        return false; // gone meanwhile, or not ours to read
      }
    })
    .map(Number);
}

it('on SIGINT stops its processes, drops its database, deletes its Redis keys and exits with 130', async () => {
  let stderr = '';
  const child = spawn(process.execPath, [path.join(ROOT, 'bench/run.js')], {
    cwd: ROOT,
    env: { ...process.env, BENCH_SKIP_BUILD: '1', BENCH_ONLY: 'drain', BENCH_DRAIN_EVENTS: '20', BENCH_DRAIN_RUNS: '1x4', BENCH_LIMIT_DELIVERIES: '50' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  bench = child;
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

  runId = await databaseOf(child.pid!, 30_000);
  // Set up (the API ran: its keys are in Redis), or at least its database there: the signal comes now.
  const deadline = Date.now() + 30_000;
  while (!stderr.includes('set up in') && Date.now() < deadline && child.exitCode === null) await new Promise((resolve) => setTimeout(resolve, 100));
  expect(stderr).toContain('set up in');
  expect((await redis.keys(`${runId}:*`)).length).toBeGreaterThan(0);
  expect(processesOf(runId).length).toBeGreaterThan(0);
  child.kill('SIGINT');

  expect(await exited).toBe(130);
  const { rows } = await pg.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [runId]);
  expect(rows).toEqual([]);
  expect(await redis.keys(`${runId}*`)).toEqual([]);
  expect(processesOf(runId)).toEqual([]);
  expect(stderr).toMatch(/SIGINT: stopping the processes/);
}, 60_000);
