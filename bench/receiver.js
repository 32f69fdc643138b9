// The bench's webhook receiver: a real HTTPS server on loopback, in its own process so that its CPU is not
// charged to the process being measured. Answers 200 to every POST, and counts what it got and how long each
// event took from its envelope's created_at to receipt. Driven by the parent over IPC:
//   { cmd: 'stats', reset?: boolean, since?: ms } -> { count, firstAt, lastAt, latencies: { p50, p99, n } }
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

const server = https.createServer({ key, cert, keepAliveTimeout: 60_000 }, (req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const now = Date.now();
    count += 1;
    firstAt ??= now;
    lastAt = now;
    try {
      const created = Date.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')).created_at);
      if (Number.isFinite(created)) receipts.push([created, now]);
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
  if (message.cmd !== 'stats') return;
  const since = message.since ?? -Infinity;
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
