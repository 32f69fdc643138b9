// Sign-in with GitHub: the OAuth 2.0 web application flow with PKCE, then the REST API for the account and its
// e-mail addresses (docs.github.com: "Authorizing OAuth apps", "Get the authenticated user", "List email
// addresses for the authenticated user"). Only the primary address, and only if GitHub has verified it, is used.
import type { OAuthGithubConfig } from '@svc/config';
import { email as emailRule } from '../../http/validate';
import { forbidden } from '../../http/errors';
import { badGateway, isObject, providerRequest, tokenResponseOrThrow } from './provider-http';
import type { AuthorizationRequest, CodeExchange, OAuthProvider, ProviderIdentity, SourceAccount } from './provider';

export const GITHUB_SCOPES = 'read:user user:email';
/**
 * A personal source connection reads the person's repositories, private ones included. OAuth Apps have no
 * read-only scope for private repositories: `repo` is the narrowest that reads them.
 */
export const GITHUB_PERSONAL_SCOPES = 'repo read:user';
const USER_AGENT = 'security-assessment-service';
const API_VERSION = '2022-11-28';

export function githubProvider(config: OAuthGithubConfig, timeoutMs: number): OAuthProvider {
  const label = 'GitHub';
  const apiHeaders = (accessToken: string) => ({
    Authorization: `Bearer ${accessToken}`,
    Accept: 'application/vnd.github+json',
    'X-GitHub-Api-Version': API_VERSION,
    'User-Agent': USER_AGENT,
  });

  async function exchangeCode(exchange: CodeExchange): Promise<{ accessToken: string; scopes: string[] }> {
    const res = await providerRequest(
      label,
      config.tokenUrl,
      {
        method: 'POST',
        headers: { Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded', 'User-Agent': USER_AGENT },
        body: new URLSearchParams({
          client_id: config.clientId,
          client_secret: config.clientSecret,
          code: exchange.code,
          redirect_uri: exchange.redirectUri,
          code_verifier: exchange.codeVerifier,
        }).toString(),
      },
      timeoutMs,
    );
    const body = tokenResponseOrThrow(label, res);
    if (typeof body.access_token !== 'string' || body.access_token === '') {
      throw badGateway('GitHub answered the token request without an access token.');
    }
    const scopes = typeof body.scope === 'string' ? body.scope.split(/[ ,]+/).filter(Boolean) : [];
    return { accessToken: body.access_token, scopes };
  }

  async function apiGet(accessToken: string, path: string): Promise<unknown> {
    const res = await providerRequest(label, `${config.apiBaseUrl}${path}`, { headers: apiHeaders(accessToken) }, timeoutMs);
    if (res.status !== 200 || res.json === undefined) {
      throw badGateway(`GitHub answered GET ${path} with an unexpected response (HTTP ${res.status}).`);
    }
    return res.json;
  }

  return {
    name: 'github',
    label,
    usesNonce: false,

    async authorizationUrl(request: AuthorizationRequest): Promise<string> {
      const url = new URL(config.authorizeUrl);
      url.search = new URLSearchParams({
        client_id: config.clientId,
        redirect_uri: request.redirectUri,
        scope: request.scope ?? GITHUB_SCOPES,
        state: request.state,
        code_challenge: request.codeChallenge,
        code_challenge_method: 'S256',
        allow_signup: 'true',
      }).toString();
      return url.toString();
    },

    async identityFor(exchange: CodeExchange): Promise<ProviderIdentity> {
      const { accessToken } = await exchangeCode(exchange);
      const [user, emails] = await Promise.all([apiGet(accessToken, '/user'), apiGet(accessToken, '/user/emails')]);
      if (!isObject(user) || (typeof user.id !== 'number' && typeof user.id !== 'string') || !Array.isArray(emails)) {
        throw badGateway('GitHub sent a malformed account or e-mail list.');
      }
      const primary = emails.find((e) => isObject(e) && e.primary === true);
      if (!isObject(primary) || primary.verified !== true || typeof primary.email !== 'string') {
        throw forbidden('Your GitHub account has no verified primary e-mail address: verify it at GitHub, then sign in again.');
      }
      const { value: address, error } = emailRule().validate(primary.email);
      if (error) throw badGateway('GitHub sent a malformed e-mail address.');
      const login = typeof user.login === 'string' ? user.login : '';
      const name = typeof user.name === 'string' && user.name.trim() ? user.name : login;
      return { provider: 'github', subject: String(user.id), email: address as string, name };
    },

    async sourceAccountFor(exchange: CodeExchange): Promise<SourceAccount> {
      const { accessToken, scopes } = await exchangeCode(exchange);
      const user = await apiGet(accessToken, '/user');
      if (!isObject(user) || (typeof user.id !== 'number' && typeof user.id !== 'string') || typeof user.login !== 'string') {
        throw badGateway('GitHub sent a malformed account.');
      }
      return { subject: String(user.id), login: user.login, accessToken, scopes };
    },
  };
}
