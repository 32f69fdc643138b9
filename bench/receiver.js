// The bench's webhook receiver: a real HTTPS server on loopback, in its own process so that its CPU is not
// charged to the process being measured. Answers 200 to every POST (paths under /hang never answer until
// { cmd: 'heal' }; paths under /busy answer 503 at once; paths under /endless answer 200 with a body that never
// ends, until the client closes the connection), and counts what it got and how long each event took from its
// envelope's created_at to receipt. Driven by the parent over IPC:
//   { cmd: 'stats', reset?: boolean, since?: ms, prefix?: path } -> { count, firstAt, lastAt, latencies: { p50, p99, n } }
//   { cmd: 'count' } -> { count } (cheap: sampled every second while the bench publishes)
// (with `prefix`: the receipts on paths starting with it only, and no reset)
// (latencies of the events created at or after `since` only, when given: a warm-up is left out so).
// With BENCH_TRACE_DIR set, every receipt (created_at, received at, in ms) is also written to
// receipts-<n>.json there at each reset, one file per measured phase, to see when the slow ones happened.
'use strict';
const fs = require('node:fs');
const https = require('node:https');
const path = require('node:path');

const { key, cert } = JSON.parse(process.env.BENCH_RECEIVER_TLS);
let count = 0;
let firstAt = null;
let lastAt = null;
let receipts = [];
let phase = 0;
let healed = false;
const ENDLESS_CHUNK = Buffer.alloc(64 * 1024, 'x');

/** 200, then a 64 KiB chunk per tick for as long as the client reads, paced by backpressure: nothing piles up here. */
function answerEndlessly(res) {
  let open = true;
  res.on('close', () => (open = false));
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  const pump = () => {
    if (!open) return;
    if (res.write(ENDLESS_CHUNK)) setImmediate(pump);
    else res.once('drain', pump);
  };
  pump();
}

const server = https.createServer({ key, cert, keepAliveTimeout: 60_000 }, (req, res) => {
  if (req.url.startsWith('/hang') && !healed) return; // accepted, never answered: a tarpit
  if (req.url.startsWith('/busy')) {
    req.resume();
    res.writeHead(503, { 'content-type': 'text/plain', 'content-length': '4' }).end('busy');
    return;
  }
  if (req.url.startsWith('/endless')) {
    req.resume();
    req.on('end', () => answerEndlessly(res));
    return;
  }
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const now = Date.now();
    count += 1;
    firstAt ??= now;
    lastAt = now;
    try {
      const created = Date.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')).created_at);
      if (Number.isFinite(created)) receipts.push([created, now, req.url]);
    } catch {
      // not an envelope (the limit loop's body is one too, but nothing depends on it)
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
    res.end('ok');
  });
});

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

process.on('message', (message) => {
  if (message.cmd === 'heal') {
    healed = true;
    process.send({ healed });
    return;
  }
  if (message.cmd === 'count') {
    process.send({ count });
    return;
  }
  if (message.cmd !== 'stats') return;
  const since = message.since ?? -Infinity;
  if (message.prefix) {
    const mine = receipts.filter(([created, , url]) => url.startsWith(message.prefix) && created >= since);
    const sortedMine = mine.map(([created, at]) => at - created).sort((a, b) => a - b);
    const lastAt = mine.length ? Math.max(...mine.map(([, at]) => at)) : null;
    process.send({ count: mine.length, lastAt, latencies: { n: sortedMine.length, p50: percentile(sortedMine, 50), p99: percentile(sortedMine, 99) } });
    return;
  }
  const sorted = receipts.filter(([created]) => created >= since).map(([created, at]) => at - created).sort((a, b) => a - b);
  process.send({ count, firstAt, lastAt, latencies: { n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99) } });
  if (message.reset) {
    if (process.env.BENCH_TRACE_DIR && receipts.length > 0) {
      phase += 1;
      fs.writeFileSync(path.join(process.env.BENCH_TRACE_DIR, `receipts-${phase}.json`), JSON.stringify(receipts));
    }
    receipts = [];
    count = 0;
    firstAt = null;
    lastAt = null;
  }
});

server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('disconnect', () => process.exit(0));
