// Who the receiver is told we are. A microsoft_sentinel subscription with Entra ID credentials sends a bearer token
// (shared cache, see entra-token.ts); a 401 drops that token and the request goes once more with a fresh one, in the
// same attempt. Every other subscription sends its static Authorization value, already among the delivery headers.
import type { WebhookSubscription } from '@svc/db';
import { TokenError, type EntraTokens } from './entra-token';
import type { HttpResult } from './post';

/** Sends the request with these headers added (they win over the delivery headers). */
export type SendWithHeaders = (extraHeaders: Record<string, string>) => Promise<HttpResult>;

export type AuthorizedResult = { result: HttpResult } | { tokenError: string };

type AuthSubscription = Pick<WebhookSubscription, 'id' | 'payloadFormat' | 'azureCredentialsEnc'>;

export function usesEntraToken(subscription: AuthSubscription): subscription is AuthSubscription & { azureCredentialsEnc: string } {
  return subscription.payloadFormat === 'microsoft_sentinel' && subscription.azureCredentialsEnc !== null;
}

export async function sendAuthorized(tokens: EntraTokens, subscription: AuthSubscription, send: SendWithHeaders): Promise<AuthorizedResult> {
  if (!usesEntraToken(subscription)) return { result: await send({}) };
  const credentials = subscription.azureCredentialsEnc;
  try {
    const first = await tokens.token(subscription.id, credentials);
    const result = await send({ Authorization: `Bearer ${first.accessToken}` });
    if (result.response?.status !== 401) return { result };
    await tokens.drop(subscription.id, credentials, first);
    const fresh = await tokens.token(subscription.id, credentials);
    return { result: await send({ Authorization: `Bearer ${fresh.accessToken}` }) };
  } catch (err) {
    if (err instanceof TokenError) return { tokenError: err.message };
    throw err;
  }
}
