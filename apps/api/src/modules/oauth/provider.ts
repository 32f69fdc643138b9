// What the sign-in flow needs from a provider: where to send the browser, and a verified identity for the code
// it sends back. Each provider refuses (403) an identity whose e-mail address it has not verified.

export const PROVIDER_NAMES = ['github', 'google'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

export function isProviderName(value: string): value is ProviderName {
  return (PROVIDER_NAMES as readonly string[]).includes(value);
}

/** A person as the provider vouches for them. The e-mail is lowercased and verified by the provider. */
export interface ProviderIdentity {
  provider: ProviderName;
  /** The provider's stable account id (GitHub's numeric user id, Google's `sub`). */
  subject: string;
  email: string;
  name: string;
}

export interface AuthorizationRequest {
  state: string;
  codeChallenge: string;
  /** OpenID Connect providers only. */
  nonce?: string;
  redirectUri: string;
  /** Scopes to ask for instead of the sign-in ones (a personal source connection). */
  scope?: string;
}

export interface CodeExchange {
  code: string;
  codeVerifier: string;
  nonce?: string;
  redirectUri: string;
  /** The `iss` parameter of the authorization response (RFC 9207), when the provider sent one. */
  iss?: string;
}

export interface OAuthProvider {
  name: ProviderName;
  /** For messages: "GitHub", "Google". */
  label: string;
  usesNonce: boolean;
  authorizationUrl(request: AuthorizationRequest): Promise<string>;
  identityFor(exchange: CodeExchange): Promise<ProviderIdentity>;
  /** Source hosts only: the account and the access token a personal connection keeps. */
  sourceAccountFor?(exchange: CodeExchange): Promise<SourceAccount>;
}

/** A personal source-host account: the provider's token (to be sealed at once) and the scopes it was granted. */
export interface SourceAccount {
  subject: string;
  login: string;
  accessToken: string;
  scopes: string[];
}
