// Keeps `npm run bench:http-client` from rotting: runs it with tiny sizes against the bench's HTTPS receiver and
// checks each client's figures and the table. Not a measurement: nothing here asserts a cost or a rate. Uses the
// existing build (`npm test` builds before jest runs).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '..');
const CLIENTS = ['worker transport (got stream)', 'got promise (the limit loop)', 'node:https (floor)'];

test('bench:http-client sends through each client and prints its CPU per request', async () => {
  const { stdout } = await promisify(execFile)(process.execPath, [path.join(ROOT, 'bench/http-client.js')], {
    cwd: ROOT,
    env: { ...process.env, BENCH_HTTP_REQUESTS: '40', BENCH_HTTP_ROUNDS: '2', BENCH_HTTP_CONCURRENCY: '4' },
    timeout: 60_000,
  });
  const figures = stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { figure: string; round: number; cpu_ms_per_request: number; requests_per_s: number });
  expect(figures.map((f) => `${f.round} ${f.figure}`)).toEqual([1, 2].flatMap((round) => CLIENTS.map((name) => `${round} ${name}`)));
  for (const figure of figures) {
    expect(figure.cpu_ms_per_request).toBeGreaterThan(0);
    expect(figure.requests_per_s).toBeGreaterThan(0);
  }
  const rows = stdout.split('\n').filter((line) => CLIENTS.some((name) => line.startsWith(`| ${name} |`)));
  expect(rows).toHaveLength(3);
  expect(rows[2]).toMatch(/^\| node:https \(floor\) \| \d+\.\d{3} \| 1\.0 \| \d+ \|$/);
}, 90_000);
