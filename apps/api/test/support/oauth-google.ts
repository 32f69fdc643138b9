// A real OpenID Provider on loopback standing in for Google: an instance of `oidc-provider` (a certified OpenID
// Provider implementation), not a hand-made fake. Its own RSA signing key, the registered clients, accounts the
// tests add, devInteractions off; the login + consent interaction is completed programmatically at
// GET /interaction/:uid?login=<sub> (as if the person had signed in there and approved; `deny=1` declines), with
// the provider's own interactionDetails / Grant / interactionFinished.
//
// For the tamper tests, `tokenResponseFilter` may rewrite the token endpoint's JSON answer (the real endpoint
// runs first: the request is passed through to the provider itself).
import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { default as ProviderType } from 'oidc-provider' with { 'resolution-mode': 'import' };

export interface OidcAccount {
  sub: string;
  email: string;
  email_verified: boolean;
  name?: string;
}

export interface OidcClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export interface LoopbackOidcProvider {
  /** The issuer URL (no trailing slash), also the base of every endpoint. */
  issuer: string;
  provider: ProviderType;
  addAccount(account: OidcAccount): void;
  tokenResponseFilter?: (body: Record<string, unknown>) => Record<string, unknown> | Promise<Record<string, unknown>>;
  /** How many requests reached the token endpoint. */
  tokenRequests: number;
  close(): Promise<void>;
}

const PASSTHROUGH = 'x-loopback-passthrough';

type Stored = Record<string, unknown> & { grantId?: string; uid?: string; userCode?: string; consumed?: number };

/** oidc-provider's storage adapter interface over one Map per provider instance (tests only, no expiry needed). */
function memoryAdapter() {
  const store = new Map<string, Stored>();
  return class LoopbackAdapter {
    constructor(private readonly model: string) {}
    private key(id: string) {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Stored) {
      store.set(this.key(id), payload);
    }
    async find(id: string) {
      return store.get(this.key(id));
    }
    async findByUid(uid: string) {
      return [...store.entries()].find(([k, v]) => k.startsWith(`${this.model}:`) && v.uid === uid)?.[1];
    }
    async findByUserCode(userCode: string) {
      return [...store.entries()].find(([k, v]) => k.startsWith(`${this.model}:`) && v.userCode === userCode)?.[1];
    }
    async consume(id: string) {
      const payload = store.get(this.key(id));
      if (payload) payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const [k, v] of store) if (v.grantId === grantId) store.delete(k);
    }
  };
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startOidcProvider(clients: OidcClient[]): Promise<LoopbackOidcProvider> {
  const { default: Provider } = await import('oidc-provider');
  const accounts = new Map<string, OidcAccount>();

  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const signingKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });
  const provider = new Provider(issuer, {
    adapter: memoryAdapter() as never,
    clients: clients.map((c) => ({ ...c, grant_types: ['authorization_code'], response_types: ['code'] })),
    jwks: { keys: [{ ...signingKey, kid: 'loopback-rs256', alg: 'RS256', use: 'sig' }] as never },
    cookies: { keys: ['loopback-oidc-cookie-key-0123456789'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    // Like Google: the scope's claims (email, email_verified, name) are in the ID token itself.
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: false } },
    pkce: { methods: ['S256'], required: () => true },
    ttl: { AuthorizationCode: 600, AccessToken: 3600, IdToken: 3600, Grant: 3600, Interaction: 600, Session: 3600 },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(_ctx, id) {
      const account = accounts.get(id);
      if (!account) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: account.sub, email: account.email, email_verified: account.email_verified, name: account.name };
        },
      };
    },
  });
  const callback = provider.callback();

  const loopback: LoopbackOidcProvider = {
    issuer,
    provider,
    tokenRequests: 0,
    addAccount: (account) => void accounts.set(account.sub, account),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };

  async function interaction(req: http.IncomingMessage, res: http.ServerResponse, url: URL) {
    const details = await provider.interactionDetails(req, res);
    if (url.searchParams.get('deny') === '1') {
      const denied = { error: 'access_denied', error_description: 'The person declined.' };
      await provider.interactionFinished(req, res, denied, { mergeWithLastSubmission: false });
      return;
    }
    const accountId = url.searchParams.get('login') ?? details.session?.accountId;
    if (!accountId || !accounts.has(accountId)) {
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end('unknown account: pass ?login=<sub>');
      return;
    }
    const clientId = details.params.client_id as string;
    const grant = details.grantId ? (await provider.Grant.find(details.grantId))! : new provider.Grant({ accountId, clientId });
    grant.addOIDCScope(String(details.params.scope));
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { login: { accountId }, consent: { grantId } }, { mergeWithLastSubmission: false });
  }

  async function filteredToken(req: http.IncomingMessage, res: http.ServerResponse) {
    const body = await readBody(req);
    const headers: Record<string, string> = { [PASSTHROUGH]: '1' };
    for (const name of ['authorization', 'content-type', 'accept']) {
      const value = req.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const upstream = await fetch(`${issuer}/token`, { method: 'POST', headers, body });
    const json = (await upstream.json()) as Record<string, unknown>;
    const rewritten = upstream.status === 200 ? await loopback.tokenResponseFilter!(json) : json;
    res.writeHead(upstream.status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(JSON.stringify(rewritten));
  }

  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', issuer);
    const done = (err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(String(err));
    };
    if (req.method === 'GET' && url.pathname.startsWith('/interaction/')) {
      interaction(req, res, url).catch(done);
      return;
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      if (req.headers[PASSTHROUGH] === undefined) {
        loopback.tokenRequests += 1;
        if (loopback.tokenResponseFilter) {
          filteredToken(req, res).catch(done);
          return;
        }
      }
    }
    callback(req, res);
  });

  return loopback;
}

/** A user agent's cookie jar, enough for one provider origin (paths are not tracked). */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  store(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (/expires=Thu, 01 Jan 1970/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

/**
 * Plays the browser at the provider: from an authorization URL, follows the provider's redirects (signing in as
 * `sub` when the interaction page is reached) until the provider redirects to `redirectUriPrefix`; returns that URL.
 */
export async function authorizeAtProvider(
  authorizationUrl: string,
  sub: string,
  redirectUriPrefix: string,
  options: { deny?: boolean } = {},
): Promise<URL> {
  const jar = new CookieJar();
  let url = new URL(authorizationUrl);
  for (let hop = 0; hop < 10; hop++) {
    if (url.pathname.startsWith('/interaction/')) {
      url.searchParams.set('login', sub);
      if (options.deny) url.searchParams.set('deny', '1');
    }
    const res = await fetch(url, { redirect: 'manual', headers: { cookie: jar.header() } });
    jar.store(res);
    const location = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || !location) {
      throw new Error(`the provider answered ${res.status} at ${url.pathname}: ${(await res.text()).slice(0, 500)}`);
    }
    const next = new URL(location, url);
    if (next.toString().startsWith(redirectUriPrefix)) return next;
    url = next;
  }
  throw new Error('too many redirects at the provider');
}
