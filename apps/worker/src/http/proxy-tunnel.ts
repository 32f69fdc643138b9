// Outbound connections through the operator's egress proxy (WEBHOOK_EGRESS_PROXY), so that receivers see the
// proxy's fixed source addresses. The worker has already resolved and checked the target (URL-safety rule): the
// proxy is asked to CONNECT to that checked address, never to a name it would resolve again, and TLS runs inside
// the tunnel from the worker to the receiver (SNI and certificate check against the URL's host name), so the proxy
// relays bytes it cannot read. A proxy that refuses, is unreachable or does not answer in time fails the attempt
// with a ProxyError saying so; the proxy's credentials never appear in a message.
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { Agent, type AgentOptions, type RequestOptions } from 'node:https';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

/** The egress proxy failed to open a tunnel (refused, unreachable, non-2xx answer to CONNECT, timeout). */
export class ProxyError extends Error {
  override name = 'ProxyError';
  readonly code: string;
  constructor(message: string, code = 'EPROXY') {
    super(message);
    this.code = code;
  }
}

export interface TunnelTarget {
  /** The checked address and its port. */
  address: string;
  port: number;
}

const MAX_CONNECT_RESPONSE_BYTES = 16 * 1024;

/** `host:port` of the proxy, for messages (never its credentials). */
export function describeProxy(proxy: URL): string {
  return `${proxy.hostname}:${proxy.port || 80}`;
}

function authority(target: TunnelTarget): string {
  return isIP(target.address) === 6 ? `[${target.address}]:${target.port}` : `${target.address}:${target.port}`;
}

function connectRequest(proxy: URL, target: TunnelTarget): string {
  const lines = [`CONNECT ${authority(target)} HTTP/1.1`, `Host: ${authority(target)}`];
  if (proxy.username || proxy.password) {
    const credentials = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
    lines.push(`Proxy-Authorization: Basic ${Buffer.from(credentials).toString('base64')}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/**
 * Opens a TCP connection to the proxy and a CONNECT tunnel through it to the target; resolves with the raw socket
 * of the tunnel once the proxy answered 2xx. Gives up after `timeoutMs` (connecting and the proxy's answer).
 */
export function openTunnel(proxy: URL, target: TunnelTarget, timeoutMs: number): Promise<Socket> {
  const where = describeProxy(proxy);
  const to = authority(target);
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host: proxy.hostname.replace(/^\[|\]$/g, ''), port: Number(proxy.port || 80) });
    let received = Buffer.alloc(0);
    let settled = false;
    const fail = (error: ProxyError) => {
      if (settled) return;
      settled = true;
      cleanup();
      socket.destroy();
      reject(error);
    };
    const timer = setTimeout(
      () => fail(new ProxyError(`egress proxy ${where} did not open a tunnel to ${to} within ${timeoutMs} ms`, 'EPROXYTIMEOUT')),
      timeoutMs,
    );
    const onError = (err: Error & { code?: string }) =>
      fail(new ProxyError(`egress proxy ${where} unreachable: ${err.code ?? err.message}`, err.code ?? 'EPROXY'));
    const onClose = () => fail(new ProxyError(`egress proxy ${where} closed the connection before answering CONNECT ${to}`));
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) {
        if (received.length > MAX_CONNECT_RESPONSE_BYTES) fail(new ProxyError(`egress proxy ${where} sent an over-long answer to CONNECT`));
        return;
      }
      const statusLine = received.subarray(0, received.indexOf('\r\n')).toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1];
      if (!status || !status.startsWith('2')) {
        const answer = status ? statusLine.replace(/^HTTP\/1\.[01] /, 'HTTP ').slice(0, 120) : 'a malformed answer';
        fail(new ProxyError(`egress proxy ${where} refused CONNECT ${to}: ${answer}`));
        return;
      }
      settled = true;
      cleanup();
      const rest = received.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    const cleanup = () => {
      clearTimeout(timer);
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.off('data', onData);
    };
    socket.on('error', onError);
    socket.on('close', onClose);
    socket.on('data', onData);
    socket.once('connect', () => socket.write(connectRequest(proxy, target)));
  });
}

type CreateConnectionCallback = (err: Error | null, stream: Duplex) => void;

/**
 * A keep-alive HTTPS agent whose every connection is a TLS session inside a CONNECT tunnel to one checked address.
 * The request's own options (host name as `servername` and for the certificate check, the trusted CAs) shape the
 * TLS handshake exactly as on a direct connection.
 */
export class TunnelAgent extends Agent {
  constructor(
    options: AgentOptions,
    private readonly proxy: URL,
    private readonly target: TunnelTarget,
    private readonly connectTimeoutMs: number,
  ) {
    super(options);
  }

  // Node's Agent accepts a socket later through the callback when createConnection returns nothing.
  override createConnection(requestOptions: RequestOptions, callback?: CreateConnectionCallback): undefined {
    const options = requestOptions as ConnectionOptions;
    openTunnel(this.proxy, this.target, this.connectTimeoutMs).then(
      (tunnel) => {
        const servername = options.servername || (options.host && !isIP(options.host) ? options.host : undefined);
        callback?.(null, tlsConnect({ ...options, socket: tunnel, servername }));
      },
      (err: Error) => callback?.(err, undefined as unknown as Duplex),
    );
    return undefined;
  }
}
