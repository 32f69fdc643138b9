// The worker's one outbound transport (post.ts) and the got it sends with. got is patched (patches/got@14.6.6.patch):
// createNativeRequestOptions builds its object without the spread that made it slow; these tests hold what that object
// must still carry to Node (unix-socket, TLS and cache options). The transport passes Node only the options got set:
// it still sends exactly what it is given, verifies TLS, and sends https only.
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadGot } from '../src/http/got';
import { createPostWebhook } from '../src/http/post';
import { trustedSecureContext } from '../src/http/trust';
import { createTestTls, makeServerCertificate, type TestTls } from './support/tls';

type Seen = { method?: string; url?: string; headers: Record<string, unknown>; body: string };

function listenRecording(server: Server, seen: Seen[], target: number | string): Promise<void> {
  server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.end('answered');
    });
  });
  return new Promise((resolve) => server.listen(target, resolve));
}

const close = (server: Server) => new Promise((resolve) => server.close(resolve));

describe('got as patched', () => {
  it('still reaches a server on a unix socket (the URL\'s socket options reach Node)', async () => {
    const got = await loadGot();
    const socketDir = mkdtempSync(path.join(tmpdir(), 'got-patch-'));
    const socketPath = path.join(socketDir, 'server.sock');
    const seen: Seen[] = [];
    const server = createHttpServer();
    await listenRecording(server, seen, socketPath);
    try {
      const response = await got(`unix:${socketPath}:/over/the/socket`, { enableUnixSockets: true, retry: { limit: 0 } });
      expect(response.body).toBe('answered');
      expect(seen.map((s) => s.url)).toEqual(['/over/the/socket']);
    } finally {
      await close(server);
      rmSync(socketDir, { recursive: true, force: true });
    }
  });

  it('keeps got\'s TLS and cache options, with the request\'s own options winning as before', async () => {
    const got = await loadGot();
    const { Options } = await import('got');
    const checkServerIdentity = () => undefined;
    const options = new Options('https://receiver.test/x', {
      https: { certificateAuthority: 'CA', rejectUnauthorized: false, serverName: 'sni.test', checkServerIdentity, minVersion: 'TLSv1.3' },
      cacheOptions: { shared: false, cacheHeuristic: 0.5 },
      method: 'PUT',
      headers: { 'x-one': '1' },
    }, got.defaults.options);
    const native = options.createNativeRequestOptions() as Record<string, unknown>;
    expect(native).toMatchObject({
      ca: 'CA', rejectUnauthorized: false, servername: 'sni.test', checkServerIdentity, minVersion: 'TLSv1.3',
      shared: false, cacheHeuristic: 0.5, method: 'PUT',
    });
    expect(native.headers).toMatchObject({ 'x-one': '1' });
  });
});

describe('the worker transport (post.ts: only the options got set reach Node)', () => {
  let tls: TestTls;
  beforeAll(async () => {
    tls = await createTestTls();
  });

  async function withHttpsReceiver(certificate: { key: string; cert: string }, run: (port: number, seen: Seen[]) => Promise<void>) {
    const seen: Seen[] = [];
    const server = createHttpsServer({ key: certificate.key, cert: certificate.cert });
    await listenRecording(server, seen, 0);
    try {
      await run((server.address() as AddressInfo).port, seen);
    } finally {
      server.closeAllConnections();
      await close(server);
    }
  }

  const transport = (caFile: string) =>
    createPostWebhook({ timeoutMs: 5_000, connectTimeoutMs: 2_000, secureContext: trustedSecureContext(caFile), maxSocketsPerAddress: 4 });

  it('sends the method, headers and exact body bytes, and reads the answer', async () => {
    await withHttpsReceiver(tls, async (port, seen) => {
      const post = transport(tls.caFile);
      try {
        const result = await post({
          url: new URL(`https://localhost:${port}/hook?x=1`), address: '127.0.0.1', family: 4,
          headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' }, body: Buffer.from('{"a": 1}'),
        });
        expect(result.error).toBeNull();
        expect(result.response?.status).toBe(200);
        expect(result.body.toString()).toBe('answered');
        expect(seen).toHaveLength(1);
        expect(seen[0]).toMatchObject({ method: 'POST', url: '/hook?x=1', body: '{"a": 1}' });
        expect(seen[0].headers).toMatchObject({ 'content-type': 'application/json', 'webhook-id': 'msg_1', host: `localhost:${port}` });
      } finally {
        post.close();
      }
    });
  });

  it('refuses an http URL without sending it (it would go around the pool, and so the egress proxy)', async () => {
    const seen: Seen[] = [];
    const server = createHttpServer();
    await listenRecording(server, seen, 0);
    const post = transport(tls.caFile);
    try {
      const port = (server.address() as AddressInfo).port;
      const result = await post({ url: new URL(`http://127.0.0.1:${port}/hook`), address: '127.0.0.1', family: 4, headers: {}, body: Buffer.from('{}') });
      expect(result.response).toBeNull();
      expect(result.error?.code).toBe('ERR_HTTPS_ONLY');
      expect(seen).toHaveLength(0);
    } finally {
      post.close();
      await close(server);
    }
  });

  it('still refuses a receiver whose certificate no trusted authority signed', async () => {
    const selfSigned = await makeServerCertificate();
    await withHttpsReceiver({ key: selfSigned.private, cert: selfSigned.cert }, async (port, seen) => {
      const post = transport(tls.caFile);
      try {
        const result = await post({
          url: new URL(`https://localhost:${port}/hook`), address: '127.0.0.1', family: 4, headers: {}, body: Buffer.from('{}'),
        });
        expect(result.response).toBeNull();
        expect(result.error?.code).toMatch(/SELF_SIGNED|UNABLE_TO_VERIFY/);
        expect(seen).toHaveLength(0);
      } finally {
        post.close();
      }
    });
  });
});
