// The `data` of an operational event (webhook.subscription_failing and the others, events.ts): what a person or a
// SIEM needs to find the subscription and see what went wrong, and nothing that opens it. A URL's path and query can
// be a credential (a Slack or Teams webhook URL is one), so only its host is carried; never a secret, an
// Authorization value or an e-mail target's recipients.

/** The subscription (or notification target) an operational event is about, as its row has it. */
export interface OperationalSubject {
  id: string;
  kind: string;
  level: string;
  projectId: string | null;
  assessmentId: string | null;
  url: string;
}

const MAX_ERROR_LENGTH = 500;

/** The host (and port) of a URL; null for no URL (an e-mail target) or one that does not parse. */
export function urlHostOf(url: string): string | null {
  try {
    const host = new URL(url).host;
    return host === '' ? null : host;
  } catch {
    return null;
  }
}

/**
 * An attempt's error as an operational event carries it: one line, bounded, with any URL in it cut to its origin
 * (a transport error may quote the address it called, and the path may hold a token).
 */
export function operationalErrorText(error: string | null | undefined): string | null {
  if (error === null || error === undefined || error.trim() === '') return null;
  const oneLine = error.replace(/[\r\n]+/g, ' ').trim();
  const withoutPaths = oneLine.replace(/\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#'"<>]+)[^\s'"<>]*/gi, '$1$2');
  return withoutPaths.length > MAX_ERROR_LENGTH ? `${withoutPaths.slice(0, MAX_ERROR_LENGTH - 1)}…` : withoutPaths;
}

/** The fields every operational event's data has, then the event's own (`extra`). */
export function operationalEventData(
  subject: OperationalSubject,
  lastError: string | null | undefined,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    subscription_id: subject.id,
    subscription_kind: subject.kind,
    level: subject.level,
    project_id: subject.projectId,
    assessment_id: subject.assessmentId,
    url_host: subject.kind === 'email' ? null : urlHostOf(subject.url),
    last_error: operationalErrorText(lastError),
    ...extra,
  };
}
