// One HTTPS POST of a webhook with got: exact body bytes, no redirects followed, no retries (the queue retries),
// a total time limit, TLS verified, connected to a pinned address. Never throws: a response or an error is the
// result. Only the first bytes of the response body are read; the connection is then dropped.
import { Agent } from 'node:https';
import { loadGot } from './got';
import { pinnedLookup } from './pinned-lookup';

export const RESPONSE_BODY_LIMIT_BYTES = 4096;

export interface OutboundRequest {
  url: URL;
  /** The address to connect to (already checked) and its family. */
  address: string;
  family: 4 | 6;
  headers: Record<string, string>;
  body: Buffer;
}

export interface TransportOptions {
  timeoutMs: number;
  certificateAuthorities?: string[];
}

export interface HttpResult {
  response: { status: number; headers: Record<string, string | string[] | undefined> } | null;
  /** At most RESPONSE_BODY_LIMIT_BYTES of the response body. */
  body: Buffer;
  /** Set when no response arrived, or when reading the body failed after the response. */
  error: (Error & { code?: string }) | null;
  durationMs: number;
}

export type PostWebhook = (request: OutboundRequest) => Promise<HttpResult>;

export function createPostWebhook(options: TransportOptions): PostWebhook {
  return async (request) => {
    const got = await loadGot();
    const started = performance.now();
    // A fresh agent without keep-alive: a pooled socket would skip the pinned lookup.
    const agent = new Agent({ keepAlive: false });
    const stream = got.stream.post(request.url, {
      body: request.body,
      headers: request.headers,
      timeout: { request: options.timeoutMs },
      followRedirect: false,
      retry: { limit: 0 },
      throwHttpErrors: false,
      dnsLookup: pinnedLookup(request.address, request.family),
      agent: { https: agent },
      https: options.certificateAuthorities ? { certificateAuthority: options.certificateAuthorities } : {},
    });
    try {
      const result = await readResponse(stream);
      return { ...result, durationMs: Math.round(performance.now() - started) };
    } finally {
      stream.destroy();
      agent.destroy();
    }
  };
}

type GotStream = ReturnType<Awaited<ReturnType<typeof loadGot>>['stream']['post']>;

function readResponse(stream: GotStream): Promise<Omit<HttpResult, 'durationMs'>> {
  return new Promise((resolve) => {
    let response: HttpResult['response'] = null;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (error: Error | null) => {
      if (settled) return;
      settled = true;
      resolve({ response, body: Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT_BYTES), error });
    };
    stream.on('response', (res: { statusCode: number; headers: Record<string, string | string[] | undefined> }) => {
      response = { status: res.statusCode, headers: res.headers };
    });
    stream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= RESPONSE_BODY_LIMIT_BYTES) finish(null);
    });
    stream.on('end', () => finish(null));
    stream.on('error', (err: Error) => finish(err));
  });
}
