// Found in the review of 302d924 (post.ts: got's request function gets only the options that are not undefined).
//
// got always hands Node `rejectUnauthorized: undefined` (its default). Node's tls.connect starts from
// `{ rejectUnauthorized: !allowUnauthorized, ...options }`, so got's explicit undefined overrode the env-derived
// default and tls.connect then turned undefined into `true`: before the change, NODE_TLS_REJECT_UNAUTHORIZED=0 in
// the worker's environment did not affect the webhook transport. With the undefined dropped, the env-derived default
// (`false` when NODE_TLS_REJECT_UNAUTHORIZED=0) is what tls.connect uses: the transport accepts any certificate
// (self-signed, wrong host name), directly and through the egress proxy's tunnel.
//
// The environment variable is read by Node from the real process.env, which jest does not expose to the test (it
// gives the test a copy), so the transport runs in a child Node process on the built worker (apps/worker/dist).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { makeServerCertificate } from './support/tls';

const POST_JS = path.resolve(__dirname, '../dist/http/post.js');

const CHILD = `
const https = require('node:https');
const net = require('node:net');
const { createPostWebhook } = require(process.env.POST_JS);
const { key, cert } = JSON.parse(process.env.RECEIVER_TLS);
(async () => {
  let seen = 0;
  const receiver = https.createServer({ key, cert }, (req, res) => { seen++; req.resume(); req.on('end', () => res.end('answered')); });
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  // A minimal CONNECT proxy (the egress proxy of WEBHOOK_EGRESS_PROXY).
  const proxy = net.createServer((client) => {
    client.once('data', (chunk) => {
      const [, hostPort] = /^CONNECT (\\S+) /.exec(chunk.toString('latin1')) || [];
      const i = hostPort.lastIndexOf(':');
      const upstream = net.connect(Number(hostPort.slice(i + 1)), hostPort.slice(0, i), () => {
        client.write('HTTP/1.1 200 Connection established\\r\\n\\r\\n');
        client.pipe(upstream).pipe(client);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
  });
  await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
  const out = [];
  for (const mode of ['direct', 'egress proxy']) {
    const post = createPostWebhook({
      timeoutMs: 5000, connectTimeoutMs: 2000, maxSocketsPerAddress: 2,
      ...(mode === 'egress proxy' && { proxy: { url: new URL('http://127.0.0.1:' + proxy.address().port), connectTimeoutMs: 2000 } }),
    });
    const before = seen;
    const result = await post({
      url: new URL('https://receiver.test:' + receiver.address().port + '/hook'), address: '127.0.0.1', family: 4,
      headers: { 'content-type': 'application/json' }, body: Buffer.from('{"secret":"signed payload"}'),
    });
    post.close();
    out.push({ mode, status: result.response ? result.response.status : null, error: result.error ? (result.error.code || result.error.message) : null, received: seen - before });
  }
  receiver.close(); proxy.close();
  process.stdout.write(JSON.stringify(out));
})().catch((err) => { console.error(err); process.exit(1); });
`;

function runChild(env: Record<string, string>): Promise<Array<{ mode: string; status: number | null; error: string | null; received: number }>> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', CHILD], { env: { ...process.env, ...env, POST_JS }, timeout: 20_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`child failed: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

describe('the worker transport verifies the receiver certificate whatever NODE_TLS_REJECT_UNAUTHORIZED says', () => {
  it('refuses a self-signed receiver certificate, directly and through the egress proxy, with NODE_TLS_REJECT_UNAUTHORIZED=0', async () => {
    const selfSigned = await makeServerCertificate();
    const results = await runChild({
      NODE_TLS_REJECT_UNAUTHORIZED: '0',
      RECEIVER_TLS: JSON.stringify({ key: selfSigned.private, cert: selfSigned.cert }),
    });
    expect(results.map((r) => r.mode)).toEqual(['direct', 'egress proxy']);
    for (const result of results) {
      // Before 302d924: { status: null, error: 'DEPTH_ZERO_SELF_SIGNED_CERT', received: 0 } in both modes.
      expect(result).toMatchObject({ status: null, received: 0 });
      expect(result.error).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
    }
  });

  it('(control) refuses it without the variable', async () => {
    const selfSigned = await makeServerCertificate();
    const results = await runChild({ RECEIVER_TLS: JSON.stringify({ key: selfSigned.private, cert: selfSigned.cert }) });
    for (const result of results) {
      expect(result).toMatchObject({ status: null, received: 0 });
      expect(result.error).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
    }
  });
});
