#!/usr/bin/env node
// `npm run bench:erasure`: one GDPR erasure at volume (issue 34). In a database of its own it loads an organization
// with BENCH_ERASURE_N (1,000,000) events, each with one delivery and one attempt (generate_series, not the API),
// one in BENCH_ERASURE_HIT_EVERY (100) of them naming the person by e-mail (in the event data, the delivery payload
// and the attempt's response body), and a second organization with BENCH_ERASURE_OTHER_N (100,000) of its own
// naming the same address. Then it runs the built worker's erasure job (apps/worker/dist/erasure.js, the scheduled
// job's code): the preview, the confirmation, the erasure in keyset batches of ERASURE_BATCH_SIZE (the config's
// default unless set), and prints the times, the rows changed, and that the other organization's rows are
// untouched. Uses the existing build (`npm run build` first). Prints one JSON line per figure.
'use strict';
const path = require('node:path');
const { Client } = require('pg');

const ROOT = path.resolve(__dirname, '..');
const env = process.env;
const num = (name, fallback) => (env[name] ? Number(env[name]) : fallback);
const N = num('BENCH_ERASURE_N', 1_000_000);
const OTHER_N = num('BENCH_ERASURE_OTHER_N', 100_000);
const HIT_EVERY = num('BENCH_ERASURE_HIT_EVERY', 100);
const EMAIL = 'dana.erasmus@customer.example';

const figure = (name, value, extra = {}) => console.log(JSON.stringify({ figure: name, value, ...extra }));
const seconds = (ms) => Math.round(ms / 10) / 100;

/** `count` events of `org`, each with a delivery and an attempt; one in HIT_EVERY names the person. */
async function seed(db, { org, subscription, count, tag }) {
  const named = (g) => `CASE WHEN ${g} % ${HIT_EVERY} = 0 THEN 'contact ${EMAIL} about it' ELSE 'nobody in particular' END`;
  const chunk = 250_000;
  for (let from = 1; from <= count; from += chunk) {
    const to = Math.min(count, from + chunk - 1);
    await db.query(
      `INSERT INTO events (id, organization_id, type, data)
       SELECT 'event_${tag}_' || lpad(g::text, 8, '0'), $1, 'finding.created', jsonb_build_object('note', ${named('g')})
       FROM generate_series(${from}, ${to}) g`,
      [org],
    );
    await db.query(
      `INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format, status, attempt_count, updated_at)
       SELECT 'whdel_${tag}_' || lpad(g::text, 8, '0'), $1, $2, 'event_${tag}_' || lpad(g::text, 8, '0'), 'finding.created',
              jsonb_build_object('data', jsonb_build_object('note', ${named('g')}, 'title', repeat('x', 120))), 'service', 'failed', 1, now()
       FROM generate_series(${from}, ${to}) g`,
      [org, subscription],
    );
    await db.query(
      `INSERT INTO webhook_attempts (id, delivery_id, number, started_at, duration_ms, outcome, response_status, response_body)
       SELECT 'whatt_${tag}_' || lpad(g::text, 8, '0'), 'whdel_${tag}_' || lpad(g::text, 8, '0'), 1, now(), 120, 'http_error', 400, ${named('g')}
       FROM generate_series(${from}, ${to}) g`,
    );
  }
}

async function main() {
  const { createIsolatedDatabase } = require(path.join(ROOT, 'test-support/databases.js'));
  const database = await createIsolatedDatabase();
  const db = new Client({ connectionString: database.url });
  await db.connect();
  let prisma;
  try {
    Object.assign(env, { DATABASE_URL: database.url, NODE_ENV: env.NODE_ENV ?? 'development' });
    const { loadConfig, createLogger } = require(path.join(ROOT, 'packages/config/dist/index.js'));
    const { createPrismaClient, newId, sealErasureSubject } = require(path.join(ROOT, 'packages/db/dist/index.js'));
    const { pseudonymFor, systemClock } = require(path.join(ROOT, 'packages/domain/dist/index.js'));
    const { createRedis } = require(path.join(ROOT, 'packages/queue/dist/index.js'));
    const { runErasures } = require(path.join(ROOT, 'apps/worker/dist/erasure.js'));
    const config = loadConfig();
    prisma = createPrismaClient(config.databaseUrl);
    const deps = { config, logger: createLogger({ level: 'warn', service: 'bench' }), prisma, redis: () => createRedis(config.redis), clock: systemClock };

    const [a, b, person, admin] = [newId('org'), newId('org'), newId('usr'), newId('usr')];
    await db.query(`INSERT INTO organizations (id, name, updated_at) VALUES ($1, 'Bench A', now()), ($2, 'Bench B', now())`, [a, b]);
    await db.query(`INSERT INTO users (id, email, name, status, updated_at) VALUES ($1, $2, 'Dana Erasmus', 'active', now()), ($3, 'admin@bench.example', 'Bench Admin', 'active', now())`, [person, EMAIL, admin]);
    await db.query(`INSERT INTO memberships (id, organization_id, user_id, role) VALUES ($1, $2, $3, 'member'), ($4, $2, $5, 'owner')`, [newId('mem'), a, person, newId('mem'), admin]);
    const subs = [newId('whsub'), newId('whsub')];
    for (const [i, org] of [a, b].entries()) {
      await db.query(
        `INSERT INTO webhook_subscriptions (id, organization_id, level, name, url, events, severity_filter, status_filter, secret_enc, updated_at)
         VALUES ($1, $2, 'organization', 'bench', 'https://203.0.114.10/hooks', '{finding.created}', '{}', '{}', 'v1.x', now())`,
        [subs[i], org],
      );
    }
    let t = Date.now();
    await seed(db, { org: a, subscription: subs[0], count: N, tag: 'a' });
    await seed(db, { org: b, subscription: subs[1], count: OTHER_N, tag: 'b' });
    await db.query('VACUUM (ANALYZE) events, webhook_deliveries, webhook_attempts');
    figure('seed_seconds', seconds(Date.now() - t), { attempts_in_org: N, attempts_elsewhere: OTHER_N });
    const otherBefore = (await db.query(`SELECT md5(string_agg(a::text, '' ORDER BY a.id)) AS sum FROM webhook_attempts a WHERE a.id LIKE 'whatt_b_%'`)).rows[0].sum;

    const id = newId('era');
    const pseudonym = pseudonymFor(id);
    await db.query(
      `INSERT INTO erasure_requests (id, organization_id, subject_user_id, subject_enc, status, pseudonym_name, pseudonym_email, requested_by_id, updated_at)
       VALUES ($1, $2, $3, $4, 'previewing', $5, $6, $7, now())`,
      [id, a, person, sealErasureSubject({ userId: person, name: 'Dana Erasmus', email: EMAIL }, config.encryptionKey), pseudonym.name, pseudonym.email, admin],
    );
    t = Date.now();
    await runErasures(deps);
    figure('preview_seconds', seconds(Date.now() - t));
    const previewed = (await db.query('SELECT status, preview FROM erasure_requests WHERE id = $1', [id])).rows[0];
    figure('preview_attempt_rows', previewed.preview.columns.find((c) => c.table === 'webhook_attempts')?.rows ?? 0, { status: previewed.status });

    await db.query(`UPDATE erasure_requests SET status = 'erasing', confirmed_at = now(), confirmed_by_id = $2 WHERE id = $1`, [id, admin]);
    t = Date.now();
    let runs = 0;
    for (;;) {
      runs += 1;
      const result = await runErasures(deps);
      if (result.completed || result.failed) break;
    }
    figure('erasure_seconds', seconds(Date.now() - t), { runs, batch_size: config.erasure.batchSize });
    const done = (await db.query('SELECT status, receipt FROM erasure_requests WHERE id = $1', [id])).rows[0];
    figure('erasure_status', done.status, { replaced: done.receipt?.replaced });
    const otherAfter = (await db.query(`SELECT md5(string_agg(a::text, '' ORDER BY a.id)) AS sum FROM webhook_attempts a WHERE a.id LIKE 'whatt_b_%'`)).rows[0].sum;
    figure('other_organization_untouched', otherBefore === otherAfter);
    const left = (await db.query(`SELECT count(*)::int AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.organization_id = $1 AND strpos(a.response_body, $2) > 0`, [a, EMAIL])).rows[0].n;
    figure('attempts_still_naming_the_person', left);
    const [load1] = require('node:os').loadavg();
    figure('load_average_1m_at_end', Math.round(load1 * 100) / 100, { cores: require('node:os').cpus().length });
  } finally {
    await prisma?.$disconnect().catch(() => undefined);
    await db.end();
    await database.drop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
