// Idempotency-Key (issue 37; IETF draft "The Idempotency-Key HTTP Header Field", Stripe's behaviour): the rules the
// API applies to a request carrying the header. Pure: the API stores the rows, the worker sweeps them.

export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';
/** Set on an answer that is a stored response answered again. */
export const IDEMPOTENT_REPLAYED_HEADER = 'Idempotent-Replayed';
/** A key answers its first response again for 24 hours after that request arrived, then it is forgotten. */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 3600 * 1000;
/**
 * A request whose instance died mid-way (no response stored, no release) holds its key at most this long after the
 * lock's last renewal; then a retry with the same request takes it over.
 */
export const IDEMPOTENCY_LOCK_TIMEOUT_MS = 60 * 1000;
/**
 * While its request runs, the instance holding a key renews its lock this often: a request that runs longer than the
 * lock timeout (waiting for a row lock, say) keeps its key, and a retry answers 409 instead of running it twice.
 */
export const IDEMPOTENCY_LOCK_RENEWAL_MS = 5 * 1000;
export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

/** 1 to 255 printable ASCII characters (space to tilde). */
export function isValidIdempotencyKey(key: string): boolean {
  return key.length >= 1 && key.length <= IDEMPOTENCY_KEY_MAX_LENGTH && /^[\x20-\x7e]+$/.test(key);
}

/**
 * Methods HTTP defines as idempotent (RFC 9110 section 9.2.2): retrying them is already safe, so a key sent with
 * them is ignored (generic clients that add one to every request keep working).
 */
export function methodIgnoresIdempotencyKey(method: string): boolean {
  return ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'].includes(method.toUpperCase());
}

/**
 * Which outcomes are kept for replay. A 4xx is the request's answer (a retry would get it again, so it is stored, as
 * Stripe does); a 5xx may be transient (an outage, a bug being fixed): it is not stored and the key is released, so
 * the client can retry with the same key. So are a 401 (the credential, not the request: a session that ended while
 * the request ran must not leave its refusal to the user's other sessions) and a 429 (a limit that passes: the login
 * limit counting a current_password, raised after the key was taken), and a 4xx that asks to be sent again
 * (`retryAfter`: a Retry-After header, as a 409 for a transaction PostgreSQL rolled back to break a deadlock has;
 * a 2xx with one, "accepted, poll later", is still the request's answer).
 */
export function idempotentOutcomeIsStored(status: number, retryAfter = false): boolean {
  return status < 500 && status !== 401 && status !== 429 && !(retryAfter && status >= 400);
}

export interface StoredIdempotencyKey {
  requestHash: string;
  state: 'in_flight' | 'completed';
}

export type IdempotencyVerdict = 'replay' | 'different_request' | 'in_flight';

/**
 * What a request answers when its key is already taken by a live row (the claim did not win it): a different
 * request under the key is 422 whatever the row's state, then an unfinished first request is 409, else the replay.
 */
export function judgeTakenKey(row: StoredIdempotencyKey, requestHash: string): IdempotencyVerdict {
  if (row.requestHash !== requestHash) return 'different_request';
  return row.state === 'completed' ? 'replay' : 'in_flight';
}
