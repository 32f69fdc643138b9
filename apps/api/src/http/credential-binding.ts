// The API side of "a stored credential belongs to the destination it was given for" (DESIGN, Trust boundaries):
// every route that can move a credential-bearing destination (issue trackers, subscriptions) refuses the move
// when a stored credential would follow it unsupplied. The rule itself is @svc/webhooks' credentialsLeftBehind.
import { credentialDestination, credentialsLeftBehind, sameCredentialDestination, type CredentialField } from '@svc/webhooks';
import { unprocessable } from './errors';

/** Where the stored credentials are bound now: the row's bound destination, or (a row not yet bound) its URL. */
export interface CurrentDestination {
  url: string;
  boundTo: string | null;
}

/**
 * 422 naming the credential field(s) when the request binds the credentials to another scheme, host or port than
 * the one they were given for without giving them again: a new `urlField`, or a credential given while another stays
 * stored (all are rebound to the URL's destination together). Compared with the bound destination, not the URL: a
 * URL that no longer matches it (moved behind the API) is not confirmed by a PATCH that repeats it.
 */
export function refuseCredentialLeftBehind(urlField: string, current: CurrentDestination, nextUrl: string | undefined, credentials: readonly CredentialField[]): void {
  const rebindsTo = nextUrl ?? (credentials.some((c) => c.supplied) ? current.url : undefined);
  const left = credentialsLeftBehind(current.boundTo ?? current.url, rebindsTo, credentials);
  if (left.length === 0 || rebindsTo === undefined) return;
  const needs = `needs ${left.join(', ')} again in the same request: a stored credential is only ever sent to the destination it was given for.`;
  if (current.boundTo === null || !sameCredentialDestination(current.url, rebindsTo)) {
    throw unprocessable(`Changing ${urlField} to another destination (scheme, host or port) ${needs}`);
  }
  // The request keeps the URL's destination: the URL was moved outside the API, away from the credentials. Saying
  // "changing" would blame a request that changed nothing; say where they are bound (the worker's disabled_reason does too).
  throw unprocessable(
    `The stored credentials were given for ${current.boundTo}, not for ${urlField}'s destination ${credentialDestination(current.url) ?? current.url} (changed outside the API): binding them there ${needs}`,
  );
}

/**
 * Audit metadata of stored credentials bound to another destination by the request (`from` null: not bound before).
 * A move of the URL shows as `destination_changed` too, but a URL moved outside the API and then confirmed with the
 * credentials given again moves only the binding: without this, the log would not show where they went.
 */
export function credentialsRebound(boundBefore: string | null, boundAfter: string | null, credentialsStored: boolean) {
  if (!credentialsStored || boundAfter === null || boundBefore === boundAfter) return {};
  return { credentials_rebound: { from: boundBefore, to: boundAfter } };
}

/** Audit metadata of a move to another destination (scheme://host:port only, never a path that may carry a token). */
export function destinationChange(currentUrl: string, nextUrl: string | undefined) {
  if (nextUrl === undefined || sameCredentialDestination(currentUrl, nextUrl)) return {};
  return { destination_changed: { from: credentialDestination(currentUrl), to: credentialDestination(nextUrl) } };
}
