// Sign-in with Google: OpenID Connect authorization code flow with PKCE and a nonce. Endpoints come from the
// issuer's discovery document; the ID token from the token endpoint is verified with jose against the issuer's
// JWKS (signature with an asymmetric algorithm the issuer announces, iss, aud = our client id, azp, exp, iat,
// nonce), and only an address with `email_verified: true` is accepted.
import type { OAuthGoogleConfig } from '@svc/config';
import type { Clock } from '@svc/domain';
import { safeEqual } from '../../lib/crypto';
import { badRequest, forbidden } from '../../http/errors';
import { email as emailRule } from '../../http/validate';
import { badGateway, isObject, loadJose, providerRequest, tokenResponseOrThrow, type Jose } from './provider-http';
import type { AuthorizationRequest, CodeExchange, OAuthProvider, ProviderIdentity } from './provider';

export const GOOGLE_SCOPES = 'openid email profile';
const DISCOVERY_TTL_MS = 3600 * 1000;
// Google's ID tokens carry either form of its issuer (developers.google.com/identity/openid-connect).
const GOOGLE_ISSUER = 'https://accounts.google.com';
const ASYMMETRIC_ALG = /^(?:RS|PS|ES)(?:256|384|512)$|^EdDSA$|^Ed25519$/;

interface Discovery {
  issuer: string;
  authorizationEndpoint: string;
  tokenEndpoint: string;
  jwks: ReturnType<typeof Jose.createRemoteJWKSet>;
  jwksUri: string;
  algorithms: string[];
  clientAuth: 'client_secret_basic' | 'client_secret_post';
  issParameterSupported: boolean;
}

const stringArray = (value: unknown): string[] | undefined =>
  Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined;

function httpUrl(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? value : undefined;
  } catch {
    return undefined;
  }
}

export function googleProvider(config: OAuthGoogleConfig, timeoutMs: number, clock: Clock): OAuthProvider {
  const label = 'Google';
  let cached: { at: number; discovery: Promise<Discovery> } | undefined;

  async function fetchDiscovery(previous: Discovery | undefined): Promise<Discovery> {
    const url = `${config.issuerUrl.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const res = await providerRequest(label, url, { headers: { Accept: 'application/json' } }, timeoutMs);
    const doc = res.json;
    if (res.status !== 200 || !isObject(doc)) {
      throw badGateway(`Google's OpenID configuration could not be read (HTTP ${res.status}).`);
    }
    // OpenID Connect Discovery 4.3: the document's issuer must be exactly the one it was fetched for.
    if (doc.issuer !== config.issuerUrl) throw badGateway("Google's OpenID configuration names another issuer.");
    const authorizationEndpoint = httpUrl(doc.authorization_endpoint);
    const tokenEndpoint = httpUrl(doc.token_endpoint);
    const jwksUri = httpUrl(doc.jwks_uri);
    if (!authorizationEndpoint || !tokenEndpoint || !jwksUri) {
      throw badGateway("Google's OpenID configuration lacks an endpoint.");
    }
    const algorithms = (stringArray(doc.id_token_signing_alg_values_supported) ?? ['RS256']).filter((a) => ASYMMETRIC_ALG.test(a));
    if (algorithms.length === 0) throw badGateway("Google's OpenID configuration announces no usable ID token algorithm.");
    const authMethods = stringArray(doc.token_endpoint_auth_methods_supported) ?? ['client_secret_basic'];
    const clientAuth = authMethods.includes('client_secret_basic')
      ? 'client_secret_basic'
      : authMethods.includes('client_secret_post')
        ? 'client_secret_post'
        : undefined;
    if (!clientAuth) throw badGateway("Google's token endpoint accepts no client-secret authentication.");
    const jose = await loadJose();
    // Keep the key cache across refreshes of the document when the key set stays where it was.
    const jwks =
      previous && previous.jwksUri === jwksUri
        ? previous.jwks
        : jose.createRemoteJWKSet(new URL(jwksUri), { timeoutDuration: timeoutMs, headers: { Accept: 'application/json' } });
    return {
      issuer: config.issuerUrl,
      authorizationEndpoint,
      tokenEndpoint,
      jwks,
      jwksUri,
      algorithms,
      clientAuth,
      issParameterSupported: doc.authorization_response_iss_parameter_supported === true,
    };
  }

  async function discovery(): Promise<Discovery> {
    const now = Date.now();
    if (cached && now - cached.at < DISCOVERY_TTL_MS) return cached.discovery;
    const previous = cached ? await cached.discovery.catch(() => undefined) : undefined;
    const entry = { at: now, discovery: fetchDiscovery(previous) };
    cached = entry;
    // A failed fetch is not kept: the next sign-in tries again.
    entry.discovery.catch(() => {
      if (cached === entry) cached = undefined;
    });
    return entry.discovery;
  }

  async function exchangeCode(d: Discovery, exchange: CodeExchange): Promise<string> {
    const form = new URLSearchParams({
      grant_type: 'authorization_code',
      code: exchange.code,
      redirect_uri: exchange.redirectUri,
      code_verifier: exchange.codeVerifier,
    });
    const headers: Record<string, string> = { Accept: 'application/json', 'Content-Type': 'application/x-www-form-urlencoded' };
    if (d.clientAuth === 'client_secret_basic') {
      // RFC 6749 2.3.1: id and secret are form-encoded before the Basic encoding.
      const pair = `${encodeURIComponent(config.clientId)}:${encodeURIComponent(config.clientSecret)}`;
      headers.Authorization = `Basic ${Buffer.from(pair).toString('base64')}`;
    } else {
      form.set('client_id', config.clientId);
      form.set('client_secret', config.clientSecret);
    }
    const res = await providerRequest(label, d.tokenEndpoint, { method: 'POST', headers, body: form.toString() }, timeoutMs);
    const body = tokenResponseOrThrow(label, res);
    if (typeof body.id_token !== 'string' || body.id_token === '') {
      throw badGateway('Google answered the token request without an ID token.');
    }
    return body.id_token;
  }

  async function verifyIdToken(d: Discovery, idToken: string, expectedNonce: string): Promise<Jose.JWTPayload> {
    const jose = await loadJose();
    let payload: Jose.JWTPayload;
    try {
      ({ payload } = await jose.jwtVerify(idToken, d.jwks, {
        issuer: d.issuer === GOOGLE_ISSUER ? [GOOGLE_ISSUER, 'accounts.google.com'] : d.issuer,
        audience: config.clientId,
        algorithms: d.algorithms,
        requiredClaims: ['iss', 'aud', 'sub', 'exp', 'iat'],
        currentDate: clock.now(),
        clockTolerance: 60,
      }));
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      if (code === 'ERR_JWKS_TIMEOUT' || !code.startsWith('ERR_')) {
        throw badGateway("Google's signing keys could not be fetched; try again later.");
      }
      throw badGateway(`Google's ID token failed verification (${(err as Error).message}).`);
    }
    // OpenID Connect Core 3.1.3.7: an authorized party, when present, must be us.
    if (payload.azp !== undefined && payload.azp !== config.clientId) {
      throw badGateway("Google's ID token failed verification (it was issued to another client).");
    }
    if (typeof payload.nonce !== 'string' || !safeEqual(payload.nonce, expectedNonce)) {
      throw badRequest('The ID token does not belong to this sign-in (nonce mismatch); start the sign-in again.');
    }
    return payload;
  }

  return {
    name: 'google',
    label,
    usesNonce: true,

    async authorizationUrl(request: AuthorizationRequest): Promise<string> {
      const d = await discovery();
      const url = new URL(d.authorizationEndpoint);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: config.clientId,
        redirect_uri: request.redirectUri,
        scope: GOOGLE_SCOPES,
        state: request.state,
        nonce: request.nonce!,
        code_challenge: request.codeChallenge,
        code_challenge_method: 'S256',
      }).toString();
      return url.toString();
    },

    async identityFor(exchange: CodeExchange): Promise<ProviderIdentity> {
      const d = await discovery();
      // RFC 9207: the authorization response names its issuer; a mix-up with another provider is refused.
      if (exchange.iss !== undefined ? exchange.iss !== d.issuer : d.issParameterSupported) {
        throw badRequest('The authorization response comes from another issuer; start the sign-in again.');
      }
      const idToken = await exchangeCode(d, exchange);
      const claims = await verifyIdToken(d, idToken, exchange.nonce ?? '');
      if (claims.email_verified !== true) {
        throw forbidden('Google has not verified the e-mail address of this account, so it cannot be used to sign in.');
      }
      const { value: address, error } = emailRule().validate(claims.email);
      if (typeof claims.email !== 'string' || error) throw badGateway("Google's ID token carries no valid e-mail address.");
      const name = typeof claims.name === 'string' && claims.name.trim() ? claims.name : (address as string).split('@')[0];
      return { provider: 'google', subject: claims.sub!, email: address as string, name };
    },
  };
}
