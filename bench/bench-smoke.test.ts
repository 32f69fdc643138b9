// Keeps `npm run bench` from rotting: runs it end to end with tiny sizes (the real API and worker processes, its
// own database, Redis prefix and HTTPS receiver) and checks that it prints one JSON line per figure and the table,
// every figure a number. Not a measurement: nothing here asserts a rate. Uses the existing build (`npm test`
// builds before jest runs; run `npm run build` first when calling jest directly).
import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runBench(): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bench/run.js')], {
      cwd: ROOT,
      env: {
        ...process.env,
        BENCH_SKIP_BUILD: '1',
        BENCH_DRAIN_EVENTS: '20',
        BENCH_DRAIN_RUNS: '1x4',
        BENCH_PUBLISH_SECONDS: '1',
        BENCH_LATENCY_SECONDS: '1',
        BENCH_LIMIT_DELIVERIES: '50',
        BENCH_FANOUT: '3',
        // The isolation rows: a second of each scenario, a small backlog, and a tarpit that times out and is
        // probed again within a second or two.
        BENCH_ISOLATION_SECONDS: '1',
        BENCH_ISOLATION_BACKLOG: '30',
        WEBHOOK_TIMEOUT_MS: '1000',
        WEBHOOK_BREAKER_OPEN_MS: '500',
        WEBHOOK_BREAKER_MAX_OPEN_MS: '1000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 140_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

it('runs with tiny sizes and prints every figure as a JSON line and in the table', async () => {
  const started = Date.now();
  const run = await runBench();
  if (run.code !== 0) throw new Error(`bench exited with ${run.code}:\n${run.stderr.slice(-3000)}`);
  expect(Date.now() - started).toBeLessThan(140_000);

  const lines = run.stdout.split('\n');
  const figures = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const byName = new Map(figures.map((f) => [f.figure as string, f]));
  const expected: Record<string, string[]> = {
    'limit loop c=4': ['deliveries_per_s', 'p50_ms', 'p99_ms'],
    'publish 1 client': ['events_per_s', 'p50_ms', 'p99_ms', 'ratio_to_limit'],
    'publish 8 clients': ['events_per_s', 'p50_ms', 'p99_ms', 'ratio_to_limit'],
    'publish 32 clients': ['events_per_s', 'p50_ms', 'p99_ms', 'ratio_to_limit'],
    'drain 1 worker c=4': ['deliveries_per_s', 'peak_rss_mib', 'rss_growth_after_first_quarter_mib', 'ratio_to_limit'],
    'event-to-receipt latency at half the drain rate': ['events_per_s', 'p50_ms', 'p99_ms', 'limit_p99_ms', 'ratio_p99_to_limit_p99'],
    'event-to-receipt latency at a quarter of the drain rate': ['events_per_s', 'p50_ms', 'p99_ms', 'limit_p99_ms', 'ratio_p99_to_limit_p99'],
    'fan-out 1 subscription': ['events_per_s', 'p50_ms', 'p99_ms'],
    'fan-out 3 subscriptions': ['events_per_s', 'p50_ms', 'p99_ms'],
    'fan-out cost (3 vs 1, p50 publish time)': ['ratio'],
    'isolation: fan-out backlog discarded first': ['deliveries'],
    'isolation Quiet alone (20/s)': ['quiet_p50_ms', 'quiet_p99_ms'],
    "isolation Noisy's receiver answers 503 at once (both 20/s)": ['quiet_p50_ms', 'quiet_p99_ms'],
    "isolation Noisy's receiver never answers (both 20/s)": ['quiet_p50_ms', 'quiet_p99_ms'],
    'isolation never answers, 5 subscriptions, Noisy at 100/s': ['quiet_p50_ms', 'quiet_p99_ms'],
    'isolation: tarpit recovered': ['deliveries', 'lost_or_failed', 'max_attempts', 'drained_in_s'],
    "isolation B at 10/s beside A's backlog of 30": ['quiet_p50_ms', 'quiet_p99_ms'],
    'isolation: backlog delivered during the fairness run': ['deliveries'],
  };
  expect([...byName.keys()].sort()).toEqual(Object.keys(expected).sort());
  for (const [name, fields] of Object.entries(expected)) {
    const figure = byName.get(name)!;
    for (const field of fields) {
      expect({ figure: name, field, finite: Number.isFinite(figure[field]) }).toEqual({ figure: name, field, finite: true });
    }
    if ('errors' in figure) expect({ figure: name, errors: figure.errors }).toEqual({ figure: name, errors: 0 });
  }

  // The table: a header, then one row per figure, no empty or NaN cell; then the machine it ran on.
  const isolationAt = lines.findIndex((l) => l.startsWith('| isolation'));
  const table = lines.slice(0, isolationAt).filter((l) => l.startsWith('| '));
  expect(table[0]).toMatch(/^\| figure +\| value +\| limit loop +\| ratio +\| target +\|$/);
  const rows = table.slice(1).map((l) => l.split('|').map((c) => c.trim()).slice(1, -1));
  expect(rows.map((r) => r[0])).toEqual([
    'limit loop c=4',
    'publish 1 client(s)',
    'publish 8 client(s)',
    'publish 32 client(s)',
    'drain 1x4',
    'latency p99 at half drain rate',
    'latency p99 at 1/4 drain rate',
    'fan-out 1 / 3 subs (8 clients)',
  ]);
  for (const row of rows) {
    expect(row[1]).toMatch(/\d/);
    expect(row.join(' ')).not.toMatch(/NaN|null|undefined/);
    if (!row[0].startsWith('limit loop')) expect(row[3]).toMatch(/^\d+(\.\d+)?$/);
  }
  expect(run.stdout).toMatch(/\nmachine: \d+ x .+, \d+ GiB, node v\d+/);

  // The isolation table: Quiet's figures per scenario, the tarpit's recovery (nothing lost), the backlog's fairness.
  const isolation = lines.slice(isolationAt).filter((l) => l.startsWith('| ') && !l.startsWith('| isolation'));
  expect(isolation).toHaveLength(6);
  for (const row of isolation) expect(row).not.toMatch(/NaN|null|undefined/);
  expect(byName.get('isolation: tarpit recovered')).toMatchObject({ lost_or_failed: 0 });
}, 150_000);
