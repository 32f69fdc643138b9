// Requests from the API to an OAuth provider (token exchange, user info, discovery). Each has a timeout, follows
// no redirect, and maps what can go wrong to the error envelope: the provider unreachable or answering
// something malformed is 502; a refusal the browser's request caused (a bad or reused code) is 400.
import type * as Jose from 'jose' with { 'resolution-mode': 'import' };
import { HttpError } from '../../http/errors';

export type { Jose };

let loadingJose: Promise<typeof Jose> | undefined;

/** jose 6 is ESM-only: loaded with a dynamic import, once (works under plain Node and jest's VM modules). */
export function loadJose(): Promise<typeof Jose> {
  loadingJose ??= import('jose');
  return loadingJose;
}

export const badGateway = (detail: string) => new HttpError(502, detail);

export interface ProviderResponse {
  status: number;
  /** The parsed JSON body, or undefined when the body was not JSON. */
  json: unknown;
}

const MAX_BODY_BYTES = 1024 * 1024;

export async function providerRequest(
  label: string,
  url: string,
  init: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string },
  timeoutMs: number,
): Promise<ProviderResponse> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: init.method ?? 'GET',
      headers: init.headers,
      body: init.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const reason = err instanceof Error && err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : 'connection failed';
    throw badGateway(`${label} could not be reached (${reason}); try again later.`);
  }
  const declaredLength = Number(response.headers.get('content-length') ?? 0);
  if (declaredLength > MAX_BODY_BYTES) throw badGateway(`${label} sent an oversized response.`);
  let text: string;
  try {
    text = await response.text();
  } catch {
    throw badGateway(`${label} could not be reached (the response was cut off); try again later.`);
  }
  if (text.length > MAX_BODY_BYTES) throw badGateway(`${label} sent an oversized response.`);
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, json };
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An OAuth error response (RFC 6749 5.2) in a few words for a detail: `invalid_grant: Code expired`. */
export function oauthErrorText(body: unknown): string | undefined {
  if (!isObject(body) || typeof body.error !== 'string') return undefined;
  const description = typeof body.error_description === 'string' ? `: ${body.error_description.slice(0, 200)}` : '';
  return `${body.error.slice(0, 100)}${description}`;
}

// Refusals of the code itself (wrong, expired, already used, or bound to another PKCE verifier): the browser's
// request was bad. Any other refusal (invalid_client, incorrect_client_credentials, redirect_uri_mismatch...) means
// this server's provider settings are wrong.
const CODE_REFUSALS = new Set(['invalid_grant', 'bad_verification_code']);

/**
 * The token endpoint's answer to a code exchange, or the fitting error: a refused code -> 400; a refused client,
 * or anything else that is not a 200 JSON object -> 502.
 */
export function tokenResponseOrThrow(label: string, res: ProviderResponse): Record<string, unknown> {
  const refusal = oauthErrorText(res.json);
  // GitHub answers refusals with 200 and an `error` field; standard servers with 400/401 and the same body.
  if (refusal && (res.status === 200 || (res.status >= 400 && res.status < 500))) {
    if (CODE_REFUSALS.has((res.json as { error: string }).error)) {
      throw new HttpError(400, `${label} refused the authorization code (${refusal}); start the sign-in again.`);
    }
    throw badGateway(`${label} refused this server's sign-in client (${refusal}); the provider settings need fixing.`);
  }
  if (res.status !== 200 || !isObject(res.json)) {
    throw badGateway(`${label} answered the token request with an unexpected response (HTTP ${res.status}).`);
  }
  return res.json;
}
