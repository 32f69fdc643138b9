// A real OAuth 2.0 authorization server on loopback HTTPS standing in for Microsoft Entra ID: an `oidc-provider`
// instance with the client-credentials grant at Entra's path `/<tenant>/oauth2/v2.0/token` and short-lived tokens.
// Next to it, a Logs Ingestion stand-in ("Sentinel") that validates each bearer token with the provider itself and
// answers 401 when it is unknown, revoked or expired, 204 otherwise.
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { default as ProviderType } from 'oidc-provider' with { 'resolution-mode': 'import' };
import { makeServerCertificate } from './tls';

export const TENANT_ID = '11111111-2222-3333-4444-555555555555';
export const CLIENT_ID = 'aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee';
export const CLIENT_SECRET = 'entra-client-secret-Zx9!do-not-leak';
export const MONITOR_SCOPE = 'https://monitor.azure.com/.default';

interface HttpsEndpoint {
  server: Server;
  port: number;
  /** Serves with a certificate of the given CA from now on (the world's CA, known only once it exists). */
  useCertificate(tls: { key: string; cert: string }): void;
  close(): Promise<void>;
}

async function listenHttps(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<HttpsEndpoint> {
  const placeholder = await makeServerCertificate();
  const server = createServer({ key: placeholder.private, cert: placeholder.cert }, handler);
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    useCertificate: (tls) => server.setSecureContext({ key: tls.key, cert: tls.cert }),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface EntraStandIn extends HttpsEndpoint {
  /** AZURE_AUTHORITY_HOST for the service. */
  authorityHost: string;
  provider: ProviderType;
  /** Token endpoint requests so far, and how many of them were answered 200. */
  tokenRequests: number;
  tokensIssued: number;
  /** Whether the token is one the provider issued and still honours. */
  isValid(token: string): Promise<boolean>;
  /** Revokes a token at the provider (as if Entra ID had invalidated it). */
  revoke(token: string): Promise<void>;
}

export async function startEntra(options: { tokenTtlSeconds: number }): Promise<EntraStandIn> {
  const { default: Provider } = await import('oidc-provider');
  let provider!: ProviderType;
  let callback!: ReturnType<ProviderType['callback']>;
  const tokenPath = `/${TENANT_ID}/oauth2/v2.0/token`;
  const endpoint = await listenHttps((req, res) => {
    if (req.method === 'POST' && (req.url ?? '').split('?')[0] === tokenPath) {
      stand.tokenRequests += 1;
      res.on('finish', () => {
        if (res.statusCode === 200) stand.tokensIssued += 1;
      });
    }
    callback(req, res);
  });
  const issuer = `https://127.0.0.1:${endpoint.port}`;
  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  provider = new Provider(issuer, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials'],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: 'client_secret_post',
        scope: MONITOR_SCOPE,
      },
    ],
    scopes: [MONITOR_SCOPE],
    jwks: { keys: [{ ...signingKey, kid: 'entra-loopback', alg: 'RS256', use: 'sig' }] as never },
    features: { clientCredentials: { enabled: true }, devInteractions: { enabled: false }, resourceIndicators: { enabled: false } },
    routes: { token: tokenPath },
    cookies: { keys: ['entra-loopback-cookie-key-0123456789'] },
    ttl: { ClientCredentials: options.tokenTtlSeconds },
  });
  callback = provider.callback();
  const stand: EntraStandIn = {
    ...endpoint,
    authorityHost: issuer,
    provider,
    tokenRequests: 0,
    tokensIssued: 0,
    async isValid(token) {
      return (await provider.ClientCredentials.find(token)) !== undefined;
    },
    async revoke(token) {
      const found = await provider.ClientCredentials.find(token);
      await found?.destroy();
    },
  };
  return stand;
}

export interface IngestionRequest {
  path: string;
  token: string | null;
  /** What the stand-in answered. */
  status: number;
  body: Buffer;
}

export interface SentinelStandIn extends HttpsEndpoint {
  requests: IngestionRequest[];
  /** A Logs Ingestion URL on this server for a stream. */
  url(stream: string): string;
}

/** The Logs Ingestion API stand-in: 204 for a valid bearer token, 401 otherwise. */
export async function startSentinel(entra: EntraStandIn): Promise<SentinelStandIn> {
  const requests: IngestionRequest[] = [];
  const endpoint = await listenHttps((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const header = req.headers.authorization ?? '';
      const token = header.startsWith('Bearer ') ? header.slice('Bearer '.length) : null;
      const valid = token !== null && (await entra.isValid(token));
      const status = valid ? 204 : 401;
      requests.push({ path: (req.url ?? '').split('?')[0], token, status, body: Buffer.concat(chunks) });
      res.statusCode = status;
      if (valid) res.end();
      else res.setHeader('content-type', 'application/json').end('{"error":{"code":"InvalidToken","message":"The token is invalid or expired."}}');
    });
  });
  return {
    ...endpoint,
    requests,
    url: (stream) => `https://127.0.0.1:${endpoint.port}/dataCollectionRules/dcr-${'a'.repeat(32)}/streams/${stream}?api-version=2023-01-01`,
  };
}
