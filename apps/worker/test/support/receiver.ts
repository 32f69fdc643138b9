// A real HTTPS webhook receiver on 127.0.0.1. Each path answers as the test scripts it (status, headers, body,
// a delay, or never); every request is kept with its raw body bytes, exactly as they arrived.
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ReceivedRequest {
  method: string;
  path: string;
  /** The query string, without its `?` ('' when none). */
  query: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Epoch milliseconds of arrival (real time). */
  at: number;
  /** The TLS server name the client asked for (SNI), if any. */
  servername: string | null;
  /** The source address of the connection (the worker's, or the egress proxy's). */
  remoteAddress: string;
}

export type Reply =
  | { status: number; headers?: Record<string, string>; body?: string | Buffer; delayMs?: number }
  | { hang: true };

/** n is the 1-based number of this request on its path. */
export type Script = (request: ReceivedRequest, n: number) => Reply;

export interface Receiver {
  port: number;
  url(path: string, host?: string): string;
  script(path: string, script: Script): void;
  requests(path?: string): ReceivedRequest[];
  waitForRequests(path: string, count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  /** TCP connections accepted so far. */
  connectionCount(): number;
  close(): Promise<void>;
}

export const ok: Script = () => ({ status: 200, headers: { 'content-type': 'text/plain' }, body: 'ok' });

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function answer(res: ServerResponse, reply: Reply): void {
  if ('hang' in reply) return;
  const send = () => {
    res.statusCode = reply.status;
    for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
    res.end(reply.body ?? ''); // Node adds Content-Length
  };
  if (reply.delayMs) setTimeout(send, reply.delayMs);
  else send();
}

export async function startReceiver(tls: { key: string; cert: string }, host = '127.0.0.1'): Promise<Receiver> {
  const scripts = new Map<string, Script>();
  const received: ReceivedRequest[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server: Server = createServer({ key: tls.key, cert: tls.cert }, async (req, res) => {
    const body = await readBody(req);
    const [path, query = ''] = (req.url ?? '/').split('?');
    const servername = (req.socket as { servername?: string | false }).servername || null;
    const remoteAddress = req.socket.remoteAddress ?? '';
    const request: ReceivedRequest = { method: req.method ?? '', path, query, headers: req.headers, body, at: Date.now(), servername, remoteAddress };
    received.push(request);
    const n = received.filter((r) => r.path === path).length;
    answer(res, (scripts.get(path) ?? ok)(request, n));
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    connections += 1;
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: (path, urlHost = host) => `https://${urlHost}:${port}${path}`,
    connectionCount: () => connections,
    script: (path, script) => void scripts.set(path, script),
    requests: (path) => received.filter((r) => path === undefined || r.path === path),
    async waitForRequests(path, count, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = received.filter((r) => r.path === path);
        if (found.length >= count) return found;
        if (Date.now() > deadline) throw new Error(`Receiver got ${found.length} of ${count} requests on ${path}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
