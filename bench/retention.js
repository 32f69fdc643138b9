#!/usr/bin/env node
// `npm run bench:retention`: the retention purge at volume (issue 21). It loads a database of its own with N expired
// and N retained deliveries, each with its event and one attempt (generate_series, not the API), then measures:
//   - the purge of the expired half (apps/worker's purgeExpired, run after run with the production time budget until
//     a run completes): total time and rows per second;
//   - the drain (a real worker process delivering BENCH_RETENTION_DRAIN_EVENTS published events to the HTTPS
//     receiver, bench/run.js's drain) and the outbox relay's lag (a delivery committed without its job, as if the
//     process had died between commit and enqueue, to a subscription of its own with no backlog: time until it was
//     enqueued and until it succeeded) and the relay's runs (from each tick to its run's end, read off the relay
//     queue's event stream) with and without a purge running;
//   - the time DELETE /organization takes for an organization holding 100,000 deliveries;
//   - the database size after each of three cycles of loading N expired deliveries and purging them.
// Sizes (environment): BENCH_RETENTION_N (1000000), BENCH_RETENTION_DRAIN_EVENTS (10000),
// BENCH_RETENTION_ORG_DELIVERIES (100000), BENCH_RETENTION_CYCLES (3), BENCH_RETENTION_PAUSE_RATIO (the worker's, 2), BENCH_SKIP_BUILD=1.
// The set-up, the processes and the drain measurement are bench/run.js's (required, not copied).
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const crypto = require('node:crypto');
const { Pool } = require('pg');
const bench = require('./run.js');

const ROOT = path.resolve(__dirname, '..');
const env = process.env;
const num = (name, fallback) => (env[name] ? Number(env[name]) : fallback);
const N = num('BENCH_RETENTION_N', 1_000_000);
const DRAIN_EVENTS = num('BENCH_RETENTION_DRAIN_EVENTS', 10_000);
const ORG_DELIVERIES = num('BENCH_RETENTION_ORG_DELIVERIES', 100_000);
const CYCLES = num('BENCH_RETENTION_CYCLES', 3);
const RELAY_INTERVAL_MS = 2000;
const RELAY_AGE_MS = 5000;
const DAY_MS = 24 * 3600 * 1000;
const { log, report, round, sleep } = bench;

// The built worker's purge and Prisma client: what the scheduled job runs, with its budget and batch size. Loaded
// once main() has built them (a fresh clone has no dist yet).
let purgeExpired, RETENTION_PURGE_BUDGET_MS, RETENTION_PURGE_BATCH, RETENTION_PURGE_PAUSE_RATIO, createPrismaClient, poolOf, bullPrefix, DELIVERY_QUEUE, RELAY_QUEUE;
function loadBuiltModules() {
  ({ purgeExpired } = require(path.join(ROOT, 'apps/worker/dist/retention.js')));
  ({ RETENTION_PURGE_BUDGET_MS, RETENTION_PURGE_BATCH, RETENTION_PURGE_PAUSE_RATIO } = require(path.join(ROOT, 'apps/worker/dist/maintenance.js')));
  ({ createPrismaClient, poolOf } = require(path.join(ROOT, 'packages/db/dist/index.js')));
  ({ bullPrefix, DELIVERY_QUEUE, RELAY_QUEUE } = require(path.join(ROOT, 'packages/queue/dist/index.js')));
}

// A payload of the shape of a finding.created envelope (343 bytes).
const PAYLOAD = `'{"id":"x","type":"finding.created","created_at":"2026-01-01T00:00:00Z","organization_id":"org","data":{"kind":"finding.created","finding_id":"fnd_01","title":"${'x'.repeat(120)}","severity":"high","status":"open","location":"src/app.ts:10"}}'::jsonb`;

/**
 * `count` events of `orgId`, `daysAgo` old, each with one delivery to `subscriptionId` completed then (status
 * failed: the drain counts succeeded deliveries, so seeded ones must not be) and one attempt. Ids carry `tag`.
 */
async function seed(db, { orgId, subscriptionId, count, daysAgo, tag }) {
  const at = `(now() AT TIME ZONE 'UTC') - interval '${daysAgo} days'`;
  const chunk = 250_000;
  for (let from = 1; from <= count; from += chunk) {
    const to = Math.min(count, from + chunk - 1);
    await db.query(
      `INSERT INTO events (id, organization_id, type, data, created_at)
       SELECT 'event_${tag}_' || g, $1, 'finding.created', '{"finding_id":"fnd_01"}', ${at} FROM generate_series(${from}, ${to}) g`,
      [orgId],
    );
    await db.query(
      `INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format,
                                       status, attempt_count, completed_at, created_at, updated_at)
       SELECT 'whdel_${tag}_' || g, $1, $2, 'event_${tag}_' || g, 'finding.created', ${PAYLOAD}, 'service', 'failed', 1,
              ${at}, ${at}, ${at}
       FROM generate_series(${from}, ${to}) g`,
      [orgId, subscriptionId],
    );
    await db.query(
      `INSERT INTO webhook_attempts (id, delivery_id, number, started_at, duration_ms, outcome, response_status, response_body)
       SELECT 'whatt_${tag}_' || g, 'whdel_${tag}_' || g, 1, ${at}, 120, 'http_error', 500, 'upstream unavailable'
       FROM generate_series(${from}, ${to}) g`,
    );
  }
  // VACUUM as well as ANALYZE: a freshly loaded table crosses autovacuum's insert threshold, and its vacuum would
  // otherwise land at random in one of the measured phases (a table in production has been vacuumed long since).
  await db.query('VACUUM (ANALYZE) events, webhook_deliveries, webhook_attempts');
}

/** Purge runs back to back, each with the production budget, until one completes (as the every-minute job would). */
async function purgeAll(prisma) {
  const cutoff = new Date(Date.now() - 30 * DAY_MS);
  const started = performance.now();
  const total = { deliveries: 0, events: 0, runs: 0 };
  for (;;) {
    const result = await purgeExpired(prisma, { cutoff, budgetMs: RETENTION_PURGE_BUDGET_MS, batchSize: RETENTION_PURGE_BATCH, pauseRatio: Number(env.BENCH_RETENTION_PAUSE_RATIO ?? RETENTION_PURGE_PAUSE_RATIO) });
    total.deliveries += result.deliveries;
    total.events += result.events;
    total.runs += 1;
    if (result.complete) break;
  }
  return { ...total, seconds: (performance.now() - started) / 1000 };
}

async function databaseSize(db) {
  const { rows } = await db.query('SELECT pg_database_size(current_database())::bigint AS bytes');
  return Number(rows[0].bytes);
}

/**
 * Space is reused once VACUUM has been through the purged tables. In production autovacuum does it (on by default in
 * PostgreSQL; the purge's deletions cross its thresholds). Where it is off (development servers), the bench runs
 * the same VACUUM itself, and says so.
 */
async function vacuumPurgedTables(db) {
  const { rows } = await db.query('SHOW autovacuum');
  const started = performance.now();
  if (rows[0].autovacuum === 'on') {
    const since = new Date(Date.now() - 1000);
    for (let waited = 0; waited < 300; waited += 1) {
      const done = await db.query(
        `SELECT count(*)::int AS n FROM pg_stat_user_tables
         WHERE relname IN ('webhook_deliveries', 'webhook_attempts', 'events') AND greatest(last_autovacuum, last_vacuum) >= $1`,
        [since],
      );
      if (done.rows[0].n === 3) return { by: 'autovacuum', seconds: (performance.now() - started) / 1000 };
      await sleep(1000);
    }
  }
  await db.query('VACUUM webhook_deliveries, webhook_attempts, events');
  return { by: 'VACUUM (autovacuum is off here)', seconds: (performance.now() - started) / 1000 };
}

/**
 * Watches the relay's own queue (BullMQ's event stream) and notes each run: its tick (the job scheduler's job id ends
 * in the time the job was due), when a worker took it and when it completed. Its `stop` returns the runs seen.
 */
async function watchRelayRuns(workerEnv) {
  const { QueueEvents } = bench.workerRequire('bullmq');
  const prefix = bullPrefix({ redisPrefix: workerEnv.REDIS_PREFIX, redis: { mode: 'single' } });
  // BullMQ does not close a connection it was given: stop() does, else it kept the bench from exiting after its table.
  const connection = new bench.Redis(bench.REDIS_URL, { maxRetriesPerRequest: null });
  const events = new QueueEvents(RELAY_QUEUE, { connection, prefix });
  await events.waitUntilReady();
  const runs = new Map();
  const tickOf = (jobId) => Number(String(jobId).split(':').pop());
  events.on('active', ({ jobId }) => runs.set(jobId, { dueAt: tickOf(jobId), startedAt: Date.now() }));
  events.on('completed', ({ jobId }) => {
    const run = runs.get(jobId);
    if (run) run.finishedAt = Date.now();
  });
  return {
    async stop() {
      await events.close();
      await connection.quit().catch(() => connection.disconnect());
      return [...runs.values()].filter((run) => run.finishedAt !== undefined && Number.isFinite(run.dueAt));
    },
  };
}

/** The slowest relay run: its time from tick to completion (lateness) and its own duration, in ms. */
function slowestRelayRun(runs) {
  const late = Math.max(...runs.map((run) => run.finishedAt - run.dueAt));
  const longest = Math.max(...runs.map((run) => run.finishedAt - run.startedAt));
  return { runs: runs.length, lateMaxMs: late, durationMaxMs: longest };
}

/**
 * A worker process runs; every second one delivery is committed without its job (created RELAY_AGE_MS ago, so the
 * relay takes it at its next tick), while `during` runs. Measured for each: when the relay enqueued it (its job
 * appears in Redis; polled every 10 ms) and when it succeeded. The probes go to `sub`, a subscription of their own:
 * one that shared the drained subscription's backlog would measure that backlog (its deliveries queued ahead), not
 * the relay.
 */
async function relayLag(db, workerEnv, sub, during) {
  const worker = bench.startProcess(bench.WORKER_COMMAND, { ...workerEnv, WORKER_CONCURRENCY: '16' });
  const redis = new bench.Redis(bench.REDIS_URL);
  await sleep(3000); // started, schedules registered
  const enqueued = [];
  const succeeded = [];
  let stop = false;
  const probe = async () => {
    while (!stop) {
      const id = `whdel_lost_${crypto.randomBytes(8).toString('hex')}`;
      const eventId = `event_lost_${id.slice(11)}`;
      await db.query(
        `INSERT INTO events (id, organization_id, type, data) VALUES ($1, $2, 'finding.created', '{}')`,
        [eventId, sub.orgId],
      );
      const inserted = Date.now();
      await db.query(
        `INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format, created_at, updated_at)
         VALUES ($1, $2, $3, $4, 'finding.created', ${PAYLOAD}, 'service', (now() AT TIME ZONE 'UTC') - interval '${RELAY_AGE_MS + 100} milliseconds', now() AT TIME ZONE 'UTC')`,
        [id, sub.orgId, sub.subscriptionId, eventId],
      );
      const jobKey = `${bullPrefix({ redisPrefix: workerEnv.REDIS_PREFIX, redis: { mode: 'single' } })}:${DELIVERY_QUEUE}:${id}`;
      const status = async () => (await db.query(`SELECT status FROM webhook_deliveries WHERE id = $1`, [id])).rows[0]?.status;
      for (let polls = 0; ; polls += 1) {
        // A job that ran and was removed between two polls: its success is the first sign of the relay.
        if ((await redis.exists(jobKey)) === 1 || (polls % 10 === 9 && (await status()) === 'succeeded')) break;
        if (Date.now() - inserted > 120_000) throw new Error('timed out waiting for a lost delivery to be relayed');
        await sleep(10);
      }
      enqueued.push(Date.now() - inserted);
      await bench.waitUntil(async () => (await status()) === 'succeeded', 120_000, 'a relayed delivery to succeed');
      succeeded.push(Date.now() - inserted);
      await sleep(500);
    }
  };
  const relayRuns = await watchRelayRuns(workerEnv);
  const probing = probe();
  const result = await during();
  stop = true;
  await probing;
  const runs = slowestRelayRun(await relayRuns.stop());
  await bench.stopProcess(worker);
  await redis.quit();
  const sorted = (xs) => [...xs].sort((a, b) => a - b);
  const [e, d] = [sorted(enqueued), sorted(succeeded)];
  const mid = Math.floor(e.length / 2);
  return { result, runs, probes: e.length, maxMs: e[e.length - 1], p50Ms: e[mid], deliveredMaxMs: d[d.length - 1], deliveredP50Ms: d[mid] };
}

async function main() {
  const began = Date.now();
  if (env.BENCH_SKIP_BUILD !== '1') {
    log('building (as npm start does)');
    execFileSync('bash', ['-c', 'source scripts/lib.sh && prepare_workspace'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  loadBuiltModules();
  const tls = await bench.makeTls();
  const dbUrl = await bench.createDatabase();
  log(`database and Redis prefix ${bench.RUN_ID}`);
  const receiver = await bench.startReceiver(tls);
  const port = 20_000 + Math.floor(Math.random() * 20_000);
  const base = `http://127.0.0.1:${port}`;
  // The workers' own purge finds nothing (10 years' retention): only the bench's purge runs, when it says so.
  const processEnv = {
    ...bench.serviceEnv(dbUrl, port, tls),
    OUTBOX_RELAY_INTERVAL_MS: String(RELAY_INTERVAL_MS),
    OUTBOX_RELAY_AGE_MS: String(RELAY_AGE_MS),
    RETENTION_DAYS: '3650',
  };
  const api = bench.startProcess(bench.API_COMMAND, processEnv);
  const db = new Pool({ connectionString: dbUrl, max: 3 });
  // An idle client the server drops emits 'error' on the pool: unheard, it ended the run with a dump of the client
  // object and no message (seen once in a full test suite). Said in one line; the next query on it fails as usual.
  db.on('error', (err) => log(`an idle database connection failed: ${err.message}`));
  const prisma = createPrismaClient(dbUrl, { max: 2 });
  const figures = {};
  try {
    await bench.waitForHealthy(base);
    const tenant = await bench.setUpTenant(base, processEnv, receiver.port);
    const { rows } = await db.query(`SELECT organization_id AS "orgId", id AS "subscriptionId" FROM webhook_subscriptions LIMIT 1`);
    const sub = rows[0];
    // The relay's probes' own subscription: an event type the drain does not publish, so it has no backlog.
    const probeSubscription = await bench.expectStatus(
      bench.call(base, 'POST', '/api/v1/webhooks/subscriptions', {
        token: tenant.token,
        body: { name: 'relay probe', url: `https://127.0.0.1:${receiver.port}/probe`, events: ['assessment.completed'] },
      }),
      201,
      'create the relay probe subscription',
    );
    const probeSub = { orgId: sub.orgId, subscriptionId: probeSubscription.id };

    log(`loading ${N} expired and ${N} retained deliveries, with events and attempts`);
    let t0 = performance.now();
    await seed(db, { ...sub, count: N, daysAgo: 40, tag: 'exp0' });
    await seed(db, { ...sub, count: N, daysAgo: 1, tag: 'ret' });
    const loadedBytes = await databaseSize(db);
    report({ figure: 'load', expired: N, retained: N, seconds: round((performance.now() - t0) / 1000), database_mib: round(loadedBytes / 2 ** 20) });

    log('warm-up drain (not measured)');
    await bench.publishCount(base, tenant, 1000);
    await bench.drain(db, receiver, processEnv, { workers: 1, concurrency: 16, extraCa: true });
    // Both phases alike: a worker probing the relay runs beside the drain's worker, during the drain and after it
    // (10 s without a purge, until the purge ends with it).
    log('drain and relay lag without a purge');
    await bench.publishCount(base, tenant, DRAIN_EVENTS);
    let quietDrain;
    const quietRelay = await relayLag(db, processEnv, probeSub, async () => {
      quietDrain = await bench.drain(db, receiver, processEnv, { workers: 1, concurrency: 16, extraCa: true });
      await sleep(10_000);
    });

    log('drain and relay lag while the expired half is purged');
    await bench.publishCount(base, tenant, DRAIN_EVENTS);
    let purge;
    let busyDrain;
    const busyRelay = await relayLag(db, processEnv, probeSub, async () => {
      const purging = purgeAll(prisma).then((result) => (purge = result));
      busyDrain = await bench.drain(db, receiver, processEnv, { workers: 1, concurrency: 16, extraCa: true });
      busyDrain.purgeStillRunning = purge === undefined;
      await purging;
    });
    const rowsPurged = purge.deliveries;
    report({
      figure: 'purge',
      n: N,
      deliveries: purge.deliveries,
      events: purge.events,
      attempts: purge.deliveries,
      runs: purge.runs,
      seconds: round(purge.seconds),
      deliveries_per_s: round(rowsPurged / purge.seconds),
      us_per_delivery: round((purge.seconds * 1e6) / rowsPurged),
    });
    figures.purge = purge;
    report({
      figure: 'drain during purge',
      without_per_s: round(quietDrain.perSecond),
      during_per_s: round(busyDrain.perSecond),
      ratio: round(busyDrain.perSecond / quietDrain.perSecond, 3),
      purge_still_running_when_drained: busyDrain.purgeStillRunning,
    });
    report({
      figure: 'relay lag',
      relay_interval_ms: RELAY_INTERVAL_MS,
      runs_without: quietRelay.runs.runs,
      runs_during: busyRelay.runs.runs,
      run_late_without_max_ms: quietRelay.runs.lateMaxMs,
      run_late_during_max_ms: busyRelay.runs.lateMaxMs,
      run_duration_without_max_ms: quietRelay.runs.durationMaxMs,
      run_duration_during_max_ms: busyRelay.runs.durationMaxMs,
      without_max_ms: quietRelay.maxMs,
      without_p50_ms: quietRelay.p50Ms,
      during_max_ms: busyRelay.maxMs,
      during_p50_ms: busyRelay.p50Ms,
      during_probes: busyRelay.probes,
      delivered_without_max_ms: quietRelay.deliveredMaxMs,
      delivered_during_max_ms: busyRelay.deliveredMaxMs,
    });

    log(`deleting an organization holding ${ORG_DELIVERIES} deliveries`);
    const doomed = await organizationWithHistory(base, processEnv, db);
    t0 = performance.now();
    await bench.expectStatus(bench.call(base, 'DELETE', '/api/v1/organization', { token: doomed.token, body: { confirm: doomed.name } }), 204, 'delete organization');
    const deleteSeconds = (performance.now() - t0) / 1000;
    const left = (await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE organization_id = $1`, [doomed.orgId])).rows[0].n;
    report({ figure: 'delete organization', deliveries: ORG_DELIVERIES, seconds: round(deleteSeconds, 2), deliveries_left: left });

    const sizes = [];
    for (let cycle = 1; cycle <= CYCLES; cycle += 1) {
      // The first cycle's purge is the one above; each further cycle loads N expired deliveries again and purges them.
      if (cycle > 1) {
        const vacuum = await vacuumPurgedTables(db);
        report({ figure: `vacuum before cycle ${cycle}`, by: vacuum.by, seconds: round(vacuum.seconds) });
        log(`cycle ${cycle}: loading ${N} expired`);
        await seed(db, { ...sub, count: N, daysAgo: 40, tag: `exp${cycle}` });
        const cyclePurge = await purgeAll(prisma);
        report({ figure: `purge, cycle ${cycle}`, deliveries: cyclePurge.deliveries, seconds: round(cyclePurge.seconds), deliveries_per_s: round(cyclePurge.deliveries / cyclePurge.seconds) });
      }
      sizes.push(await databaseSize(db));
      report({ figure: `database size after cycle ${cycle}`, mib: round(sizes[cycle - 1] / 2 ** 20), ratio_to_first: round(sizes[cycle - 1] / sizes[0], 3) });
    }

    printTable({ purge, quietDrain, busyDrain, quietRelay, busyRelay, deleteSeconds, sizes, loadedBytes });
    log(`finished in ${((Date.now() - began) / 1000).toFixed(0)} s`);
  } finally {
    await bench.stopProcess(api);
    receiver.close();
    await prisma.$disconnect();
    await poolOf(prisma)?.end();
    await db.end();
    await bench.dropDatabase();
    await bench.deleteRedisPrefix();
  }
}

/** A second organization (its owner through the CLI, as bench/run.js's tenant) with ORG_DELIVERIES deliveries. */
async function organizationWithHistory(base, processEnv, db) {
  const email = `doomed-${bench.RUN_ID}@bench.example`;
  const password = crypto.randomBytes(12).toString('hex');
  const name = 'Doomed';
  execFileSync(process.execPath, [path.join(ROOT, 'apps/api/dist/cli.js'), 'create-owner', '--email', email, '--password', password, '--org', name], {
    env: processEnv,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const { token } = await bench.expectStatus(bench.call(base, 'POST', '/api/v1/auth/login', { body: { email, password } }), 200, 'login');
  const created = await bench.expectStatus(
    bench.call(base, 'POST', '/api/v1/webhooks/subscriptions', { token, body: { name: 'doomed', url: 'https://127.0.0.1:9/hook', events: ['finding.created'] } }),
    201,
    'create subscription',
  );
  const { rows } = await db.query('SELECT organization_id FROM webhook_subscriptions WHERE id = $1', [created.id]);
  await seed(db, { orgId: rows[0].organization_id, subscriptionId: created.id, count: ORG_DELIVERIES, daysAgo: 3, tag: 'doomed' });
  return { token, name, orgId: rows[0].organization_id };
}

function printTable({ purge, quietDrain, busyDrain, quietRelay, busyRelay, deleteSeconds, sizes, loadedBytes }) {
  const mib = (b) => `${round(b / 2 ** 20)} MiB`;
  const rows = [
    ['figure', 'value', 'target'],
    [`purge ${N} expired beside ${N} retained`, `${round(purge.seconds)} s, ${round(purge.deliveries / purge.seconds)} deliveries/s (${round((purge.seconds * 1e6) / purge.deliveries)} µs each), ${purge.runs} run(s)`, '<= 120 s'],
    ['drain during purge / without', `${round(busyDrain.perSecond)}/s / ${round(quietDrain.perSecond)}/s = ${round(busyDrain.perSecond / quietDrain.perSecond, 2)}`, '>= 0.8'],
    ['relay runs during purge / without: slowest tick to done, longest run', `${busyRelay.runs.lateMaxMs}, ${busyRelay.runs.durationMaxMs} ms (${busyRelay.runs.runs} runs) / ${quietRelay.runs.lateMaxMs}, ${quietRelay.runs.durationMaxMs} ms (${quietRelay.runs.runs} runs)`, `each done within its ${RELAY_INTERVAL_MS} ms interval`],
    ['relay lag (lost delivery to enqueued) during purge / without: max, p50', `${busyRelay.maxMs}, ${busyRelay.p50Ms} ms (${busyRelay.probes} probes) / ${quietRelay.maxMs}, ${quietRelay.p50Ms} ms`, `the next run: <= ${RELAY_INTERVAL_MS} ms + its run`],
    ['lost delivery to received, during purge / without: max', `${busyRelay.deliveredMaxMs} ms / ${quietRelay.deliveredMaxMs} ms`, ''],
    [`delete organization with ${ORG_DELIVERIES} deliveries`, `${round(deleteSeconds, 2)} s`, ''],
    ['database size: loaded / after each cycle', `${mib(loadedBytes)} / ${sizes.map(mib).join(', ')} (${round(sizes[sizes.length - 1] / sizes[0], 3)} x the first)`, '<= 1.2 x'],
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const line = (r) => `| ${r.map((cell, i) => String(cell).padEnd(widths[i])).join(' | ')} |`;
  process.stdout.write(`\n${line(rows[0])}\n|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|\n${rows.slice(1).map(line).join('\n')}\n`);
}

// A failure or a signal: bench/run.js's clean-up (its processes, the database and the Redis prefix are the same).
main().catch(bench.failed);
