#!/usr/bin/env node
// `npm run bench:http-client`: what one webhook POST costs the process that sends it, by HTTP client, against the
// bench's HTTPS receiver on loopback: the worker's own transport (apps/worker/dist/http/post.js: got's stream API,
// pinned address, its connection pool), got's promise API as the limit loop of bench/run.js calls it, and Node's
// https.request with a kept-alive agent as the floor. CPU milliseconds per request of this process (user + system,
// process.cpuUsage) and requests a second, `concurrency` at a time; the clients take turns, round after round, so
// that a busy machine weighs on all of them alike. `npm run bench:http-client` builds the worker first.
// Sizes (environment): BENCH_HTTP_REQUESTS (10000) per client and round, BENCH_HTTP_ROUNDS (3),
// BENCH_HTTP_CONCURRENCY (64, the worker's default WORKER_CONCURRENCY).
'use strict';
const https = require('node:https');
const path = require('node:path');
const crypto = require('node:crypto');
const bench = require('./run.js');

const ROOT = path.resolve(__dirname, '..');
const env = process.env;
const num = (name, fallback) => (env[name] ? Number(env[name]) : fallback);
const REQUESTS = num('BENCH_HTTP_REQUESTS', 10_000);
const ROUNDS = num('BENCH_HTTP_ROUNDS', 3);
const CONCURRENCY = num('BENCH_HTTP_CONCURRENCY', 64);

/** A webhook-sized signed body and headers, as a delivery sends them. */
function sampleRequest(i) {
  const body = Buffer.from(
    JSON.stringify({
      id: `evt_${i}`,
      type: 'finding.created',
      created_at: new Date().toISOString(),
      data: { finding_id: `fnd_${i}`, severity: 'high', title: 'SQL injection in the login form'.padEnd(120, '.') },
    }),
  );
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = crypto.createHmac('sha256', 'bench').update(`${timestamp}.`).update(body).digest('base64');
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'bench',
    'webhook-id': `msg_${i}`,
    'webhook-timestamp': timestamp,
    'webhook-signature': `v1,${signature}`,
  };
  return { body, headers };
}

async function clients(tls, port) {
  const { createPostWebhook } = require(path.join(ROOT, 'apps/worker/dist/http/post.js'));
  const { trustedSecureContext } = require(path.join(ROOT, 'apps/worker/dist/http/trust.js'));
  const { got } = await import(bench.workerRequire.resolve('got'));
  const url = new URL(`https://127.0.0.1:${port}/http-client`);
  const transport = createPostWebhook({
    timeoutMs: 10_000,
    connectTimeoutMs: 5_000,
    secureContext: trustedSecureContext(tls.caFile),
    maxSocketsPerAddress: CONCURRENCY,
  });
  const agent = new https.Agent({ keepAlive: true, maxSockets: CONCURRENCY, ca: [tls.caCert] });
  const expectOk = (status) => {
    if (status !== 200) throw new Error(`the receiver answered ${status}`);
  };
  return {
    'worker transport (got stream)': async (i) => {
      const { body, headers } = sampleRequest(i);
      const result = await transport({ url, address: '127.0.0.1', family: 4, headers, body });
      if (result.error) throw result.error;
      expectOk(result.response.status);
    },
    'got promise (the limit loop)': async (i) => {
      const { body, headers } = sampleRequest(i);
      const response = await got.post(url, {
        body,
        headers,
        agent: { https: agent },
        followRedirect: false,
        retry: { limit: 0 },
        throwHttpErrors: false,
        timeout: { request: 10_000 },
      });
      expectOk(response.statusCode);
    },
    'node:https (floor)': (i) =>
      new Promise((resolve, reject) => {
        const { body, headers } = sampleRequest(i);
        const request = https.request(url, { method: 'POST', headers, agent }, (response) => {
          response.on('data', () => {});
          response.on('end', () => {
            try {
              expectOk(response.statusCode);
              resolve();
            } catch (err) {
              reject(err);
            }
          });
        });
        request.on('error', reject);
        request.end(body);
      }),
    close() {
      transport.close();
      agent.destroy();
    },
  };
}

/** `REQUESTS` requests, CONCURRENCY at a time: CPU ms per request of this process and requests a second. */
async function measure(send) {
  let next = 0;
  const lane = async () => {
    while (next < REQUESTS) {
      next += 1;
      await send(next);
    }
  };
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return { cpuMs: (used.user + used.system) / 1000 / REQUESTS, perSecond: REQUESTS / seconds };
}

async function main() {
  const tls = await bench.makeTls();
  const receiver = await bench.startReceiver(tls);
  const all = await clients(tls, receiver.port);
  const names = Object.keys(all).filter((name) => name !== 'close');
  const runs = Object.fromEntries(names.map((name) => [name, []]));
  try {
    for (const name of names) await measure(all[name]); // warm-up: code compiled, connections open
    for (let round = 1; round <= ROUNDS; round += 1) {
      for (const name of names) {
        const run = await measure(all[name]);
        runs[name].push(run);
        bench.report({ figure: name, round, cpu_ms_per_request: bench.round(run.cpuMs, 3), requests_per_s: bench.round(run.perSecond) });
        await receiver.stats(true);
      }
    }
  } finally {
    all.close();
    receiver.close();
  }
  const median = (values) => values.slice().sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const floor = median(runs[names[2]].map((r) => r.cpuMs));
  console.log(`\n| client (c=${CONCURRENCY}, median of ${ROUNDS} rounds of ${REQUESTS}) | CPU ms per request | x node:https | requests/s |`);
  console.log('|---|---|---|---|');
  for (const name of names) {
    const cpuMs = median(runs[name].map((r) => r.cpuMs));
    console.log(`| ${name} | ${cpuMs.toFixed(3)} | ${(cpuMs / floor).toFixed(1)} | ${median(runs[name].map((r) => r.perSecond)).toFixed(0)} |`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
