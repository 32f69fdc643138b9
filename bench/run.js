#!/usr/bin/env node
// `npm run bench`: publishing and delivery throughput of the real API and worker processes, each figure beside a
// limit loop run in the same process tree (sign + POST with got over keep-alive + one INSERT per delivery, no
// queue, same receiver, same concurrency), so that the ratios survive a noisy machine.
//
// It sets up everything itself: a database and a Redis prefix of its own (dropped at the end), an HTTPS receiver
// on loopback with a certificate it makes, an owner, an API key, a running assessment and subscriptions. The API
// and the worker are the built apps (`npm start` builds them the same way), run with NODE_ENV=production.
//
// Output: one JSON line per figure on stdout, then a table. Sizes (environment):
//   BENCH_PUBLISH_SECONDS (8)   measured seconds per publish level (1, 8, 32 clients) and per fan-out level
//   BENCH_DRAIN_EVENTS (5000)   backlog size per drain run
//   BENCH_DRAIN_RUNS            which drain runs, e.g. "1x16,1x100,2x16,2x100,1x16-noextraca" (the default)
//   BENCH_LATENCY_SECONDS (10)  seconds of paced publishing measured for each event-to-receipt latency (at 1/2 and 1/4 of
//                               the drain rate), after a warm-up (1,000 events delivered, then 2 s of paced publishing)
//   BENCH_LIMIT_DELIVERIES (3000) deliveries per limit-loop run
//   BENCH_FANOUT (25)           subscriptions each event matches in the fan-out run
//   BENCH_SKIP_BUILD=1          use the existing build
//   BENCH_ONLY=drain            only the limit loop and the drain runs (no publish, latency or fan-out figures)
//   TEST_DATABASE_ADMIN_URL / REDIS_URL  the servers to use (defaults: local PostgreSQL and Redis)
'use strict';
const { execFileSync, fork, spawn } = require('node:child_process');
const { createRequire } = require('node:module');
const { mkdtempSync, writeFileSync, readFileSync } = require('node:fs');
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
const SIZES = {
  publishSeconds: num('BENCH_PUBLISH_SECONDS', 8),
  drainEvents: num('BENCH_DRAIN_EVENTS', 5000),
  drainRuns: (env.BENCH_DRAIN_RUNS || '1x16,1x16-noextraca,1x100,2x16,2x100').split(',').map(parseDrainRun),
  latencySeconds: num('BENCH_LATENCY_SECONDS', 10),
  limitDeliveries: num('BENCH_LIMIT_DELIVERIES', 3000),
  fanout: num('BENCH_FANOUT', 25),
};
const ONLY = env.BENCH_ONLY || '';
if (!['', 'drain', 'isolation'].includes(ONLY)) throw new Error(`BENCH_ONLY: cannot read "${ONLY}" (expected drain or isolation, or unset for everything)`);
const DRAIN_ONLY = ONLY === 'drain';
const ISOLATION_ONLY = ONLY === 'isolation';
const WARM_UP_EVENTS = 1000;
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

async function createDatabase() {
  const admin = new Pool({ connectionString: ADMIN_URL, max: 1 });
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
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-ca-'));
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
  const heal = () => ask({ cmd: 'heal' });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ port: m.port, stats, statsOf, heal, close: () => child.kill() }));
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
    MAIL_OUTBOX_DIR: mkdtempSync(path.join(os.tmpdir(), 'bench-mail-')),
    LOG_LEVEL: env.BENCH_LOG_LEVEL || 'info',
  };
}

// Every child still running when the bench exits (a failure, Ctrl-C) is killed, so that none goes on loading the machine.
const children = new Set();
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));

const NODE_OPTIONS = env.BENCH_NODE_OPTIONS ? env.BENCH_NODE_OPTIONS.split(' ') : [];
const API_COMMAND = [process.execPath, ...NODE_OPTIONS, path.join(ROOT, 'apps/api/dist/main.js')];
// The worker is started as in production: through its launcher, which adds the V8 options it is sized for.
const WORKER_COMMAND = ['sh', path.join(ROOT, 'apps/worker/run.sh'), ...NODE_OPTIONS];

/** A built app as a child process; its logs are discarded (they would only slow the terminal). */
function startProcess([command, ...args], processEnv) {
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

const CLOCK_TICKS_PER_S = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/** CPU time (user + system) a live process has used so far, from /proc (Linux). */
function cpuMsOf(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S; // utime, stime (fields 14, 15)
}

const sum = (values) => values.reduce((a, b) => a + b, 0);

// --- the API, as a client ----------------------------------------------------------------------------------

const agent = new (require('node:http').Agent)({ keepAlive: true, maxSockets: 256 });

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
  const subscribe = (subscriptionName, pathName = hookPath) =>
    expectStatus(
      call(base, 'POST', '/api/v1/webhooks/subscriptions', {
        token,
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

/** Starts `workers` worker processes, waits until every pending delivery succeeded, and measures it. */
async function drain(db, receiver, workerEnv, run) {
  const pending = await countDeliveries(db, 'pending');
  const succeededBefore = await countDeliveries(db, 'succeeded');
  await receiver.stats(true);
  const processes = Array.from({ length: run.workers }, () =>
    startProcess(WORKER_COMMAND, {
      ...workerEnv,
      WORKER_CONCURRENCY: String(run.concurrency),
      ...(run.extraCa ? {} : { WEBHOOK_EXTRA_CA_FILE: '', NODE_EXTRA_CA_CERTS: workerEnv.WEBHOOK_EXTRA_CA_FILE }),
    }),
  );
  let rssAtQuarter = null;
  let atQuarter = null; // deliveries done and the workers' CPU time then: CPU per delivery without the start-up
  await waitUntil(
    async () => {
      const done = (await countDeliveries(db, 'succeeded')) - succeededBefore;
      if (rssAtQuarter === null && done >= pending / 4) {
        rssAtQuarter = processes.map((p) => memoryOf(p.pid).current);
        atQuarter = { done, cpuMs: sum(processes.map((p) => cpuMsOf(p.pid))) };
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
  await Promise.all(processes.map(stopProcess));
  const seconds = (finishedAt - stats.firstAt) / 1000;
  return {
    deliveries: pending,
    perSecond: pending / seconds,
    peakRssMiB: Math.max(...memory.map((m) => m.peak)) / MiB,
    rssGrowthMiB: rssAtQuarter ? Math.max(...memory.map((m, i) => m.current - rssAtQuarter[i])) / MiB : null,
    cpuMsPerDelivery: atQuarter && pending > atQuarter.done ? (cpuMs - atQuarter.cpuMs) / (pending - atQuarter.done) : null,
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
  try {
    await waitForHealthy(base);
    const tenant = await setUpTenant(base, processEnv, receiver.port);
    log(`set up in ${((Date.now() - began) / 1000).toFixed(0)} s; database ${RUN_ID}`);

    if (ISOLATION_ONLY) {
      printIsolationTable(await measureIsolation(base, processEnv, receiver));
      log(`finished in ${((Date.now() - began) / 1000).toFixed(0)} s`);
      return;
    }
    log('limit loop');
    // Warmed up first, as every measured run of the service is (its code compiled, its connections open): a cold
    // limit loop at c=16 measured about 1,370/s beside 1,800-2,000/s warm, which flattered every ratio.
    await limitLoop(dbUrl, receiver.port, tls, 16, LIMIT_WARM_UP_DELIVERIES);
    const limit = {};
    for (const concurrency of [...new Set(SIZES.drainRuns.map((r) => r.concurrency))]) {
      limit[concurrency] = await limitLoop(dbUrl, receiver.port, tls, concurrency, SIZES.limitDeliveries);
      report({ figure: `limit loop c=${concurrency}`, deliveries_per_s: round(limit[concurrency].perSecond), p50_ms: round(limit[concurrency].p50), p99_ms: round(limit[concurrency].p99) });
    }
    await receiver.stats(true);
    const limitRate = limit[16]?.perSecond ?? Object.values(limit)[0].perSecond;
    const limitP99 = limit[16]?.p99 ?? Object.values(limit)[0].p99;

    const publish = {};
    for (const clients of DRAIN_ONLY ? [] : [1, 8, 32]) {
      if (clients === 1) log('publish (no worker running)');
      publish[clients] = await publishFor(base, tenant, clients, SIZES.publishSeconds);
      report({
        figure: `publish ${clients} client${clients > 1 ? 's' : ''}`,
        events_per_s: round(publish[clients].perSecond),
        p50_ms: round(publish[clients].p50),
        p99_ms: round(publish[clients].p99),
        errors: publish[clients].errors,
        ratio_to_limit: round(publish[clients].perSecond / limitRate, 3),
      });
    }

    // With BENCH_ONLY=drain nothing was published yet: a small backlog of its own warms up the same way.
    if (DRAIN_ONLY) await publishCount(base, tenant, WARM_UP_EVENTS);
    log('draining what publishing left (warm-up, not measured)');
    await drain(db, receiver, processEnv, { workers: 1, concurrency: 16, extraCa: true });

    const drains = {};
    for (const run of SIZES.drainRuns) {
      log(`drain ${run.label}: publishing a backlog of ${SIZES.drainEvents}`);
      await publishCount(base, tenant, SIZES.drainEvents);
      const result = await drain(db, receiver, processEnv, run);
      drains[run.label] = result;
      report({
        figure: `drain ${run.workers} worker${run.workers > 1 ? 's' : ''} c=${run.concurrency}${run.extraCa ? '' : ' (CA via NODE_EXTRA_CA_CERTS, no WEBHOOK_EXTRA_CA_FILE)'}`,
        deliveries_per_s: round(result.perSecond),
        peak_rss_mib: round(result.peakRssMiB),
        rss_growth_after_first_quarter_mib: round(result.rssGrowthMiB),
        worker_cpu_ms_per_delivery: round(result.cpuMsPerDelivery, 3),
        ratio_to_limit: round(result.perSecond / (limit[run.concurrency]?.perSecond ?? limitRate), 3),
      });
    }

    if (DRAIN_ONLY) {
      printTable(limit, publish, drains);
      log(`finished in ${((Date.now() - began) / 1000).toFixed(0)} s`);
      return;
    }
    const drainRate = (drains['1x16'] ?? Object.values(drains)[0]).perSecond;
    const latency = await measureLatency(base, tenant, receiver, processEnv, drainRate / 2, limitP99, 'half');
    // A second, lighter point shows how much of the first is the machine being full rather than the pipeline.
    const lightLatency = await measureLatency(base, tenant, receiver, processEnv, drainRate / 4, limitP99, 'a quarter of');

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

    printTable(limit, publish, drains, latency, lightLatency, limitP99, single, fanned);
    await discardBacklog(db, processEnv);
    printIsolationTable(await measureIsolation(base, processEnv, receiver));
    log(`finished in ${((Date.now() - began) / 1000).toFixed(0)} s`);
  } finally {
    await cleanup();
    agent.destroy();
  }
}

/**
 * Event-to-receipt latency with one worker at c=16 while the API is published to at `rate` events/s, as a
 * long-running worker sees it: the fresh worker first delivers LATENCY_WARM_UP_EVENTS (its connections open, its
 * hot code compiled), and the first LATENCY_WARM_UP_SECONDS of paced publishing are not measured either, as
 * publishFor leaves out its first second.
 */
async function measureLatency(base, tenant, receiver, processEnv, rate, limitP99, share) {
  log(`latency: publishing at ${rate.toFixed(0)} events/s for ${LATENCY_WARM_UP_SECONDS} + ${SIZES.latencySeconds} s with one worker at c=16`);
  const worker = startProcess(WORKER_COMMAND, { ...processEnv, WORKER_CONCURRENCY: '16' });
  await receiver.stats(true);
  await publishCount(base, tenant, LATENCY_WARM_UP_EVENTS);
  await waitUntil(async () => (await receiver.stats()).count >= LATENCY_WARM_UP_EVENTS, 120_000, 'the latency warm-up events to arrive');
  await receiver.stats(true);
  const inFlight = [];
  const total = Math.round(rate * (LATENCY_WARM_UP_SECONDS + SIZES.latencySeconds));
  const t0 = performance.now();
  const measuredFrom = Date.now() + LATENCY_WARM_UP_SECONDS * 1000;
  let maxLag = 0; // how late the publisher sent an event (a stall of the bench itself would show here)
  for (let i = 0; i < total; i += 1) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    maxLag = Math.max(maxLag, performance.now() - due);
    inFlight.push(publishOne(base, tenant));
  }
  // Wait for what was accepted: an overloaded API may refuse some (counted and shown, not waited for).
  const answers = await Promise.all(inFlight);
  const refused = answers.filter((res) => res.status !== 201);
  for (const res of refused.slice(0, 3)) log(`latency publish answered ${res.status}: ${JSON.stringify(res.body)}`);
  const accepted = total - refused.length;
  await waitUntil(async () => (await receiver.stats()).count >= accepted, 120_000, `latency events to arrive (${accepted} accepted of ${total})`);
  const withWarmUp = (await receiver.stats()).latencies;
  const latency = (await receiver.stats(true, measuredFrom)).latencies;
  await stopProcess(worker);
  report({
    figure: `event-to-receipt latency at ${share} the drain rate`,
    events_per_s: round(rate),
    p50_ms: latency.p50,
    p99_ms: latency.p99,
    limit_p99_ms: round(limitP99),
    ratio_p99_to_limit_p99: round(latency.p99 / limitP99, 2),
    p99_ms_with_warm_up: withWarmUp.p99,
    publish_response_p99_ms: round(percentile(answers.map((res) => res.ms), 99)),
    publisher_max_lag_ms: round(maxLag),
    errors: refused.length,
  });
  return { ...latency, rate };
}

function printTable(limit, publish, drains, latency, lightLatency, limitP99, single, fanned) {
  const limitRate = (limit[16] ?? Object.values(limit)[0]).perSecond;
  const rows = [['figure', 'value', 'limit loop', 'ratio', 'target']];
  for (const [c, l] of Object.entries(limit)) rows.push([`limit loop c=${c}`, `${round(l.perSecond)}/s, p99 ${round(l.p99)} ms`, '', '', '']);
  for (const [clients, p] of Object.entries(publish)) {
    rows.push([`publish ${clients} client(s)`, `${round(p.perSecond)}/s, p50 ${round(p.p50)} ms, p99 ${round(p.p99)} ms`, `${round(limitRate)}/s`, `${round(p.perSecond / limitRate, 3)}`, clients === '32' ? '>= 400/s, p99 <= 250 ms' : '']);
  }
  for (const [label, d] of Object.entries(drains)) {
    const run = parseDrainRun(label);
    const l = (limit[run.concurrency] ?? limit[16]).perSecond;
    rows.push([`drain ${label}`, `${round(d.perSecond)}/s, peak RSS ${round(d.peakRssMiB)} MiB (+${round(d.rssGrowthMiB)})${d.cpuMsPerDelivery === null ? '' : `, CPU ${round(d.cpuMsPerDelivery, 2)} ms each`}`, `${round(l)}/s`, `${round(d.perSecond / l, 3)}`, run.concurrency === 16 && run.workers === 1 ? '>= 0.5' : run.concurrency === 100 ? 'RSS <= 200 MiB' : '']);
  }
  if (latency) rows.push(...otherRows(latency, lightLatency, limitP99, single, fanned));
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const line = (r) => `| ${r.map((cell, i) => String(cell).padEnd(widths[i])).join(' | ')} |`;
  process.stdout.write(`\n${line(rows[0])}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n${rows.slice(1).map(line).join('\n')}\n`);
  process.stdout.write(`\nmachine: ${os.cpus().length} x ${os.cpus()[0]?.model ?? 'cpu'}, ${round(os.totalmem() / 1024 ** 3, 0)} GiB, node ${process.version}\n`);
}

/** The latency and fan-out rows of the table. */
function otherRows(latency, lightLatency, limitP99, single, fanned) {
  const rows = [];
  rows.push(['latency p99 at half drain rate', `${round(latency.rate)}/s: p50 ${latency.p50} ms, p99 ${latency.p99} ms`, `p99 ${round(limitP99)} ms`, `${round(latency.p99 / limitP99, 2)}`, '<= 3']);
  rows.push(['latency p99 at 1/4 drain rate', `${round(lightLatency.rate)}/s: p50 ${lightLatency.p50} ms, p99 ${lightLatency.p99} ms`, `p99 ${round(limitP99)} ms`, `${round(lightLatency.p99 / limitP99, 2)}`, '']);
  rows.push([`fan-out 1 / ${SIZES.fanout} subs (8 clients)`, `${round(single.perSecond)}/s p50 ${round(single.p50)} ms / ${round(fanned.perSecond)}/s p50 ${round(fanned.p50)} ms`, '', `${round(fanned.p50 / single.p50, 2)}`, '<= 3']);
  return rows;
}

// --- isolation: one organization's bad receiver against another's healthy one ----------------------------------

/** Publishes `rate` events/s for `seconds` to a tenant, paced; resolves with the answers. */
async function publishPaced(base, tenant, rate, seconds) {
  const answers = [];
  const total = Math.round(rate * seconds);
  const t0 = performance.now();
  for (let i = 0; i < total; i += 1) {
    const wait = t0 + (i * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    // A connection reset (the API closing an idle keep-alive socket as a request goes out on it) is a failed publish,
    // not an unhandled rejection that ends the bench: the rows count only the 201s.
    answers.push(publishOne(base, tenant).catch((err) => ({ status: 0, body: null, error: err.message })));
  }
  return Promise.all(answers);
}

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
  const [quietAnswers] = await Promise.all([
    publishPaced(base, quiet, quietRate, ISOLATION_SECONDS),
    noisyRate > 0 ? publishPaced(base, noisy, noisyRate, ISOLATION_SECONDS) : Promise.resolve([]),
  ]);
  const published = Date.now();
  const expected = before + quietAnswers.filter((a) => a.status === 201).length;
  await waitUntil(async () => (await receiver.statsOf(quiet.path)).count >= expected, 600_000, `Quiet's ${label} deliveries`);
  const stats = await receiver.statsOf(quiet.path, since);
  await stopProcess(worker);
  const result = { label, p50: stats.latencies.p50, p99: stats.latencies.p99, allArrivedAfterMs: stats.lastAt - published, n: stats.latencies.n };
  report({ figure: `isolation ${label}`, quiet_p50_ms: result.p50, quiet_p99_ms: result.p99, all_quiet_arrived_after_last_publish_ms: result.allArrivedAfterMs });
  return result;
}

/**
 * The fan-out run publishes with no worker running and leaves its deliveries (25 per event, some 60,000) queued. They
 * are dropped (jobs removed, rows marked failed) before the isolation rows, which measure Quiet beside what each row
 * sets up: left queued, they were drained by the isolation rows' workers, and a full run's baseline read p50 30-45 ms
 * against 5-6 ms in an isolation-only run (the attempts themselves took 6 ms against 1 ms on the busy machine).
 */
async function discardBacklog(db, processEnv) {
  const { Queue } = workerRequire('bullmq');
  const { bullPrefix, DELIVERY_QUEUE } = require(path.join(ROOT, 'packages/queue/dist/index.js'));
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(DELIVERY_QUEUE, { connection, prefix: bullPrefix({ redisPrefix: processEnv.REDIS_PREFIX, redis: { mode: 'single' } }) });
  await queue.drain(true);
  await queue.close();
  connection.disconnect();
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
  const rows = {};
  const scenario = (options) => isolationScenario(base, processEnv, receiver, quiet, noisy, options);
  rows.baseline = await scenario({ label: 'Quiet alone (20/s)', noisyRate: 0 });
  rows.failFast = await scenario({ label: "Noisy's receiver answers 503 at once (both 20/s)", noisyRate: 20 });
  await call(base, 'DELETE', `/api/v1/webhooks/subscriptions/${(await noisy.subscriptions())[0]}`, { token: noisy.token });
  await noisy.subscribe('tarpit 1', '/hang');
  rows.hung = await scenario({ label: "Noisy's receiver never answers (both 20/s)", noisyRate: 20 });
  for (let i = 2; i <= 5; i += 1) await noisy.subscribe(`tarpit ${i}`, '/hang');
  rows.hung5 = await scenario({ label: 'never answers, 5 subscriptions, Noisy at 100/s', noisyRate: 100 });
  rows.recovery = await measureRecovery(base, processEnv, receiver, noisy);
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
  await stopProcess(worker);
  await db.end();
  report({ figure: 'isolation: tarpit recovered', deliveries: result.total, lost_or_failed: result.failed, max_attempts: result.max_attempts, drained_in_s: round(result.seconds) });
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
  const line = (r, target) => [r.label, `p50 ${r.p50} ms, p99 ${r.p99} ms; all arrived ${round(r.allArrivedAfterMs / 1000, 1)} s after the last publish`, `${round(r.p99 / base, 2)}`, target];
  const table = [
    ['isolation (one worker, defaults)', "Quiet's event-to-receipt", 'p99 / baseline', 'target'],
    line(rows.baseline, ''),
    line(rows.failFast, '<= 3'),
    line(rows.hung, '<= 3 and <= 1 s'),
    line(rows.hung5, '<= 3 and <= 1 s'),
    [
      'tarpit recovers',
      `${rows.recovery.total} deliveries, ${rows.recovery.failed} failed, ${rows.recovery.pending} pending, max ${rows.recovery.max_attempts} attempts, drained in ${round(rows.recovery.seconds)} s`,
      '',
      '0 lost, <= 8 attempts',
    ],
    [rows.fairness.label, `p50 ${rows.fairness.p50} ms, p99 ${rows.fairness.p99} ms`, '', 'p99 <= 2 s'],
  ];
  const widths = table[0].map((_, i) => Math.max(...table.map((r) => String(r[i]).length)));
  const fmt = (r) => `| ${r.map((cell, i) => String(cell).padEnd(widths[i])).join(' | ')} |`;
  process.stdout.write(`\n${fmt(table[0])}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n${table.slice(1).map(fmt).join('\n')}\n`);
}

// bench/retention.js reuses the set-up, the processes and the drain measurement.
module.exports = { RUN_ID, REDIS_URL, Redis, workerRequire, log, report, round, sleep, createDatabase, dropDatabase, deleteRedisPrefix, makeTls, startReceiver, serviceEnv, startProcess, stopProcess, API_COMMAND, WORKER_COMMAND, call, expectStatus, waitForHealthy, setUpTenant, publishCount, drain, waitUntil };
if (require.main !== module) return;

main().catch((err) => {
  process.stderr.write(`[bench] failed: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
