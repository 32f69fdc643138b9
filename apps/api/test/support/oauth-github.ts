// A loopback HTTP server implementing GitHub's documented OAuth app endpoints (docs.github.com, "Authorizing OAuth
// apps": web application flow with PKCE) and the two REST endpoints the service reads:
//   GET  /login/oauth/authorize     client_id, redirect_uri, scope, state, code_challenge(+_method S256), login
//                                   -> 302 redirect_uri?code&state (the person is `login`; `deny=1` declines)
//   POST /login/oauth/access_token  client_id, client_secret, code, redirect_uri, code_verifier -> access token;
//                                   JSON when Accept: application/json, form-encoded otherwise; errors are 200s
//                                   with an `error` field, as GitHub does. A code works once and for 10 minutes.
//   GET  /user, GET /user/emails    Authorization: Bearer <token> (or `token <token>`); User-Agent required
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface GithubEmail {
  email: string;
  primary: boolean;
  verified: boolean;
  visibility?: 'public' | 'private' | null;
}

export interface GithubAccount {
  id: number;
  login: string;
  name: string | null;
  emails: GithubEmail[];
}

export interface GithubApp {
  clientId: string;
  clientSecret: string;
  /** The authorization callback URL registered for the app. */
  redirectUri: string;
}

export interface LoopbackGithub {
  url: string;
  addAccount(account: GithubAccount): void;
  /**
   * The person signed in at GitHub when the authorize request names none (a real browser cannot add the `login`
   * parameter): like a GitHub session cookie.
   */
  signInAs(login: string | null): void;
  /** Code exchanges received, and how many the server refused. */
  tokenRequests: number;
  refusedTokenRequests: number;
  close(): Promise<void>;
}

interface IssuedCode {
  login: string;
  redirectUri: string;
  scope: string;
  codeChallenge: string;
  expiresAt: number;
  used: boolean;
}

const CODE_TTL_MS = 10 * 60 * 1000;

const token = (prefix: string) => `${prefix}_${randomBytes(20).toString('hex')}`;

async function readForm(req: http.IncomingMessage): Promise<Record<string, string>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const raw = Buffer.concat(chunks).toString('utf8');
  if ((req.headers['content-type'] ?? '').startsWith('application/json')) return JSON.parse(raw || '{}');
  return Object.fromEntries(new URLSearchParams(raw));
}

/** The service's GitHub settings pointing at a loopback GitHub for `app`. */
export function githubEnvFor(server: LoopbackGithub, app: GithubApp): Record<string, string> {
  return {
    GITHUB_CLIENT_ID: app.clientId,
    GITHUB_CLIENT_SECRET: app.clientSecret,
    GITHUB_AUTHORIZE_URL: `${server.url}/login/oauth/authorize`,
    GITHUB_TOKEN_URL: `${server.url}/login/oauth/access_token`,
    GITHUB_API_BASE_URL: server.url,
  };
}

export async function startGithubServer(app: GithubApp): Promise<LoopbackGithub> {
  const accounts = new Map<string, GithubAccount>();
  const codes = new Map<string, IssuedCode>();
  const accessTokens = new Map<string, { login: string; scope: string }>();
  let signedIn: string | null = null;
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const loopback: LoopbackGithub = {
    url,
    tokenRequests: 0,
    refusedTokenRequests: 0,
    addAccount: (account) => void accounts.set(account.login, account),
    signInAs: (login) => {
      signedIn = login;
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };

  const json = (res: http.ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));

  function authorize(res: http.ServerResponse, q: URLSearchParams) {
    if (q.get('client_id') !== app.clientId) return json(res, 404, { message: 'Not Found' });
    const redirectUri = q.get('redirect_uri') ?? app.redirectUri;
    // GitHub accepts subpaths of the registered URL; a service must send exactly the registered one anyway.
    if (redirectUri !== app.redirectUri) return json(res, 400, { error: 'redirect_uri_mismatch' });
    const back = new URL(redirectUri);
    const state = q.get('state');
    if (state !== null) back.searchParams.set('state', state);
    if (q.get('deny') === '1') {
      back.searchParams.set('error', 'access_denied');
      back.searchParams.set('error_description', 'The user has denied your application access.');
      return res.writeHead(302, { Location: back.toString() }).end();
    }
    const challenge = q.get('code_challenge');
    if (!challenge || q.get('code_challenge_method') !== 'S256') return json(res, 400, { error: 'invalid_request' });
    const login = q.get('login') ?? signedIn;
    if (!login || !accounts.has(login)) return json(res, 400, { error: 'unknown login (the test names the account)' });
    const code = randomBytes(10).toString('hex');
    codes.set(code, { login, redirectUri, scope: q.get('scope') ?? '', codeChallenge: challenge, expiresAt: Date.now() + CODE_TTL_MS, used: false });
    back.searchParams.set('code', code);
    return res.writeHead(302, { Location: back.toString() }).end();
  }

  async function accessToken(req: http.IncomingMessage, res: http.ServerResponse) {
    loopback.tokenRequests += 1;
    const p = await readForm(req);
    const wantsJson = (req.headers.accept ?? '').includes('application/json');
    const answer = (body: Record<string, string>) => {
      if (body.error) loopback.refusedTokenRequests += 1;
      if (wantsJson) return json(res, 200, body);
      return res.writeHead(200, { 'Content-Type': 'application/x-www-form-urlencoded' }).end(new URLSearchParams(body).toString());
    };
    if (p.client_id !== app.clientId || p.client_secret !== app.clientSecret) {
      return answer({ error: 'incorrect_client_credentials', error_description: 'The client_id and/or client_secret passed are incorrect.' });
    }
    const issued = codes.get(p.code ?? '');
    const badCode = { error: 'bad_verification_code', error_description: 'The code passed is incorrect or expired.' };
    if (!issued || issued.used || issued.expiresAt < Date.now()) return answer(badCode);
    issued.used = true; // single use, whatever follows
    if (p.redirect_uri !== undefined && p.redirect_uri !== issued.redirectUri) {
      return answer({ error: 'redirect_uri_mismatch', error_description: 'The redirect_uri MUST match the registered callback URL for this application.' });
    }
    const verifier = p.code_verifier ?? '';
    if (createHash('sha256').update(verifier).digest('base64url') !== issued.codeChallenge) {
      return answer({ error: 'invalid_grant', error_description: 'The code_verifier does not match the code_challenge.' });
    }
    const access = token('gho');
    accessTokens.set(access, { login: issued.login, scope: issued.scope });
    return answer({ access_token: access, token_type: 'bearer', scope: issued.scope.split(' ').join(',') });
  }

  function api(req: http.IncomingMessage, res: http.ServerResponse, path: string) {
    if (!req.headers['user-agent']) {
      return json(res, 403, { message: 'Request forbidden by administrative rules. Please make sure your request has a User-Agent header.' });
    }
    const match = /^(?:Bearer|token) (\S+)$/i.exec(req.headers.authorization ?? '');
    const grant = match ? accessTokens.get(match[1]) : undefined;
    const account = grant ? accounts.get(grant.login) : undefined;
    if (!grant || !account) return json(res, 401, { message: 'Bad credentials' });
    const scopes = grant.scope.split(/[ ,]+/);
    if (path === '/user') {
      const publicEmail = account.emails.find((e) => e.primary && e.visibility === 'public')?.email ?? null;
      return json(res, 200, { login: account.login, id: account.id, type: 'User', name: account.name, email: publicEmail });
    }
    if (!scopes.includes('user:email') && !scopes.includes('user')) return json(res, 404, { message: 'Not Found' });
    return json(res, 200, account.emails.map((e) => ({ visibility: null, ...e })));
  }

  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const u = new URL(req.url ?? '/', url);
    const fail = (err: unknown) => json(res, 500, { message: String(err) });
    if (req.method === 'GET' && u.pathname === '/login/oauth/authorize') return authorize(res, u.searchParams);
    if (req.method === 'POST' && u.pathname === '/login/oauth/access_token') return void accessToken(req, res).catch(fail);
    if (req.method === 'GET' && (u.pathname === '/user' || u.pathname === '/user/emails')) return api(req, res, u.pathname);
    return json(res, 404, { message: 'Not Found' });
  });

  return loopback;
}
