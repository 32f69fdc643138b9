// A stored credential belongs to the destination it was given for: scheme, host and port (DESIGN, "Trust
// boundaries"). A path or query change keeps the destination; any other change needs the credential again in the
// same request, so nobody who never saw a credential can send it somewhere else by editing a URL.

/** The destination a credential is bound to, as `scheme://host:port` (default port filled in); null when unparsable. */
export function credentialDestination(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url.trim());
  } catch {
    return null;
  }
  if (parsed.host === '') return null;
  const hostname = parsed.hostname.endsWith('.') ? parsed.hostname.slice(0, -1) : parsed.hostname;
  const port = parsed.port || defaultPort(parsed.protocol);
  return `${parsed.protocol}//${hostname}:${port}`;
}

function defaultPort(protocol: string): string {
  if (protocol === 'https:') return '443';
  if (protocol === 'http:') return '80';
  return '';
}

/** Whether a credential given for `from` may be sent to `to` (an unparsable URL is never the same destination). */
export function sameCredentialDestination(from: string, to: string): boolean {
  const a = credentialDestination(from);
  return a !== null && a === credentialDestination(to);
}

export interface CredentialField {
  /** The request field that carries it (named in the refusal). */
  field: string;
  /** A value is stored now. */
  stored: boolean;
  /** The request gives it again, or removes it (null). */
  supplied: boolean;
}

/**
 * The credential fields a URL change would carry to another destination: stored, not supplied in the request. Empty
 * when the URL does not change destination (or is not in the request); the caller refuses the request otherwise.
 */
export function credentialsLeftBehind(currentUrl: string, nextUrl: string | undefined, credentials: readonly CredentialField[]): string[] {
  if (nextUrl === undefined || sameCredentialDestination(currentUrl, nextUrl)) return [];
  return credentials.filter((c) => c.stored && !c.supplied).map((c) => c.field);
}

/**
 * The worker's side: whether a credential bound to `boundTo` must not go to `url`. An unbound credential (null: a
 * row not yet bound at start-up) is not refused here; the API's rule kept it with its URL.
 */
export function credentialBoundElsewhere(boundTo: string | null, url: string): boolean {
  return boundTo !== null && boundTo !== credentialDestination(url);
}
