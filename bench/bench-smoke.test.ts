// Keeps `npm run bench` from rotting: runs it end to end with tiny sizes (the real API and worker processes, its
// own database, Redis prefix and HTTPS receiver) and checks that it prints one JSON line per figure and the table,
// every figure a number. Not a measurement: nothing here asserts a rate. Uses the existing build (`npm test`
// builds before jest runs; run `npm run build` first when calling jest directly).
import { runBenchScript } from './support/run-script';

// It took about 140 s on the shared 2-core machine under load (three benches at once) with the sustained-rate probes,
// and 147 s alone on a slower VM once every ratio had its own limit loops beside it.
const LIMIT_MS = 240_000;

const runBench = () =>
  runBenchScript(
    'bench/run.js',
    {
      BENCH_DRAIN_EVENTS: '20',
      BENCH_DRAIN_WARM_UP_EVENTS: '10',
      BENCH_DRAIN_RUNS: '1x4,2x4',
      BENCH_PUBLISH_SECONDS: '1',
      BENCH_LATENCY_SECONDS: '1',
      BENCH_SUSTAINED_SECONDS: '2',
      BENCH_SUSTAINED_WARM_UP_SECONDS: '1',
      BENCH_SUSTAINED_PROBES: '2',
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
    LIMIT_MS,
    5_000,
  );

it('runs with tiny sizes and prints every figure as a JSON line and in the table', async () => {
  const started = Date.now();
  const run = await runBench();
  if (run.code !== 0) throw new Error(`bench exited with ${run.code}:\n${run.stderr.slice(-3000)}`);
  expect(Date.now() - started).toBeLessThan(LIMIT_MS);

  const lines = run.stdout.split('\n');
  const figures = lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const byName = new Map(figures.map((f) => [f.figure as string, f]));
  // Every ratio is taken against the limit loops run just before and after its figure; the run's first loop is kept.
  const BESIDE = ['limit_per_s', 'limit_before_per_s', 'limit_after_per_s', 'run_start_limit_per_s', 'ratio_to_run_start_limit'];
  const expected: Record<string, string[]> = {
    'limit loop c=16': ['deliveries_per_s', 'p50_ms', 'p99_ms'],
    'limit loop c=4': ['deliveries_per_s', 'p50_ms', 'p99_ms'],
    'publish 1 client': ['events_per_s', 'p50_ms', 'p99_ms', 'ratio_to_limit', 'api_rss_mib', 'api_peak_rss_mib', ...BESIDE],
    'publish 8 clients': ['events_per_s', 'p50_ms', 'p99_ms', 'ratio_to_limit', 'api_rss_mib', 'api_peak_rss_mib', ...BESIDE],
    'publish 32 clients': ['events_per_s', 'p50_ms', 'p99_ms', 'ratio_to_limit', 'api_rss_mib', 'api_peak_rss_mib', ...BESIDE],
    'drain 1 worker c=4': ['deliveries_per_s', 'peak_rss_mib', 'rss_growth_after_first_quarter_mib', 'ratio_to_limit', ...BESIDE],
    'drain 2 workers c=4': ['deliveries_per_s', 'peak_rss_mib', 'rss_growth_after_first_quarter_mib', 'ratio_to_limit', 'ratio_to_one_worker', 'rate_to_one_worker', ...BESIDE],
    'end-to-end sustained rate': ['events_per_s', 'ratio_to_limit', ...BESIDE],
    'event-to-receipt latency at half the sustained rate': [
      'events_per_s',
      'p50_ms',
      'p99_ms',
      'limit_p99_ms',
      'ratio_p99_to_limit_p99',
      'limit_before_p99_ms',
      'limit_after_p99_ms',
      'run_start_limit_p99_ms',
      'ratio_p99_to_run_start_limit_p99',
      'worker_peak_rss_mib',
    ],
    'fan-out 1 subscription': ['events_per_s', 'p50_ms', 'p99_ms'],
    'fan-out 3 subscriptions': ['events_per_s', 'p50_ms', 'p99_ms'],
    'fan-out cost (3 vs 1, p50 publish time)': ['ratio'],
    'isolation: fan-out backlog discarded first': ['deliveries'],
    'isolation Quiet alone (20/s)': ['quiet_p50_ms', 'quiet_p99_ms', 'worker_peak_rss_mib'],
    "isolation Noisy's receiver answers 503 at once (both 20/s)": ['quiet_p50_ms', 'quiet_p99_ms', 'worker_peak_rss_mib'],
    "isolation Noisy's receiver never answers (both 20/s)": ['quiet_p50_ms', 'quiet_p99_ms', 'worker_peak_rss_mib'],
    'isolation never answers, 5 subscriptions, Noisy at 100/s': ['quiet_p50_ms', 'quiet_p99_ms', 'worker_peak_rss_mib'],
    "isolation Noisy's receiver sends an endless body (both 20/s)": ['quiet_p50_ms', 'quiet_p99_ms', 'worker_peak_rss_mib'],
    'isolation: tarpit recovered': ['deliveries', 'lost_or_failed', 'max_attempts', 'drained_in_s', 'worker_peak_rss_mib'],
    "isolation B at 10/s beside A's backlog of 30": ['quiet_p50_ms', 'quiet_p99_ms', 'worker_peak_rss_mib'],
    'isolation: backlog delivered during the fairness run': ['deliveries'],
    'worker peak RSS, every phase': ['peak_rss_mib', 'phases'],
  };
  expect([...byName.keys()].sort()).toEqual(Object.keys(expected).sort());
  for (const [name, fields] of Object.entries(expected)) {
    const figure = byName.get(name)!;
    for (const field of fields) {
      expect({ figure: name, field, finite: Number.isFinite(figure[field]) }).toEqual({ figure: name, field, finite: true });
    }
    if ('errors' in figure) expect({ figure: name, errors: figure.errors }).toEqual({ figure: name, errors: 0 });
  }
  // A ratio is its figure over the mean of the loops run beside it, not over the run's first loop.
  for (const figure of figures.filter((f) => 'ratio_to_limit' in f)) {
    const [before, after, beside] = [figure.limit_before_per_s, figure.limit_after_per_s, figure.limit_per_s] as number[];
    expect(Math.abs(beside - (before + after) / 2)).toBeLessThanOrEqual(0.1);
    const value = (figure.events_per_s ?? figure.deliveries_per_s) as number;
    const ratio = figure.ratio_to_limit as number;
    // Within the rounding of the printed rate (0.05), loop (0.05) and ratio (0.0005).
    expect(Math.abs(ratio - value / beside)).toBeLessThanOrEqual(0.0005 + (value / beside) * (0.05 / Math.max(value, 0.05) + 0.05 / beside));
  }
  // The publish levels share their loops: one level's after-loop is the next one's before-loop.
  const publishes = ['publish 1 client', 'publish 8 clients', 'publish 32 clients'].map((name) => byName.get(name)!);
  expect(publishes[1].limit_before_per_s).toBe(publishes[0].limit_after_per_s);
  expect(publishes[2].limit_before_per_s).toBe(publishes[1].limit_after_per_s);
  // Each drain measures its own backlog only: its workers delivered their warm-up first, then waited on the paused
  // queue while the backlog was published (a worker that took some of it early would leave fewer to measure).
  for (const name of ['drain 1 worker c=4', 'drain 2 workers c=4']) {
    expect({ name, ...byName.get(name) }).toMatchObject({ name, deliveries: 20, warm_up_deliveries: 10 });
  }
  // Two workers run right after one at the same concurrency, against the loop between them.
  expect(byName.get('drain 2 workers c=4')!.limit_before_per_s).toBe(byName.get('drain 1 worker c=4')!.limit_after_per_s);
  // The latency row against the lower p99 of its two loops.
  const latencyRow = byName.get('event-to-receipt latency at half the sustained rate')!;
  expect(latencyRow.limit_p99_ms).toBe(Math.min(latencyRow.limit_before_p99_ms as number, latencyRow.limit_after_p99_ms as number));
  expect(latencyRow.ratio_p99_to_limit_p99 as number).toBeCloseTo((latencyRow.p99_ms as number) / (latencyRow.limit_p99_ms as number), 1);
  expect(latencyRow.limit_before_per_s).toBe(byName.get('end-to-end sustained rate')!.limit_after_per_s);

  // The sustained-rate search: every probe's figures (whether a 2 s probe held says nothing, so it is not asserted).
  const probes = byName.get('end-to-end sustained rate')!.probes as Record<string, unknown>[];
  expect(probes).toHaveLength(2);
  for (const probe of probes) {
    for (const field of ['rate', 'backlog_start', 'backlog_end', 'publish_p99_ms', 'publisher_max_lag_ms', 'worker_peak_rss_mib']) {
      expect({ probe, field, finite: Number.isFinite(probe[field]) }).toEqual({ probe, field, finite: true });
    }
    expect(probe).toMatchObject({ sustained: expect.any(Boolean), errors: 0 });
  }
  expect(byName.get('worker peak RSS, every phase')!.phase).toEqual(expect.any(String));

  // The table: a header, then one row per figure, no empty or NaN cell; then the machine it ran on.
  const isolationAt = lines.findIndex((l) => l.startsWith('| isolation'));
  const table = lines.slice(0, isolationAt).filter((l) => l.startsWith('| '));
  expect(table[0]).toMatch(/^\| figure +\| value +\| limit loop +\| ratio +\| target +\|$/);
  const rows = table.slice(1).map((l) => l.split('|').map((c) => c.trim()).slice(1, -1));
  expect(rows.map((r) => r[0])).toEqual([
    'limit loop c=4',
    'limit loop c=16',
    'publish 1 client(s)',
    'publish 8 client(s)',
    'publish 32 client(s)',
    'drain 1x4',
    'drain 2x4',
    'end-to-end sustained rate',
    'latency p99 at half the sustained rate',
    'fan-out 1 / 3 subs (8 clients)',
    'worker peak RSS, every phase',
  ]);
  for (const row of rows) {
    expect(row[1]).toMatch(/\d/);
    expect(row.join(' ')).not.toMatch(/NaN|null|undefined|n\/a/);
    // Every row but the limit loops' and the worker's RSS is a ratio to a limit loop.
    if (!row[0].startsWith('limit loop') && !row[0].startsWith('worker peak RSS')) expect(row[3]).toMatch(/^\d+(\.\d+)?$/);
  }
  expect(rows.find((r) => r[0] === 'drain 2x4')![1]).toMatch(/2x4 \/ 1x4 = \d+(\.\d+)?$/);
  // Two workers against one: the two runs' ratios to their own loops, not their rates taken minutes apart.
  const [one, two] = [byName.get('drain 1 worker c=4')!, byName.get('drain 2 workers c=4')!];
  const expectedRatio = ((two.rate_to_one_worker as number) * (one.limit_per_s as number)) / (two.limit_per_s as number);
  expect(Math.abs((two.ratio_to_one_worker as number) / expectedRatio - 1)).toBeLessThan(0.01);
  expect(rows.find((r) => r[0] === 'publish 32 client(s)')![1]).toMatch(/API RSS \d+(\.\d+)? MiB/);
  expect(rows.at(-1)![1]).toMatch(/^\d+(\.\d+)? MiB \(.+\)$/);
  expect(run.stdout).toMatch(/\nmachine: \d+ x .+, \d+ GiB, node v\d+/);

  // The isolation table: Quiet's figures per scenario, the tarpit's recovery (nothing lost), the backlog's fairness.
  const isolation = lines.slice(isolationAt).filter((l) => l.startsWith('| ') && !l.startsWith('| isolation'));
  expect(isolation).toHaveLength(7);
  for (const row of isolation) expect(row).toMatch(/\| \d+(\.\d+)? MiB +\|/);
  for (const row of isolation) expect(row).not.toMatch(/NaN|null|undefined/);
  expect(byName.get('isolation: tarpit recovered')).toMatchObject({ lost_or_failed: 0 });
}, LIMIT_MS + 15_000);
