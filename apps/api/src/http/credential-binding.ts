// The API side of "a stored credential belongs to the destination it was given for" (DESIGN, Trust boundaries):
// every route that can move a credential-bearing destination (issue trackers, subscriptions) refuses the move
// when a stored credential would follow it unsupplied. The rule itself is @svc/webhooks' credentialsLeftBehind.
import { credentialDestination, credentialsLeftBehind, sameCredentialDestination, type CredentialField } from '@svc/webhooks';
import { unprocessable } from './errors';

/** 422 naming the credential field(s) when `urlField` moves to another scheme, host or port without them. */
export function refuseCredentialLeftBehind(urlField: string, currentUrl: string, nextUrl: string | undefined, credentials: readonly CredentialField[]): void {
  const left = credentialsLeftBehind(currentUrl, nextUrl, credentials);
  if (left.length === 0) return;
  throw unprocessable(
    `Changing ${urlField} to another destination (scheme, host or port) needs ${left.join(', ')} again in the same request: a stored credential is only ever sent to the destination it was given for.`,
  );
}

/** Audit metadata of a move to another destination (scheme://host:port only, never a path that may carry a token). */
export function destinationChange(currentUrl: string, nextUrl: string | undefined) {
  if (nextUrl === undefined || sameCredentialDestination(currentUrl, nextUrl)) return {};
  return { destination_changed: { from: credentialDestination(currentUrl), to: credentialDestination(nextUrl) } };
}
