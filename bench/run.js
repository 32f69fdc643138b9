#!/usr/bin/env node
// `npm run bench`: publishing and delivery throughput of the real API and worker processes, each figure beside a
// limit loop run in the same process tree (sign + POST with got over keep-alive + one INSERT per delivery, no
// queue, same receiver, same concurrency), so that the ratios survive a noisy machine: the loop runs just before and
// just after each figure (besideLimit), and the loops at the run's start are printed as well.
//
// It sets up everything itself: a database and a Redis prefix of its own (dropped at the end), an HTTPS receiver
// on loopback with a certificate it makes, an owner, an API key, a running assessment and subscriptions. The API
// and the worker are the built apps (`npm start` builds them the same way), run with NODE_ENV=production.
//
// Output: one JSON line per figure on stdout, then the tables. Sizes (environment):
//   BENCH_PUBLISH_SECONDS (8)   measured seconds per publish level (1, 8, 32 clients) and per fan-out level
//   BENCH_DRAIN_EVENTS (10000)  backlog size per drain run, published while the run's workers wait on a paused queue
//   BENCH_DRAIN_WARM_UP_EVENTS (3000) events each drain run's fresh workers deliver before that, not measured: a fresh
//                               process spent its first seconds compiling (1x16 drains of 10,000 read 0.45-0.53 of
//                               the loop cold, 0.52-0.65 warm, five pairs alternated), and the loop is warmed up too
//   BENCH_DRAIN_RUNS            which drain runs, e.g. "1x64,2x64,1x16,2x16,1x16-noextraca" (the default; 64 is the
//                               worker's default WORKER_CONCURRENCY); a limit loop runs at each of their concurrencies
//                               and at 16, the loop every ratio but the drains' is taken against; runs in a row at one
//                               concurrency share the loop between them (two workers right after one)
//   BENCH_SUSTAINED_SECONDS (30) measured seconds per probe of the end-to-end sustained rate: a fresh worker at the
//                               default settings delivers 200 events, then the bench publishes at a paced rate for
//                               BENCH_SUSTAINED_WARM_UP_SECONDS (5), not measured, and these seconds, measured
//   BENCH_SUSTAINED_PROBES (5)  probes of that search (bisected below the drain rate at the default concurrency,
//                               from half of it)
//   BENCH_LATENCY_SECONDS (30)  seconds of paced publishing measured for the event-to-receipt latency at half the
//                               sustained rate, after a warm-up (1,000 events delivered, then 2 s of paced publishing)
//   BENCH_LIMIT_DELIVERIES (3000) deliveries per limit-loop run
//   BENCH_FANOUT (25)           subscriptions each event matches in the fan-out run
//   BENCH_SKIP_BUILD=1          use the existing build
//   BENCH_ONLY=drain            only the limit loop and the drain runs (no publish, sustained, latency or fan-out figures)
//   BENCH_ONLY=sustained        only the limit loop, a drain at the default concurrency, the sustained rate and the
//                               latency at half of it
//   BENCH_ONLY=isolation        only the isolation rows
//   BENCH_ONLY=fanout           only the fan-out rows (publishing with 1 and BENCH_FANOUT subscriptions, no worker)
//   BENCH_LATENCY_RATE          the latency row at this rate instead of half the sustained rate (with
//                               BENCH_SUSTAINED_PROBES=0 and BENCH_ONLY=sustained: a quick look at the latency alone)
//   TEST_DATABASE_ADMIN_URL / REDIS_URL  the servers to use (defaults: local PostgreSQL and Redis)
'use strict';
const { execFileSync, fork, spawn } = require('node:child_process');
const { createRequire } = require('node:module');
const { mkdtempSync, writeFileSync, readFileSync, rmSync } = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const crypto = require('node:crypto');
const https = require('node:https');

const ROOT = path.resolve(__dirname, '..');
const workerRequire = createRequire(path.join(ROOT, 'apps/worker/package.json'));
const { Pool } = require('pg');
const { generate } = require('selfsigned');
const Redis = workerRequire('ioredis');

const env = process.env;
const num = (name, fallback) => (env[name] ? Number(env[name]) : fallback);
const DEFAULT_CONCURRENCY = env.WORKER_CONCURRENCY ? Number(env.WORKER_CONCURRENCY) : defaultWorkerConcurrency();
const ONLY = env.BENCH_ONLY || '';
if (!['', 'drain', 'sustained', 'isolation', 'fanout'].includes(ONLY)) {
  throw new Error(`BENCH_ONLY: cannot read "${ONLY}" (expected drain, sustained, isolation or fanout, or unset for everything)`);
}
const SIZES = {
  publishSeconds: num('BENCH_PUBLISH_SECONDS', 8),
  drainEvents: num('BENCH_DRAIN_EVENTS', 10000),
  drainRuns: (ONLY === 'sustained' ? `1x${DEFAULT_CONCURRENCY}` : env.BENCH_DRAIN_RUNS || `1x${DEFAULT_CONCURRENCY},2x${DEFAULT_CONCURRENCY},1x16,2x16,1x16-noextraca`)
    .split(',')
    .map(parseDrainRun),
  sustainedSeconds: num('BENCH_SUSTAINED_SECONDS', 30),
  sustainedWarmUpSeconds: num('BENCH_SUSTAINED_WARM_UP_SECONDS', 5),
  sustainedProbes: num('BENCH_SUSTAINED_PROBES', 5),
  latencySeconds: num('BENCH_LATENCY_SECONDS', 30),
  limitDeliveries: num('BENCH_LIMIT_DELIVERIES', 3000),
  fanout: num('BENCH_FANOUT', 25),
};
const DRAIN_ONLY = ONLY === 'drain';
const SUSTAINED_ONLY = ONLY === 'sustained';
const ISOLATION_ONLY = ONLY === 'isolation';
const FANOUT_ONLY = ONLY === 'fanout';
// Every ratio but the drains' is taken against the limit loop at this concurrency (issue 36's targets).
const REFERENCE_CONCURRENCY = 16;
// The sustained-rate search starts at this share of the drain rate at the default concurrency, and goes down by it.
const SUSTAINED_START_SHARE = 0.5;
// A probe whose publisher fell further behind its schedule than this did not publish at its rate: not sustained.
const SUSTAINED_MAX_PUBLISHER_LAG_MS = 200;
// Each probe's fresh worker first delivers these (it is up and connected), then the paced warm-up begins.
const SUSTAINED_READY_EVENTS = 200;
const RSS_SAMPLE_MS = 200;
const WARM_UP_EVENTS = 1000;
const DRAIN_WARM_UP_EVENTS = num('BENCH_DRAIN_WARM_UP_EVENTS', 3000);
const ADMIN_URL = env.TEST_DATABASE_ADMIN_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = env.REDIS_URL || 'redis://127.0.0.1:6379';
const RUN_ID = `bench_${process.pid}_${Date.now().toString(36)}`;
const MiB = 1024 * 1024;
const LATENCY_WARM_UP_SECONDS = 2;
const LIMIT_WARM_UP_DELIVERIES = 2000;
const LATENCY_WARM_UP_EVENTS = 1000;
const ISOLATION_SECONDS = num('BENCH_ISOLATION_SECONDS', 15);
const ISOLATION_BACKLOG = num('BENCH_ISOLATION_BACKLOG', 20_000);
const ISOLATION_WARM_UP_EVENTS = 100;

/** The worker's default WORKER_CONCURRENCY, as its configuration schema declares it. */
function defaultWorkerConcurrency() {
  const source = readFileSync(path.join(ROOT, 'packages/config/src/config.ts'), 'utf8');
  const match = /WORKER_CONCURRENCY: Joi\.number\(\)[^\n]*\.default\((\d+)\)/.exec(source);
  if (!match) throw new Error('cannot find the default WORKER_CONCURRENCY in packages/config/src/config.ts (set WORKER_CONCURRENCY)');
  return Number(match[1]);
}

function parseDrainRun(text) {
  const match = /^(\d+)x(\d+)(-noextraca)?$/.exec(text.trim());
  if (!match) throw new Error(`BENCH_DRAIN_RUNS: cannot read "${text}" (expected e.g. 1x16 or 1x16-noextraca)`);
  return { workers: Number(match[1]), concurrency: Number(match[2]), extraCa: !match[3], label: text.trim() };
}

const log = (message) => process.stderr.write(`[bench] ${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const figures = [];

function report(figure) {
  figures.push(figure);
  process.stdout.write(`${JSON.stringify(figure)}\n`);
}

function percentile(values, p) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const round = (x, digits = 1) => (x === null || x === undefined ? null : Math.round(x * 10 ** digits) / 10 ** digits);

// --- set-up -----------------------------------------------------------------------------------------------

function databaseUrl(name) {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

// Set as the database is asked for: a signal from then on drops it (and the Redis prefix its processes use).
let databaseAskedFor = false;

async function createDatabase() {
  const admin = new Pool({ connectionString: ADMIN_URL, max: 1 });
  databaseAskedFor = true;
  await admin.query(`CREATE DATABASE ${RUN_ID}`);
  await admin.end();
  const url = databaseUrl(RUN_ID);
  execFileSync(path.join(ROOT, 'node_modules/.bin/prisma'), ['migrate', 'deploy'], {
    cwd: ROOT,
    env: { ...env, DATABASE_URL: url },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return url;
}

async function dropDatabase() {
  const admin = new Pool({ connectionString: ADMIN_URL, max: 1 });
  await admin.query(`DROP DATABASE IF EXISTS ${RUN_ID} WITH (FORCE)`).catch((err) => log(`drop database: ${err.message}`));
  await admin.end();
}

async function deleteRedisPrefix() {
  const redis = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${RUN_ID}*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
  await redis.quit();
}

async function makeTls() {
  const ca = await generate([{ name: 'commonName', value: 'Bench CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const leaf = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }, { type: 2, value: 'localhost' }] },
    ],
    ca: { key: ca.private, cert: ca.cert },
  });
  const dir = makeTempDir('bench-ca-');
  const caFile = path.join(dir, 'ca.pem');
  writeFileSync(caFile, ca.cert);
  return { caFile, caCert: ca.cert, key: leaf.private, cert: leaf.cert };
}

function startReceiver(tls) {
  const child = fork(path.join(__dirname, 'receiver.js'), [], {
    env: { ...env, BENCH_RECEIVER_TLS: JSON.stringify({ key: tls.key, cert: tls.cert }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ask = (message) =>
    new Promise((resolve) => {
      child.once('message', resolve);
      child.send(message);
    });
  const stats = (reset = false, since = undefined) => ask({ cmd: 'stats', reset, since });
  const statsOf = (prefix, since = undefined) => ask({ cmd: 'stats', prefix, since });
  const count = async () => (await ask({ cmd: 'count' })).count;
  const heal = () => ask({ cmd: 'heal' });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ port: m.port, stats, statsOf, count, heal, close: () => child.kill() }));
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
  });
}

function serviceEnv(databaseUrlValue, port, tls) {
  return {
    ...env,
    NODE_ENV: 'production',
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    DATABASE_URL: databaseUrlValue,
    REDIS_URL,
    REDIS_PREFIX: RUN_ID,
    JWT_SECRET: crypto.randomBytes(32).toString('hex'),
    API_KEY_PEPPER: crypto.randomBytes(32).toString('hex'),
    ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
    COOKIE_SECURE: 'false',
    BCRYPT_ROUNDS: '4',
    RATE_LIMIT_PER_MINUTE: '100000000',
    WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
    METRICS_PORT: '0', // several workers share this host
    WEBHOOK_EXTRA_CA_FILE: tls.caFile,
    MAIL_OUTBOX_DIR: makeTempDir('bench-mail-'),
    LOG_LEVEL: env.BENCH_LOG_LEVEL || 'info',
  };
}

// Every child still running when the bench exits (a failure, Ctrl-C) is killed, so that none goes on loading the machine.
const children = new Set();
// The certificate and mail folders the bench makes go with it, however it ends.
const tempDirs = new Set();
function makeTempDir(prefix) {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

// Ctrl-C or SIGTERM: the API and worker processes are killed, the bench's database dropped and its Redis prefix
// deleted (what main()'s own clean-up would have done), then the bench exits with 130. Each step is bounded: a server
// that does not answer leaves its part behind rather than keeping the bench alive. A second signal exits at once.
// (Exiting at once, as the bench used to, skipped main()'s clean-up and left the database and the keys behind.)
const STOP_STEP_TIMEOUT_MS = 10_000;
let signalled = false;
let stopping = null;
let stopCode = 1;

/** The promise of `work`, or nothing after `ms` (with a line saying what was left behind). */
function within(ms, what, work) {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => {
      log(`${what}: no answer within ${ms / 1000} s, left behind`);
      resolve();
    }, ms);
  });
  const done = Promise.resolve()
    .then(work)
    .catch((err) => log(`${what}: ${err.message}`));
  return Promise.race([done, late]).finally(() => clearTimeout(timer));
}

/**
 * Kills the children, drops the database and deletes the Redis prefix (both idempotent: main()'s finally may be
 * doing the same meanwhile), then exits with 130 after a signal, else with `code`. Once only.
 */
function stopAndExit(code) {
  stopCode = signalled ? 130 : code;
  if (stopping) return stopping;
  // What the interrupted measurement does meanwhile fails (its processes are gone, then its database): expected.
  process.on('unhandledRejection', () => undefined);
  process.on('uncaughtException', () => undefined);
  stopping = (async () => {
    const exits = [...children].map((child) => {
      child.stopping = true;
      const exited = child.exitCode === null && child.signalCode === null ? new Promise((resolve) => child.once('exit', resolve)) : null;
      child.kill('SIGKILL');
      return exited;
    });
    await within(5_000, 'stopping the processes', () => Promise.all(exits));
    // (A bench that made neither, as bench:http-client, has nothing to drop.)
    if (databaseAskedFor) {
      await within(STOP_STEP_TIMEOUT_MS, `dropping database ${RUN_ID}`, dropDatabase);
      await within(STOP_STEP_TIMEOUT_MS, `deleting Redis prefix ${RUN_ID}`, deleteRedisPrefix);
    }
    process.exit(stopCode);
  })();
  return stopping;
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (signalled) {
      log(`${signal} again: exiting without cleaning up (database ${RUN_ID} and Redis prefix ${RUN_ID} may be left)`);
      process.exit(130);
    }
    signalled = true;
    log(`${signal}: stopping the processes, dropping database ${RUN_ID} and deleting its Redis keys (again to exit at once)`);
    stopAndExit(130);
  });
}

/** main()'s rejection: the error said (unless a signal is stopping the bench), then the same clean-up, exit 1. */
function failed(err) {
  if (!signalled) process.stderr.write(`[bench] failed: ${err.stack ?? err.message}\n`);
  return stopAndExit(1);
}

const NODE_OPTIONS = env.BENCH_NODE_OPTIONS ? env.BENCH_NODE_OPTIONS.split(' ') : [];
// The API too: through its launcher (apps/api/run.sh), as scripts/start.sh and Dockerfile.api start it.
const API_COMMAND = ['sh', path.join(ROOT, 'apps/api/run.sh'), ...NODE_OPTIONS];
// The worker is started as in production: through its launcher, which adds the V8 options it is sized for.
const WORKER_COMMAND = ['sh', path.join(ROOT, 'apps/worker/run.sh'), ...NODE_OPTIONS];

/** A built app as a child process; its logs are discarded (they would only slow the terminal). */
function startProcess([command, ...args], processEnv) {
  if (stopping) throw new Error('the bench is stopping');
  const child = spawn(command, args, {
    env: processEnv,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const main = path.relative(ROOT, args.find((arg) => arg.startsWith(ROOT)));
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr = (stderr + chunk).slice(-4000)));
  children.add(child);
  child.on('exit', (code, signal) => {
    children.delete(child);
    if (!child.stopping) log(`${main} exited unexpectedly (${code ?? signal}): ${stderr}`);
  });
  return child;
}

async function stopProcess(child) {
  if (child.exitCode !== null) return;
  child.stopping = true;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  await exited;
  clearTimeout(timer);
}

/** Peak and current RSS of a live process, from /proc (Linux). */
function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) * 1024;
  return { peak: kib('VmHWM'), current: kib('VmRSS') };
}

/** A process's peak RSS (VmHWM) in MiB, 0 when it is already gone. */
function peakRssMiBOf(child) {
  try {
    return child.exitCode === null ? memoryOf(child.pid).peak / MiB : 0;
  } catch {
    return 0; // exited between the check and the read
  }
}

// Each phase that ran a worker, with the highest peak RSS of its workers: the table's "worker peak RSS" row.
const workerPeaks = [];

/** Stops a phase's workers, reading their peak RSS (VmHWM) just before; resolves with the highest, in MiB. */
async function stopWorkers(phase, workers) {
  const peakMiB = Math.max(...workers.map(peakRssMiBOf));
  workerPeaks.push({ phase, peakMiB });
  await Promise.all(workers.map(stopProcess));
  return peakMiB;
}

/** Runs `work` while sampling a process's RSS every RSS_SAMPLE_MS: the highest VmRSS seen, and VmHWM at the end. */
async function withRssSampling(pid, work) {
  let rss = 0;
  const sample = () => (rss = Math.max(rss, memoryOf(pid).current));
  sample();
  const timer = setInterval(sample, RSS_SAMPLE_MS);
  try {
    const result = await work();
    sample();
    return { result, rssMiB: rss / MiB, peakRssMiB: memoryOf(pid).peak / MiB };
  } finally {
    clearInterval(timer);
  }
}

const CLOCK_TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/** CPU time (user + system) a live process has used so far, from /proc (Linux). */
function cpuMsOf(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S; // utime, stime (fields 14, 15)
}

const sum = (values) => values.reduce((a, b) => a + b, 0);

/**
 * The machine's busy and total CPU time so far, in clock ticks, from /proc/stat (Linux): user, nice, system, idle,
 * iowait, irq, softirq, steal (guest time is already counted in user and nice).
 */
function machineTicks() {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n')[0].split(/\s+/).slice(1, 9).map(Number);
  const [, , , idle, iowait] = ticks;
  const total = sum(ticks);
  return { busy: total - idle - iowait, total };
}

/**
 * CPU time of the given processes and of the whole machine from now on: the function it returns, given the events of
 * the window, answers each process's CPU per event and the machine's busy share since. On these VMs a process that
 * sleeps between events pays for every wake-up, so the same code costs more per event at a paced rate than
 * saturated (docs/performance.md).
 */
function cpuWindow(pids) {
  const start = { cpu: pids.map(cpuMsOf), machine: machineTicks() };
  return (events) => {
    const machine = machineTicks();
    return {
      perEvent: pids.map((pid, i) => (cpuMsOf(pid) - start.cpu[i]) / events),
      machineBusy: (machine.busy - start.machine.busy) / (machine.total - start.machine.total),
    };
  };
}

// --- the API, as a client ----------------------------------------------------------------------------------

// An idle socket is closed after 4 s, before the API's keep-alive timeout (Node's 5 s) closes it: a request that goes
// out on a socket as the API closes it is reset (ECONNRESET), and open-loop publishing after a stall reaches for the
// long-idle sockets at once.
const agent = new (require('node:http').Agent)({ keepAlive: true, maxSockets: 256, timeout: 4_000 });

function call(base, method, route, { token, body } = {}) {
  const started = performance.now();
  return fetchJson(`${base}${route}`, method, token, body).then((res) => ({ ...res, ms: performance.now() - started }));
}

function fetchJson(url, method, token, body) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = require('node:http').request(
      url,
      {
        method,
        agent,
        headers: {
          accept: 'application/json',
          ...(token && { authorization: `Bearer ${token}` }),
          ...(payload && { 'content-type': 'application/json', 'content-length': String(payload.length) }),
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json = null;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            json = { raw: text };
          }
          resolve({ status: res.statusCode, body: json });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function expectStatus(promise, status, what) {
  const res = await promise;
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

async function waitForHealthy(base) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await call(base, 'GET', '/readyz');
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error('the API did not become ready within 60 s');
    await sleep(200);
  }
}

async function setUpTenant(base, serviceEnvironment, receiverPort, name = 'Bench', hookPath = '/hook') {
  const email = `owner-${name.toLowerCase()}-${RUN_ID}@bench.example`;
  const password = crypto.randomBytes(12).toString('hex');
  execFileSync(process.execPath, [path.join(ROOT, 'apps/api/dist/cli.js'), 'create-owner', '--email', email, '--password', password, '--org', name], {
    env: serviceEnvironment,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const session = await expectStatus(call(base, 'POST', '/api/v1/auth/login', { body: { email, password } }), 200, 'login');
  const token = session.token;
  const key = await expectStatus(
    call(base, 'POST', '/api/v1/api-keys', { token, body: { name: 'engine', scopes: ['assessments:update'] } }),
    201,
    'create API key',
  );
  const project = await expectStatus(call(base, 'POST', '/api/v1/projects', { token, body: { name: 'Bench' } }), 201, 'create project');
  const assessment = await expectStatus(
    call(base, 'POST', `/api/v1/projects/${project.id}/assessments`, { token, body: { name: 'Bench run' } }),
    201,
    'create assessment',
  );
  await expectStatus(call(base, 'POST', `/api/v1/assessments/${assessment.id}/launch`, { token }), 200, 'launch');
  await expectStatus(call(base, 'POST', `/api/v1/assessments/${assessment.id}/start`, { token: key.key }), 200, 'start');
  // Creating a subscription is a sudo-mode change: a session signed in more than 10 minutes ago must send the
  // password, each one counted at the login limit's pace. A slow machine's phases outlast that, so the bench signs
  // in again first once its session is older than 5 minutes (a recent sign-in needs no password).
  let sudoSession = { token, signedInAt: Date.now() };
  const recentSessionToken = async () => {
    if (Date.now() - sudoSession.signedInAt > 5 * 60_000) {
      const again = await expectStatus(call(base, 'POST', '/api/v1/auth/login', { body: { email, password } }), 200, 'login again');
      sudoSession = { token: again.token, signedInAt: Date.now() };
    }
    return sudoSession.token;
  };
  const subscribe = async (subscriptionName, pathName = hookPath) =>
    expectStatus(
      call(base, 'POST', '/api/v1/webhooks/subscriptions', {
        token: await recentSessionToken(),
        body: { name: subscriptionName, url: `https://127.0.0.1:${receiverPort}${pathName}`, events: ['finding.created'] },
      }),
      201,
      'create subscription',
    );
  await subscribe('bench');
  const subscriptions = async () =>
    (await expectStatus(call(base, 'GET', '/api/v1/webhooks/subscriptions', { token }), 200, 'list subscriptions')).data.map((sub) => sub.id);
  return { token, engineKey: key.key, assessmentId: assessment.id, subscribe, subscriptions };
}

// --- load -----------------------------------------------------------------------------------------------

let findingSeq = 0;
function publishOne(base, tenant) {
  findingSeq += 1;
  return call(base, 'POST', `/api/v1/assessments/${tenant.assessmentId}/findings`, {
    token: tenant.engineKey,
    body: { title: `Bench finding ${findingSeq}`, severity: 'high', fingerprint: `bench-${RUN_ID}-${findingSeq}` },
  });
}

/** `clients` closed-loop clients publishing for `seconds` (after a 1 s warm-up): events/s and response times. */
async function publishFor(base, tenant, clients, seconds) {
  const times = [];
  let errors = 0;
  let measuring = false;
  const warmupEnd = Date.now() + 1000;
  const end = warmupEnd + seconds * 1000;
  let started = 0;
  const client = async () => {
    while (Date.now() < end) {
      const res = await publishOne(base, tenant);
      if (!measuring && Date.now() >= warmupEnd) {
        measuring = true;
        started = performance.now();
      }
      if (res.status !== 201) {
        errors += 1;
        if (errors <= 3) log(`publish answered ${res.status}: ${JSON.stringify(res.body)}`);
      } else if (measuring) times.push(res.ms);
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  const elapsed = (performance.now() - started) / 1000;
  return { perSecond: times.length / elapsed, p50: percentile(times, 50), p99: percentile(times, 99), errors, events: times.length };
}

/** The answers that were not 201, the first few logged. */
function logRefused(what, answers) {
  const refused = answers.filter((res) => res.status !== 201);
  for (const res of refused.slice(0, 3)) log(`${what}: a publish answered ${res.status}: ${JSON.stringify(res.body ?? res.error)}`);
  return refused;
}

/**
 * Publishes `rate` events/s for `seconds` to a tenant, open loop: one request every 1/rate s, not waiting for answers.
 * Resolves with the answers in the order sent, and the most the publisher fell behind its schedule (a stall of the
 * bench itself shows there). `onSent` and `onAnswer` see each request as it goes and each answer as it comes.
 */
async function publishPaced(base, tenant, rate, seconds, { onSent = () => {}, onAnswer = () => {} } = {}) {
  const answers = [];
  let maxLagMs = 0;
  const total = Math.round(rate * seconds);
  const t0 = performance.now();
  for (let i = 0; i < total; i += 1) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    maxLagMs = Math.max(maxLagMs, performance.now() - due);
    // A connection reset (the API closing an idle keep-alive socket as a request goes out on it) is a failed publish,
    // not an unhandled rejection that ends the bench: the rows count only the 201s.
    const answer = publishOne(base, tenant).catch((err) => ({ status: 0, body: null, error: err.message }));
    onSent();
    answers.push(
      answer.then((res) => {
        onAnswer(res);
        return res;
      }),
    );
  }
  return { answers: await Promise.all(answers), maxLagMs };
}

/** Publishes exactly `count` events with 32 clients (a backlog, when no worker runs). */
async function publishCount(base, tenant, count) {
  let left = count;
  const client = async () => {
    while (left > 0) {
      left -= 1;
      const res = await publishOne(base, tenant);
      if (res.status !== 201) throw new Error(`publish answered ${res.status}: ${JSON.stringify(res.body)}`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, client));
}

async function countDeliveries(db, status) {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = $1', [status]);
  return rows[0].n;
}

async function waitUntil(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** Starts a drain run's worker processes (a fresh process each). */
function startDrainWorkers(workerEnv, run) {
  return Array.from({ length: run.workers }, () =>
    startProcess(WORKER_COMMAND, {
      ...workerEnv,
      WORKER_CONCURRENCY: String(run.concurrency),
      ...(run.extraCa ? {} : { WEBHOOK_EXTRA_CA_FILE: '', NODE_EXTRA_CA_CERTS: workerEnv.WEBHOOK_EXTRA_CA_FILE }),
    }),
  );
}

/** The delivery queue, as the bench's own BullMQ client: to pause and resume the workers (and to empty it). */
function benchDeliveryQueue(processEnv) {
  const { Queue } = workerRequire('bullmq');
  const { bullPrefix, DELIVERY_QUEUE } = require(path.join(ROOT, 'packages/queue/dist/index.js'));
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(DELIVERY_QUEUE, { connection, prefix: bullPrefix({ redisPrefix: processEnv.REDIS_PREFIX, redis: { mode: 'single' } }) });
  queue.closeAll = async () => {
    await queue.close();
    connection.disconnect();
  };
  return queue;
}

/**
 * A measured drain's workers, warm: they deliver DRAIN_WARM_UP_EVENTS published while they run (their code compiled,
 * their connections open, as a worker that has run for a while has them), then the queue is paused, so that the
 * measured backlog waits for them. The limit loop beside them is warmed up the same way (measureLimitLoops); a fresh
 * worker spent its first seconds compiling (TurboFan on the core the receiver, PostgreSQL and Redis share).
 */
async function warmDrainWorkers(base, tenant, db, queue, workerEnv, run) {
  const processes = startDrainWorkers(workerEnv, run);
  if (DRAIN_WARM_UP_EVENTS > 0) {
    const target = (await countDeliveries(db, 'succeeded')) + DRAIN_WARM_UP_EVENTS;
    const started = Date.now();
    await publishCount(base, tenant, DRAIN_WARM_UP_EVENTS);
    await waitUntil(async () => (await countDeliveries(db, 'succeeded')) >= target, 120_000, `the ${DRAIN_WARM_UP_EVENTS} warm-up deliveries`);
    log(`drain ${run.label}: the workers delivered ${DRAIN_WARM_UP_EVENTS} warm-up events in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }
  await queue.pause();
  return processes;
}

/**
 * Waits until every pending delivery succeeded, and measures it: with `warm` (processes started and a paused queue)
 * from the queue's resumption, else with fresh worker processes started now.
 */
async function drain(db, receiver, workerEnv, run, warm = null) {
  const pending = await countDeliveries(db, 'pending');
  const succeededBefore = await countDeliveries(db, 'succeeded');
  await receiver.stats(true);
  const processes = warm ? warm.processes : startDrainWorkers(workerEnv, run);
  if (warm) await warm.queue.resume();
  let rssAtQuarter = null;
  let atQuarter = null; // deliveries done and the workers' CPU time then: CPU per delivery without the start-up
  await waitUntil(
    async () => {
      const done = (await countDeliveries(db, 'succeeded')) - succeededBefore;
      if (rssAtQuarter === null && done >= pending / 4) {
        rssAtQuarter = processes.map((p) => memoryOf(p.pid).current);
        atQuarter = { done, cpuMs: sum(processes.map((p) => cpuMsOf(p.pid))), at: Date.now() };
      }
      return done >= pending;
    },
    600_000,
    `${pending} deliveries to succeed`,
  );
  const finishedAt = Date.now();
  const memory = processes.map((p) => memoryOf(p.pid));
  const cpuMs = sum(processes.map((p) => cpuMsOf(p.pid)));
  const stats = await receiver.stats(true);
  const peakRssMiB = await stopWorkers(`drain ${run.label ?? `${run.workers}x${run.concurrency}`}`, processes);
  const seconds = (finishedAt - stats.firstAt) / 1000;
  return {
    deliveries: pending,
    perSecond: pending / seconds,
    peakRssMiB,
    rssGrowthMiB: rssAtQuarter ? Math.max(...memory.map((m, i) => m.current - rssAtQuarter[i])) / MiB : null,
    cpuMsPerDelivery: atQuarter && pending > atQuarter.done ? (cpuMs - atQuarter.cpuMs) / (pending - atQuarter.done) : null,
    // The same deliveries a second, the first quarter (the fresh process's start-up and warm-up) left out.
    perSecondAfterQuarter: atQuarter && finishedAt > atQuarter.at ? (pending - atQuarter.done) / ((finishedAt - atQuarter.at) / 1000) : null,
  };
}

// --- the limit loop ---------------------------------------------------------------------------------------

/** What the machine allows: sign + POST (got, keep-alive) + INSERT per delivery, `concurrency` at a time. */
let limitRuns = 0;

async function limitLoop(databaseUrlValue, receiverPort, tls, concurrency, deliveries) {
  const run = (limitRuns += 1);
  const { got } = await workerRequire('got');
  const db = new Pool({ connectionString: databaseUrlValue, max: 10 });
  await db.query('CREATE TABLE IF NOT EXISTS bench_limit_attempts (id text PRIMARY KEY, delivery text NOT NULL, status int, duration_ms int, created_at timestamptz NOT NULL DEFAULT now())');
  await settleDatabase(db);
  const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca: [tls.caCert] });
  const secret = crypto.randomBytes(32);
  const url = `https://127.0.0.1:${receiverPort}/limit`;
  const times = [];
  let next = 0;
  const started = performance.now();
  const one = async () => {
    const t0 = performance.now();
    const id = `limit_${next}`;
    const body = Buffer.from(
      JSON.stringify({ id: `evt_${next}`, type: 'finding.created', created_at: new Date().toISOString(), data: { finding_id: id, severity: 'high' } }),
    );
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = crypto.createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
    const response = await got.post(url, {
      body,
      headers: { 'content-type': 'application/json', 'webhook-signature': `t=${timestamp},v1=${signature}` },
      agent: { https: httpsAgent },
      followRedirect: false,
      retry: { limit: 0 },
      throwHttpErrors: false,
      timeout: { request: 10_000 },
    });
    await db.query('INSERT INTO bench_limit_attempts (id, delivery, status, duration_ms) VALUES ($1, $2, $3, $4)', [
      `${RUN_ID}_${id}_${concurrency}_${run}`,
      id,
      response.statusCode,
      Math.round(performance.now() - t0),
    ]);
    times.push(performance.now() - t0);
  };
  const lane = async () => {
    while (next < deliveries) {
      next += 1;
      await one();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  const seconds = (performance.now() - started) / 1000;
  httpsAgent.destroy();
  await db.end();
  return { perSecond: deliveries / seconds, p50: percentile(times, 50), p99: percentile(times, 99) };
}

// --- the run ------------------------------------------------------------------------------------------------

async function main() {
  const began = Date.now();
  if (env.BENCH_SKIP_BUILD !== '1') {
    log('building (as npm start does)');
    execFileSync('bash', ['-c', 'source scripts/lib.sh && prepare_workspace'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const tls = await makeTls();
  const dbUrl = await createDatabase();
  const receiver = await startReceiver(tls);
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const base = `http://127.0.0.1:${port}`;
  const processEnv = serviceEnv(dbUrl, port, tls);
  const api = startProcess(API_COMMAND, processEnv);
  const db = new Pool({ connectionString: dbUrl, max: 2 });
  const cleanup = async () => {
    await stopProcess(api);
    receiver.close();
    await db.end();
    await dropDatabase();
    await deleteRedisPrefix();
  };
  const finished = () => log(`finished in ${((Date.now() - began) / 1000).toFixed(0)} s`);
  try {
    await waitForHealthy(base);
    const tenant = await setUpTenant(base, processEnv, receiver.port);
    log(`set up in ${((Date.now() - began) / 1000).toFixed(0)} s; database ${RUN_ID}`);

    if (ISOLATION_ONLY) {
      printIsolationTable(await measureIsolation(base, processEnv, receiver));
      finished();
      return;
    }
    if (FANOUT_ONLY) {
      await publishFor(base, tenant, 8, SIZES.publishSeconds); // warm-up, not measured
      await measureFanout(base, tenant);
      finished();
      return;
    }
    const limit = await measureLimitLoops(dbUrl, receiver, tls);
    await receiver.stats(true);
    const reference = limit[REFERENCE_CONCURRENCY];
    const limitNow = (concurrency) => limitLoop(dbUrl, receiver.port, tls, concurrency, SIZES.limitDeliveries);
    const everything = !DRAIN_ONLY && !SUSTAINED_ONLY;
    const results = { limit, reference };
    if (everything) results.publish = await measurePublish(base, tenant, api, reference, limitNow);

    // Without the publish phase nothing was published yet: a small backlog of its own warms up the same way.
    if (!everything) await publishCount(base, tenant, WARM_UP_EVENTS);
    log('draining what publishing left (warm-up, not measured)');
    await drain(db, receiver, processEnv, { workers: 1, concurrency: 16, extraCa: true, label: 'warm-up 1x16' });
    results.drains = await measureDrains(base, tenant, db, receiver, processEnv, limit, limitNow);

    if (!DRAIN_ONLY) {
      results.sustained = await measureSustainedRate(base, tenant, receiver, processEnv, defaultDrainRate(results.drains), reference, limitNow);
      // The sustained search's after-loop is the latency row's before-loop: nothing runs between them.
      const loopBefore = results.sustained.limit.after;
      results.latency = await measureLatency(base, tenant, receiver, processEnv, latencyRate(results.sustained), reference, limitNow, api.pid, loopBefore);
    }
    let isolation = null;
    if (everything) {
      results.fanout = await measureFanout(base, tenant);
      await discardBacklog(db, processEnv);
      isolation = await measureIsolation(base, processEnv, receiver);
    }
    results.workerPeak = reportWorkerPeak();
    printTable(results);
    if (isolation) printIsolationTable(isolation);
    finished();
  } finally {
    await cleanup();
    agent.destroy();
  }
}

/** The limit loop at the reference concurrency and at every drain run's (after a warm-up run). */
async function measureLimitLoops(dbUrl, receiver, tls) {
  log('limit loop');
  // Warmed up first, as every measured run of the service is (its code compiled, its connections open): a cold
  // limit loop at c=16 measured about 1,370/s beside 1,800-2,000/s warm, which flattered every ratio.
  await limitLoop(dbUrl, receiver.port, tls, REFERENCE_CONCURRENCY, LIMIT_WARM_UP_DELIVERIES);
  const limit = {};
  for (const concurrency of new Set([REFERENCE_CONCURRENCY, ...SIZES.drainRuns.map((r) => r.concurrency)])) {
    limit[concurrency] = await limitLoop(dbUrl, receiver.port, tls, concurrency, SIZES.limitDeliveries);
    report({ figure: `limit loop c=${concurrency}`, deliveries_per_s: round(limit[concurrency].perSecond), p50_ms: round(limit[concurrency].p50), p99_ms: round(limit[concurrency].p99) });
  }
  return limit;
}

/**
 * Every loop starts as the first one did, not charged with what the service left behind: an empty table of its own,
 * PostgreSQL's dirty pages written out, and no autovacuum running in the database (waited for, at most 60 s).
 */
async function settleDatabase(db) {
  await db.query('TRUNCATE bench_limit_attempts');
  await db.query('CHECKPOINT').catch((err) => log(`limit loop: CHECKPOINT refused (${err.message}); going on`));
  const vacuuming = async () =>
    Number((await db.query("SELECT count(*) AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND datname = current_database()")).rows[0].n);
  const deadline = Date.now() + 60_000;
  while ((await vacuuming()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
}

/**
 * `measure` between two limit loops at `concurrency`, and the loop beside it: the mean of their rates, the lower of
 * their p99s (one stall in a loop of a few thousand deliveries moves its p99; the lower is the stricter reference).
 * On a shared VM the machine's speed drifts over a run (one machine's loop at c=16 read 955-1,363/s within half an
 * hour), so a figure is compared with the loops run just before and just after it, not with the one at the run's
 * start, which is still printed (`ratio_to_run_start_limit`). `before` is taken as given when the previous figure's
 * after-loop is it.
 */
async function besideLimit(limitNow, concurrency, measure, before) {
  before ??= await limitNow(concurrency);
  const result = await measure();
  const after = await limitNow(concurrency);
  return { result, limit: { perSecond: (before.perSecond + after.perSecond) / 2, p99: Math.min(before.p99, after.p99), before, after } };
}

/** The beside-loop fields of a figure's JSON line. */
function besideFields(limit, start) {
  return {
    limit_per_s: round(limit.perSecond),
    limit_p99_ms: round(limit.p99),
    limit_before_per_s: round(limit.before.perSecond),
    limit_after_per_s: round(limit.after.perSecond),
    run_start_limit_per_s: round(start.perSecond),
  };
}

/** Closed-loop publishing at 1, 8 and 32 clients, no worker running, with the API's RSS sampled meanwhile. */
async function measurePublish(base, tenant, api, reference, limitNow) {
  log('publish (no worker running)');
  const publish = {};
  let loopBefore; // each level's after-loop is the next one's before-loop
  for (const clients of [1, 8, 32]) {
    const beside = await besideLimit(
      limitNow,
      REFERENCE_CONCURRENCY,
      () => withRssSampling(api.pid, () => publishFor(base, tenant, clients, SIZES.publishSeconds)),
      loopBefore,
    );
    loopBefore = beside.limit.after;
    const sampled = beside.result;
    const result = { ...sampled.result, apiRssMiB: sampled.rssMiB, apiPeakRssMiB: sampled.peakRssMiB, limit: beside.limit };
    publish[clients] = result;
    report({
      figure: `publish ${clients} client${clients > 1 ? 's' : ''}`,
      events_per_s: round(result.perSecond),
      p50_ms: round(result.p50),
      p99_ms: round(result.p99),
      errors: result.errors,
      ratio_to_limit: round(result.perSecond / beside.limit.perSecond, 3),
      ratio_to_run_start_limit: round(result.perSecond / reference.perSecond, 3),
      ...besideFields(beside.limit, reference),
      api_rss_mib: round(result.apiRssMiB),
      api_peak_rss_mib: round(result.apiPeakRssMiB),
    });
  }
  return publish;
}

const oneWorkerLabel = (run) => `1x${run.concurrency}${run.extraCa ? '' : '-noextraca'}`;

/**
 * Each drain run of SIZES.drainRuns on a fresh backlog; a two-worker run is also compared with one worker's (run before
 * it). Runs in a row at one concurrency share a loop: one run's after-loop is the next one's before-loop (its backlog
 * is published after that loop, with no worker running), so two workers run right after one, against the loop between
 * them.
 */
async function measureDrains(base, tenant, db, receiver, processEnv, limit, limitNow) {
  const drains = {};
  let previous = null;
  for (const run of SIZES.drainRuns) {
    const queue = benchDeliveryQueue(processEnv);
    const processes = await warmDrainWorkers(base, tenant, db, queue, processEnv, run);
    log(`drain ${run.label}: publishing a backlog of ${SIZES.drainEvents} (the queue paused)`);
    await publishCount(base, tenant, SIZES.drainEvents);
    const loopBefore = previous?.concurrency === run.concurrency ? previous.limit.after : undefined;
    const beside = await besideLimit(limitNow, run.concurrency, () => drain(db, receiver, processEnv, run, { processes, queue }), loopBefore);
    await queue.closeAll();
    const result = { ...beside.result, limit: beside.limit };
    previous = { concurrency: run.concurrency, limit: beside.limit };
    const oneWorker = run.workers > 1 ? drains[oneWorkerLabel(run)] : undefined;
    // Each against the loops beside it: on these VMs the machine's speed drifts between two runs, and their rates
    // alone would compare its speed at two moments as much as one worker with two.
    result.ratioToOneWorker = oneWorker ? result.perSecond / beside.limit.perSecond / (oneWorker.perSecond / oneWorker.limit.perSecond) : null;
    result.rateToOneWorker = oneWorker ? result.perSecond / oneWorker.perSecond : null;
    drains[run.label] = result;
    report({
      figure: `drain ${run.workers} worker${run.workers > 1 ? 's' : ''} c=${run.concurrency}${run.extraCa ? '' : ' (CA via NODE_EXTRA_CA_CERTS, no WEBHOOK_EXTRA_CA_FILE)'}`,
      deliveries: result.deliveries,
      warm_up_deliveries: DRAIN_WARM_UP_EVENTS,
      deliveries_per_s: round(result.perSecond),
      peak_rss_mib: round(result.peakRssMiB),
      rss_growth_after_first_quarter_mib: round(result.rssGrowthMiB),
      worker_cpu_ms_per_delivery: round(result.cpuMsPerDelivery, 3),
      ratio_to_limit: round(result.perSecond / beside.limit.perSecond, 3),
      ratio_to_run_start_limit: round(result.perSecond / limit[run.concurrency].perSecond, 3),
      ...besideFields(beside.limit, limit[run.concurrency]),
      deliveries_per_s_after_first_quarter: round(result.perSecondAfterQuarter),
      ...(run.workers > 1 && { ratio_to_one_worker: round(result.ratioToOneWorker, 3), rate_to_one_worker: round(result.rateToOneWorker, 3) }),
    });
  }
  return drains;
}

/** The drain rate of one worker at the default concurrency (or of the first drain run, when the list has none). */
function defaultDrainRate(drains) {
  return (drains[`1x${DEFAULT_CONCURRENCY}`] ?? Object.values(drains)[0]).perSecond;
}

// --- the end-to-end sustained rate ------------------------------------------------------------------------

/**
 * The highest paced publishing rate at which one worker at the default settings keeps the backlog flat, publishing
 * and delivering together. Bisected between the highest rate that held (none at first) and the lowest that did not,
 * which is at first the drain rate at the default concurrency: one worker delivers no faster than it drains a
 * backlog, and probing above it would only flood the machine (and take minutes to drain).
 */
async function measureSustainedRate(base, tenant, receiver, processEnv, drainRate, reference, limitNow) {
  const probes = [];
  const search = async () => {
    let held = null;
    let failed = drainRate;
    let rate = drainRate * SUSTAINED_START_SHARE;
    for (let i = 0; i < SIZES.sustainedProbes; i += 1) {
      const probe = await sustainedProbe(base, tenant, receiver, processEnv, rate);
      probes.push(probe);
      if (probe.sustained) held = rate;
      else failed = rate;
      rate = nextProbeRate(held, failed);
    }
    return held ?? 0;
  };
  const beside = await besideLimit(limitNow, REFERENCE_CONCURRENCY, search);
  const result = { rate: beside.result, probes, limit: beside.limit };
  report({
    figure: 'end-to-end sustained rate',
    events_per_s: round(result.rate),
    ratio_to_limit: round(result.rate / beside.limit.perSecond, 3),
    ratio_to_run_start_limit: round(result.rate / reference.perSecond, 3),
    ...besideFields(beside.limit, reference),
    probes: probes.map((p) => ({
      rate: round(p.rate),
      sustained: p.sustained,
      backlog_start: p.backlogStart,
      backlog_end: p.backlogEnd,
      backlog_max: p.backlogMax,
      publish_p99_ms: round(p.publishP99),
      publisher_max_lag_ms: round(p.maxLagMs),
      errors: p.errors,
      worker_peak_rss_mib: round(p.workerPeakRssMiB),
    })),
  });
  return result;
}

function nextProbeRate(held, failed) {
  return held === null ? failed * SUSTAINED_START_SHARE : (held + failed) / 2;
}

/**
 * One probe: a fresh worker started as production starts it (default settings) that first delivers
 * SUSTAINED_READY_EVENTS, then the bench publishes `rate` events/s, open loop, for SIZES.sustainedWarmUpSeconds (not
 * measured) + SIZES.sustainedSeconds. The backlog (events accepted or still unanswered, minus deliveries received)
 * is sampled every second; the rate is sustained when the backlog at the end of the window is no more than at its
 * start plus max(1 s of events, 2 % of the window's events), every publish was accepted, and the publisher kept to
 * its schedule (otherwise the bench did not publish at `rate`: inconclusive, counted as not sustained). The backlog
 * drains before the worker stops, so the next probe starts from none.
 */
async function sustainedProbe(base, tenant, receiver, processEnv, rate) {
  const { sustainedWarmUpSeconds: warmUp, sustainedSeconds: seconds } = SIZES;
  log(`sustained rate: probing ${rate.toFixed(0)} events/s for ${warmUp} + ${seconds} s with one worker at the default settings`);
  const worker = await startWarmWorker(base, tenant, receiver, processEnv, SUSTAINED_READY_EVENTS);
  // Unanswered publishes count as backlog, so that the window's start (requests in flight) and its end (every
  // answer in) are counted alike.
  let sent = 0;
  let refused = 0;
  const backlog = async () => {
    const received = await receiver.count();
    return sent - refused - received;
  };
  const sampler = sampleEverySecond(backlog);
  const { answers, maxLagMs } = await publishPaced(base, tenant, rate, warmUp + seconds, {
    onSent: () => {
      sent += 1;
    },
    onAnswer: (res) => {
      if (res.status !== 201) refused += 1;
    },
  });
  // Both ends of the window are samples at their time: after the last answer came in, an API that fell behind has
  // let the worker catch up on everything it accepted.
  const samples = await sampler.stopAfter(Math.round(warmUp + seconds));
  const backlogStart = samples[Math.round(warmUp)];
  const backlogEnd = samples[Math.round(warmUp + seconds)];
  const accepted = sent - refused;
  await waitUntil(async () => (await receiver.count()) >= accepted, 600_000, `the probe's backlog to drain (${accepted} accepted)`);
  const workerPeakRssMiB = await stopWorkers(`sustained probe at ${round(rate)}/s`, [worker]);
  logRefused(`sustained probe at ${round(rate)}/s`, answers);
  const measured = answers.slice(Math.round(rate * warmUp));
  const allowance = Math.max(rate, 0.02 * measured.length);
  const sustained = backlogEnd <= backlogStart + allowance && refused === 0 && maxLagMs <= SUSTAINED_MAX_PUBLISHER_LAG_MS;
  log(`sustained rate: ${rate.toFixed(0)}/s ${sustained ? 'held' : 'not held'} (backlog ${backlogStart} -> ${backlogEnd}, publisher lag ${maxLagMs.toFixed(0)} ms, ${refused} refused)`);
  return {
    rate,
    sustained,
    backlogStart,
    backlogEnd,
    backlogMax: Math.max(...samples),
    publishP99: percentile(measured.filter((res) => res.status === 201).map((res) => res.ms), 99),
    maxLagMs,
    errors: refused,
    workerPeakRssMiB,
  };
}

/** Calls `measure` at 0, 1, 2, … s from now; `stopAfter(k)` stops once the value at k s is in and resolves with them all. */
function sampleEverySecond(measure) {
  const values = [];
  const t0 = performance.now();
  let stopped = false;
  let wake = () => {};
  const loop = (async () => {
    for (let k = 0; !stopped; k += 1) {
      await new Promise((resolve) => {
        wake = resolve;
        setTimeout(resolve, t0 + k * 1000 - performance.now());
      });
      if (!stopped) values.push(await measure());
    }
  })();
  return {
    stopAfter: async (k) => {
      await waitUntil(async () => values.length > k, (k + 60) * 1000, `the backlog sample at ${k} s`);
      stopped = true;
      wake();
      await loop;
      return values;
    },
  };
}

/**
 * A fresh worker at the default settings (as production starts it) that has delivered `events` already: started,
 * connected, its first code compiled. The receiver's count is reset after them.
 */
async function startWarmWorker(base, tenant, receiver, processEnv, events) {
  const worker = startProcess(WORKER_COMMAND, processEnv);
  await receiver.stats(true);
  await publishCount(base, tenant, events);
  await waitUntil(async () => (await receiver.count()) >= events, 120_000, `the ${events} warm-up events to arrive`);
  await receiver.stats(true);
  return worker;
}

/** Half the sustained rate; when no probe held, half the lowest rate probed (logged: the row then says little). */
function latencyRate(sustained) {
  if (env.BENCH_LATENCY_RATE) return Number(env.BENCH_LATENCY_RATE);
  if (sustained.rate > 0) return sustained.rate / 2;
  log('sustained rate: no probe held; the latency row is taken at half the lowest rate probed');
  return Math.min(...sustained.probes.map((p) => p.rate)) / 2;
}

/** The latency row (measureLatencyAlone) between its limit loops, reported against the lower of their p99s. */
async function measureLatency(base, tenant, receiver, processEnv, rate, reference, limitNow, apiPid, loopBefore) {
  const beside = await besideLimit(limitNow, REFERENCE_CONCURRENCY, () => measureLatencyAlone(base, tenant, receiver, processEnv, rate, apiPid), loopBefore);
  const { latency, figure, used } = beside.result;
  report({
    ...figure,
    limit_p99_ms: round(beside.limit.p99),
    ratio_p99_to_limit_p99: round(latency.p99 / beside.limit.p99, 2),
    limit_before_p99_ms: round(beside.limit.before.p99),
    limit_after_p99_ms: round(beside.limit.after.p99),
    limit_before_per_s: round(beside.limit.before.perSecond),
    limit_after_per_s: round(beside.limit.after.perSecond),
    run_start_limit_p99_ms: round(reference.p99),
    ratio_p99_to_run_start_limit_p99: round(latency.p99 / reference.p99, 2),
  });
  return { ...latency, rate, used, limit: beside.limit };
}

/**
 * Event-to-receipt latency with one worker at the default settings while the API is published to at `rate` events/s,
 * as a long-running worker sees it: the fresh worker first delivers LATENCY_WARM_UP_EVENTS (its connections open, its
 * hot code compiled), and the first LATENCY_WARM_UP_SECONDS of paced publishing are not measured either, as
 * publishFor leaves out its first second.
 */
async function measureLatencyAlone(base, tenant, receiver, processEnv, rate, apiPid) {
  log(`latency: publishing at ${rate.toFixed(0)} events/s for ${LATENCY_WARM_UP_SECONDS} + ${SIZES.latencySeconds} s with one worker at the default settings`);
  const worker = await startWarmWorker(base, tenant, receiver, processEnv, LATENCY_WARM_UP_EVENTS);
  const measuredFrom = Date.now() + LATENCY_WARM_UP_SECONDS * 1000;
  let cpu;
  const windowStart = setTimeout(() => (cpu = cpuWindow([apiPid, worker.pid])), LATENCY_WARM_UP_SECONDS * 1000);
  const { answers, maxLagMs } = await publishPaced(base, tenant, rate, LATENCY_WARM_UP_SECONDS + SIZES.latencySeconds);
  clearTimeout(windowStart);
  const used = cpu?.(rate * SIZES.latencySeconds);
  // Waits for what was accepted: an overloaded API may refuse some (counted and shown, not waited for).
  const refused = logRefused('latency', answers);
  const accepted = answers.length - refused.length;
  await waitUntil(async () => (await receiver.count()) >= accepted, 120_000, `latency events to arrive (${accepted} accepted of ${answers.length})`);
  const withWarmUp = (await receiver.stats()).latencies;
  const latency = (await receiver.stats(true, measuredFrom)).latencies;
  const workerPeakRssMiB = await stopWorkers('latency at half the sustained rate', [worker]);
  const figure = {
    figure: 'event-to-receipt latency at half the sustained rate',
    events_per_s: round(rate),
    p50_ms: latency.p50,
    p99_ms: latency.p99,
    p99_ms_with_warm_up: withWarmUp.p99,
    publish_response_p99_ms: round(percentile(answers.filter((res) => res.status === 201).map((res) => res.ms), 99)),
    publisher_max_lag_ms: round(maxLagMs),
    errors: refused.length,
    worker_peak_rss_mib: round(workerPeakRssMiB),
    api_cpu_ms_per_event: used ? round(used.perEvent[0], 2) : null,
    worker_cpu_ms_per_delivery: used ? round(used.perEvent[1], 2) : null,
    machine_busy: used ? round(used.machineBusy, 2) : null,
  };
  return { latency, figure, used };
}

/** Publish time with 1 and then SIZES.fanout matching subscriptions (8 clients, no worker). */
async function measureFanout(base, tenant) {
  log(`fan-out: 1 and ${SIZES.fanout} matching subscriptions (8 clients, no worker)`);
  const single = await publishFor(base, tenant, 8, SIZES.publishSeconds);
  for (let i = 1; i < SIZES.fanout; i += 1) await tenant.subscribe(`bench fan-out ${i}`);
  const fanned = await publishFor(base, tenant, 8, SIZES.publishSeconds);
  for (const [label, result] of [
    ['1 subscription', single],
    [`${SIZES.fanout} subscriptions`, fanned],
  ]) {
    report({ figure: `fan-out ${label}`, events_per_s: round(result.perSecond), p50_ms: round(result.p50), p99_ms: round(result.p99), errors: result.errors });
  }
  report({ figure: `fan-out cost (${SIZES.fanout} vs 1, p50 publish time)`, ratio: round(fanned.p50 / single.p50, 2) });
  return { single, fanned };
}

/** The highest worker peak RSS of every phase that ran one, and that phase. */
function reportWorkerPeak() {
  const highest = workerPeaks.reduce((a, b) => (b.peakMiB > a.peakMiB ? b : a));
  report({ figure: 'worker peak RSS, every phase', peak_rss_mib: round(highest.peakMiB), phase: highest.phase, phases: workerPeaks.length });
  return highest;
}

// --- the tables -----------------------------------------------------------------------------------------------

function printTable({ limit, publish, drains, sustained, latency, fanout, workerPeak }) {
  const rows = [['figure', 'value', 'limit loop', 'ratio', 'target']];
  for (const [c, l] of Object.entries(limit)) rows.push([`limit loop c=${c}`, `${round(l.perSecond)}/s, p99 ${round(l.p99)} ms`, '', '', '']);
  for (const [clients, p] of Object.entries(publish ?? {})) rows.push(publishRow(clients, p));
  for (const [label, d] of Object.entries(drains)) rows.push(drainRow(parseDrainRun(label), d));
  if (sustained) {
    const probes = sustained.probes.map((p) => `${round(p.rate, 0)}${p.sustained ? '+' : '-'}`).join(' ');
    rows.push(['end-to-end sustained rate', `${round(sustained.rate)}/s (probes: ${probes})`, besideRate(sustained.limit), `${round(sustained.rate / sustained.limit.perSecond, 3)}`, '>= 0.35']);
  }
  if (latency) {
    const cpu = latency.used
      ? `; CPU per event: API ${round(latency.used.perEvent[0], 2)} ms, worker ${round(latency.used.perEvent[1], 2)} ms; machine ${Math.round(latency.used.machineBusy * 100)} % busy`
      : '';
    const l = latency.limit;
    const loop = `p99 ${round(l.p99)} ms (${round(l.before.p99)} / ${round(l.after.p99)})`;
    rows.push(['latency p99 at half the sustained rate', `${round(latency.rate)}/s: p50 ${latency.p50} ms, p99 ${latency.p99} ms${cpu}`, loop, `${round(latency.p99 / l.p99, 2)}`, '<= 1.5']);
  }
  if (fanout) {
    const { single, fanned } = fanout;
    rows.push([`fan-out 1 / ${SIZES.fanout} subs (8 clients)`, `${round(single.perSecond)}/s p50 ${round(single.p50)} ms / ${round(fanned.perSecond)}/s p50 ${round(fanned.p50)} ms`, '', `${round(fanned.p50 / single.p50, 2)}`, '<= 3']);
  }
  rows.push(['worker peak RSS, every phase', `${round(workerPeak.peakMiB)} MiB (${workerPeak.phase})`, '', '', '<= 200 MiB']);
  printRows(rows);
  process.stdout.write(`\nmachine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${round(os.totalmem() / 1024 ** 3, 0)} GiB, node ${process.version}\n`);
}

/** The loop beside a figure: the mean, then the loops before and after it. */
const besideRate = (limit) => `${round(limit.perSecond)}/s (${round(limit.before.perSecond)} / ${round(limit.after.perSecond)})`;

function publishRow(clients, p) {
  const value = `${round(p.perSecond)}/s, p50 ${round(p.p50)} ms, p99 ${round(p.p99)} ms, API RSS ${round(p.apiRssMiB)} MiB (peak ${round(p.apiPeakRssMiB)})`;
  const target = clients === '32' ? '>= 0.6, p99 <= 100 ms, API RSS <= 200 MiB' : '';
  return [`publish ${clients} client(s)`, value, besideRate(p.limit), `${round(p.perSecond / p.limit.perSecond, 3)}`, target];
}

function drainRow(run, d) {
  const l = d.limit.perSecond;
  const oneWorker = oneWorkerLabel(run);
  const versusOne = run.workers > 1 ? `; ${run.label} / ${oneWorker} = ${d.ratioToOneWorker === null ? `n/a (no ${oneWorker} run before it)` : round(d.ratioToOneWorker, 2)}` : '';
  const cpu = d.cpuMsPerDelivery === null ? '' : `, CPU ${round(d.cpuMsPerDelivery, 2)} ms each`;
  const warm = d.perSecondAfterQuarter === null ? '' : ` (${round(d.perSecondAfterQuarter)}/s after the first quarter)`;
  const value = `${round(d.perSecond)}/s${warm}, peak RSS ${round(d.peakRssMiB)} MiB (+${round(d.rssGrowthMiB)})${cpu}${versusOne}`;
  return [`drain ${run.label}`, value, besideRate(d.limit), `${round(d.perSecond / l, 3)}`, drainTarget(run)];
}

/** Issue 36's targets: the default concurrency, c=16, and two workers against one at the same concurrency. */
function drainTarget(run) {
  if (run.workers > 1) return `${run.label} / ${oneWorkerLabel(run)} >= 0.9`;
  if (!run.extraCa) return '';
  if (run.concurrency === DEFAULT_CONCURRENCY) return '>= 0.8, RSS <= 200 MiB';
  if (run.concurrency === 16) return '>= 0.65';
  return '';
}

function printRows(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const line = (r) => `| ${r.map((cell, i) => String(cell).padEnd(widths[i])).join(' | ')} |`;
  process.stdout.write(`\n${line(rows[0])}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n${rows.slice(1).map(line).join('\n')}\n`);
}

// --- isolation: one organization's bad receiver against another's healthy one ----------------------------------

/**
 * One scenario: a worker with the default settings (as `npm start` runs it), Quiet publishing `quietRate`/s and
 * Noisy `noisyRate`/s for ISOLATION_SECONDS; Quiet's event-to-receipt p50/p99 once all of Quiet's deliveries arrived.
 */
async function isolationScenario(base, processEnv, receiver, quiet, noisy, { label, noisyRate, quietRate = 20 }) {
  log(`isolation: ${label}`);
  // With BENCH_TRACE_DIR, each row's receipts go to a file of their own (the receiver writes them at a reset).
  if (env.BENCH_TRACE_DIR) await receiver.stats(true);
  const worker = startProcess(WORKER_COMMAND, processEnv);
  // Measured once the worker is warm: its first deliveries (connections, compiled code) are not. The warm-up goes at
  // Quiet's own rate: published all at once (100 in a fraction of a second), it made Quiet itself a burst by the fair
  // share's measure, and its first measured deliveries went with a priority as low as Noisy's.
  const warm = (await receiver.statsOf(quiet.path)).count + ISOLATION_WARM_UP_EVENTS;
  await publishPaced(base, quiet, quietRate, ISOLATION_WARM_UP_EVENTS / quietRate);
  await waitUntil(async () => (await receiver.statsOf(quiet.path)).count >= warm, 120_000, 'the warm-up deliveries');
  const since = Date.now();
  const before = (await receiver.statsOf(quiet.path)).count;
  const [{ answers: quietAnswers }] = await Promise.all([
    publishPaced(base, quiet, quietRate, ISOLATION_SECONDS),
    noisyRate > 0 ? publishPaced(base, noisy, noisyRate, ISOLATION_SECONDS) : null,
  ]);
  const published = Date.now();
  const expected = before + quietAnswers.filter((a) => a.status === 201).length;
  await waitUntil(async () => (await receiver.statsOf(quiet.path)).count >= expected, 600_000, `Quiet's ${label} deliveries`);
  const stats = await receiver.statsOf(quiet.path, since);
  const workerPeakRssMiB = await stopWorkers(`isolation: ${label}`, [worker]);
  const result = { label, p50: stats.latencies.p50, p99: stats.latencies.p99, allArrivedAfterMs: stats.lastAt - published, n: stats.latencies.n, workerPeakRssMiB };
  report({
    figure: `isolation ${label}`,
    quiet_p50_ms: result.p50,
    quiet_p99_ms: result.p99,
    all_quiet_arrived_after_last_publish_ms: result.allArrivedAfterMs,
    worker_peak_rss_mib: round(workerPeakRssMiB),
  });
  return result;
}

/**
 * The fan-out run publishes with no worker running and leaves its deliveries (25 per event, some 60,000) queued. They
 * are dropped (jobs removed, rows marked failed) before the isolation rows, which measure Quiet beside what each row
 * sets up: left queued, they were drained by the isolation rows' workers, and a full run's baseline read p50 30-45 ms
 * against 5-6 ms in an isolation-only run (the attempts themselves took 6 ms against 1 ms on the busy machine).
 */
async function discardBacklog(db, processEnv) {
  const queue = benchDeliveryQueue(processEnv);
  await queue.drain(true);
  await queue.closeAll();
  const { rowCount } = await db.query(
    `UPDATE webhook_deliveries SET status = 'failed', failure_reason = 'bench: left by the fan-out run, discarded', completed_at = now() AT TIME ZONE 'UTC'
      WHERE status = 'pending'`,
  );
  report({ figure: 'isolation: fan-out backlog discarded first', deliveries: rowCount });
}

async function measureIsolation(base, processEnv, receiver) {
  // The receiver's statistics filter every receipt it holds, in its own event loop: the drains' receipts (well over
  // 100,000 after a full run) go first.
  await receiver.stats(true);
  const quiet = { ...(await setUpTenant(base, processEnv, receiver.port, 'Quiet', '/quiet')), path: '/quiet' };
  const noisy = await setUpTenant(base, processEnv, receiver.port, 'Noisy', '/busy');
  // The endless body is a tenant of its own: on Noisy it would go beside Noisy's five tarpits, and add to the backlog
  // the recovery row drains.
  const endless = await setUpTenant(base, processEnv, receiver.port, 'Endless', '/endless');
  const rows = {};
  const scenario = (options, bad = noisy) => isolationScenario(base, processEnv, receiver, quiet, bad, options);
  rows.baseline = await scenario({ label: 'Quiet alone (20/s)', noisyRate: 0 });
  rows.failFast = await scenario({ label: "Noisy's receiver answers 503 at once (both 20/s)", noisyRate: 20 });
  await call(base, 'DELETE', `/api/v1/webhooks/subscriptions/${(await noisy.subscriptions())[0]}`, { token: noisy.token });
  await noisy.subscribe('tarpit 1', '/hang');
  rows.hung = await scenario({ label: "Noisy's receiver never answers (both 20/s)", noisyRate: 20 });
  for (let i = 2; i <= 5; i += 1) await noisy.subscribe(`tarpit ${i}`, '/hang');
  rows.hung5 = await scenario({ label: 'never answers, 5 subscriptions, Noisy at 100/s', noisyRate: 100 });
  rows.recovery = await measureRecovery(base, processEnv, receiver, noisy);
  // After the recovery, not before it: meanwhile the tarpit's backlog would be retried against the tarpit again, with
  // more attempts and longer back-offs than the recovery row has always measured.
  rows.endless = await scenario({ label: "Noisy's receiver sends an endless body (both 20/s)", noisyRate: 20 }, endless);
  rows.fairness = await measureFairness(base, processEnv, receiver, quiet);
  if (env.BENCH_TRACE_DIR) await receiver.stats(true);
  return rows;
}

/** The tarpit answers again: every delivery it held arrives, none with more than 8 attempts. */
async function measureRecovery(base, processEnv, receiver, noisy) {
  log('isolation: the tarpit recovers');
  await receiver.heal();
  const db = new Pool({ connectionString: processEnv.DATABASE_URL, max: 1 });
  const worker = startProcess(WORKER_COMMAND, processEnv);
  const healedAt = Date.now();
  const tally = async () =>
    (
      await db.query(
        `SELECT count(*) FILTER (WHERE d.status = 'pending')::int AS pending, count(*) FILTER (WHERE d.status = 'failed')::int AS failed,
                count(*)::int AS total, COALESCE(max(d.attempt_count), 0)::int AS max_attempts
           FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id WHERE s.url LIKE '%/hang'`,
      )
    ).rows[0];
  await waitUntil(async () => (await tally()).pending === 0, 900_000, 'the tarpit backlog to drain');
  const result = { ...(await tally()), seconds: (Date.now() - healedAt) / 1000 };
  result.workerPeakRssMiB = await stopWorkers('isolation: tarpit recovers', [worker]);
  await db.end();
  report({
    figure: 'isolation: tarpit recovered',
    deliveries: result.total,
    lost_or_failed: result.failed,
    max_attempts: result.max_attempts,
    drained_in_s: round(result.seconds),
    worker_peak_rss_mib: round(result.workerPeakRssMiB),
  });
  return result;
}

/** Organization A has ISOLATION_BACKLOG deliveries queued; Quiet (B) publishes 10/s meanwhile. */
async function measureFairness(base, processEnv, receiver, quiet) {
  log(`isolation: backlog fairness (${ISOLATION_BACKLOG} queued for A, B at 10/s)`);
  const backlog = await setUpTenant(base, processEnv, receiver.port, 'Backlog', '/backlog');
  await publishCount(base, backlog, ISOLATION_BACKLOG);
  const result = await isolationScenario(base, processEnv, receiver, quiet, backlog, { label: `B at 10/s beside A's backlog of ${ISOLATION_BACKLOG}`, noisyRate: 0, quietRate: 10 });
  const backlogDone = await receiver.statsOf('/backlog');
  report({ figure: 'isolation: backlog delivered during the fairness run', deliveries: backlogDone.count });
  return result;
}

function printIsolationTable(rows) {
  const base = rows.baseline.p99;
  const rss = (r) => `${round(r.workerPeakRssMiB)} MiB`;
  const line = (r, target) => [r.label, `p50 ${r.p50} ms, p99 ${r.p99} ms; all arrived ${round(r.allArrivedAfterMs / 1000, 1)} s after the last publish`, `${round(r.p99 / base, 2)}`, rss(r), target];
  printRows([
    ['isolation (one worker, defaults)', "Quiet's event-to-receipt", 'p99 / baseline', 'worker peak RSS', 'target'],
    line(rows.baseline, ''),
    line(rows.failFast, '<= 3'),
    line(rows.hung, '<= 3 and <= 1 s'),
    line(rows.hung5, '<= 3 and <= 1 s'),
    line(rows.endless, '<= 3'),
    [
      'tarpit recovers',
      `${rows.recovery.total} deliveries, ${rows.recovery.failed} failed, ${rows.recovery.pending} pending, max ${rows.recovery.max_attempts} attempts, drained in ${round(rows.recovery.seconds)} s`,
      '',
      rss(rows.recovery),
      '0 lost, <= 8 attempts',
    ],
    [rows.fairness.label, `p50 ${rows.fairness.p50} ms, p99 ${rows.fairness.p99} ms`, '', rss(rows.fairness), 'p99 <= 2 s'],
  ]);
}

// bench/retention.js reuses the set-up, the processes and the drain measurement.
module.exports = { RUN_ID, REDIS_URL, Redis, workerRequire, log, report, round, sleep, failed, createDatabase, dropDatabase, deleteRedisPrefix, makeTls, startReceiver, serviceEnv, startProcess, stopProcess, API_COMMAND, WORKER_COMMAND, call, expectStatus, waitForHealthy, setUpTenant, publishCount, drain, waitUntil };
if (require.main !== module) return;

main().catch(failed);
