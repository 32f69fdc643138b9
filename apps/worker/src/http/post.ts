// One HTTPS POST of a webhook (or a GET: an issue tracker's lookups) with got: exact body bytes, no redirects
// followed, no retries (the queue retries), a total time limit, TLS verified, connected to a pinned address over a
// kept-alive connection of that address's pool (agents.ts). Never throws: a response or an error is the result.
// Only the first bytes of the response body are read; a response longer than that has its connection dropped rather
// than drained.
import { request as httpsRequest, type RequestOptions } from 'node:https';
import type { SecureContext } from 'node:tls';
import { ConnectionPool, type EgressProxyOptions } from './agents';
import { loadGot, type Got } from './got';
import { pinnedLookup } from './pinned-lookup';

export const RESPONSE_BODY_LIMIT_BYTES = 4096;

export interface OutboundRequest {
  /** POST by default; a GET sends no body. */
  method?: 'GET' | 'POST';
  url: URL;
  /** The address to connect to (already checked) and its family. */
  address: string;
  family: 4 | 6;
  headers: Record<string, string>;
  body: Buffer;
  /** Response bytes kept (default RESPONSE_BODY_LIMIT_BYTES); an API whose answer must be read asks for more. */
  responseLimitBytes?: number;
}

export interface TransportOptions {
  timeoutMs: number;
  /** Limit on the TCP connect and on the TLS handshake, each (most dead hosts fail there). */
  connectTimeoutMs?: number;
  secureContext?: SecureContext;
  /** Concurrent connections per receiver address (the worker's concurrency is a sensible value). */
  maxSocketsPerAddress: number;
  /** Every connection goes through this HTTP CONNECT proxy, to the checked address (WEBHOOK_EGRESS_PROXY). */
  proxy?: EgressProxyOptions;
}

export interface HttpResult {
  response: { status: number; headers: Record<string, string | string[] | undefined> } | null;
  /** At most the request's responseLimitBytes (default RESPONSE_BODY_LIMIT_BYTES) of the response body. */
  body: Buffer;
  /** Set when no response arrived, or when reading the body failed after the response. */
  error: (Error & { code?: string }) | null;
  durationMs: number;
}

export interface PostWebhook {
  (request: OutboundRequest): Promise<HttpResult>;
  /** Closes every pooled connection (shutdown). */
  close(): void;
}

const IDLE_CONNECTION_TIMEOUT_MS = 30_000;
const MAX_POOLS = 1_000;

export function createPostWebhook(options: TransportOptions): PostWebhook {
  const pool = new ConnectionPool({
    secureContext: options.secureContext,
    maxSocketsPerAddress: options.maxSocketsPerAddress,
    idleTimeoutMs: IDLE_CONNECTION_TIMEOUT_MS,
    maxPools: MAX_POOLS,
    proxy: options.proxy,
  });
  // The options every delivery shares, merged into a got instance once rather than on every request.
  let client: Promise<Got> | undefined;
  const deliveryClient = () =>
    (client ??= loadGot().then((got) =>
      got.extend({
        timeout: {
          request: options.timeoutMs,
          ...(options.connectTimeoutMs && { connect: options.connectTimeoutMs, secureConnect: options.connectTimeoutMs }),
        }, followRedirect: false, retry: { limit: 0 }, throwHttpErrors: false, request: requestWithDefinedOptions }),
    ));
  const post = async (request: OutboundRequest): Promise<HttpResult> => {
    // Every caller checks for https (the URL-safety rule); an http: URL would also leave the pool (its agents are
    // https ones), and with it the egress proxy: refused here too rather than sent around them.
    if (request.url.protocol !== 'https:') return notSent(new Error(`Only https URLs are sent (got ${request.url.protocol})`), 'ERR_HTTPS_ONLY');
    const got = await deliveryClient();
    const started = performance.now();
    const agent = pool.agentFor({
      hostname: request.url.hostname,
      port: Number(request.url.port || 443),
      address: request.address,
      family: request.family,
    });
    const stream = got.stream(request.url, {
      method: request.method ?? 'POST',
      ...(request.method !== 'GET' && { body: request.body }),
      headers: request.headers,
      dnsLookup: pinnedLookup(request.address, request.family),
      agent: { https: agent },
    });
    const result = await readResponse(stream, request.responseLimitBytes ?? RESPONSE_BODY_LIMIT_BYTES);
    // A response read to its end leaves its socket to the pool; anything else (error, over-long body) drops it.
    if (!result.complete) stream.destroy();
    return { response: result.response, body: result.body, error: result.error, durationMs: Math.round(performance.now() - started) };
  };
  return Object.assign(post, { close: () => pool.close() });
}

/**
 * got's request function, given only the options got has set. got hands Node ~35 options, most of
 * them undefined; Node copies that object three times per request (https.request, ClientRequest, Agent.addRequest),
 * which was ~15 % of a delivery's HTTP CPU in a profile (bench/http-client.js). An undefined option is Node's
 * default, but for rejectUnauthorized (NODE_TLS_REJECT_UNAUTHORIZED=0 turns its default off): the pool's agents set
 * it, and agent options win (agents.ts).
 */
function requestWithDefinedOptions(url: URL, options: RequestOptions) {
  const defined: Record<string, unknown> = {};
  for (const key in options) {
    const value = options[key as keyof RequestOptions];
    if (value !== undefined) defined[key] = value;
  }
  return httpsRequest(url, defined as RequestOptions);
}

function notSent(error: Error, code: string): HttpResult {
  return { response: null, body: Buffer.alloc(0), error: Object.assign(error, { code }), durationMs: 0 };
}

type GotStream = ReturnType<Awaited<ReturnType<typeof loadGot>>['stream']>;

function readResponse(stream: GotStream, limit: number): Promise<Omit<HttpResult, 'durationMs'> & { complete: boolean }> {
  return new Promise((resolve) => {
    let response: HttpResult['response'] = null;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (error: Error | null, complete = false) => {
      if (settled) return;
      settled = true;
      resolve({ response, body: Buffer.concat(chunks).subarray(0, limit), error, complete });
    };
    stream.on('response', (res: { statusCode: number; headers: Record<string, string | string[] | undefined> }) => {
      response = { status: res.statusCode, headers: res.headers };
    });
    stream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit) finish(null);
    });
    stream.on('end', () => finish(null, true));
    stream.on('error', (err: Error) => finish(err));
  });
}
