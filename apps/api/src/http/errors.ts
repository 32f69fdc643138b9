// The error envelope of SPEC ("Errors"): every error body is { detail } (plus `code` where SPEC says so).
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from '@svc/config';
import { isDatabaseUnavailable, isForeignKeyViolation, isTransactionConflict } from '@svc/db';
import { isRecipientRefused } from '@svc/mail';
import { isRedisUnavailable } from '@svc/queue';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'HttpError';
  }
}

export const badRequest = (detail: string) => new HttpError(400, detail);
export const unauthorized = (detail = 'Authentication required.') => new HttpError(401, detail);
export const forbidden = (detail: string, extra: Record<string, unknown> = {}) => new HttpError(403, detail, extra);
export const notFound = (what = 'Resource') => new HttpError(404, `${what} not found.`);

/**
 * `check`, with its 404 answered as `what`'s: a thing read through something the caller may not name (a finding
 * through its assessment, a report through its assessment, a PR review through its project) is simply not found.
 */
export async function notFoundAs<T>(what: string, check: Promise<T>): Promise<T> {
  try {
    return await check;
  } catch (err) {
    if (err instanceof HttpError && err.status === 404) throw notFound(what);
    throw err;
  }
}
export const conflict = (detail: string) => new HttpError(409, detail);
export const unprocessable = (detail: string) => new HttpError(422, detail);
export const tooManyRequests = (retryAfterSeconds: number) =>
  new HttpError(429, `Rate limit exceeded. Retry after ${retryAfterSeconds}s.`, {}, { 'Retry-After': String(retryAfterSeconds) });

/** Seconds a client is told to wait when a backing service is down (long enough for a restart or failover). */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

export const serviceUnavailable = (what: string) =>
  new HttpError(503, `Service temporarily unavailable: ${what} cannot be reached. Retry after ${OUTAGE_RETRY_AFTER_SECONDS}s.`, {}, {
    'Retry-After': String(OUTAGE_RETRY_AFTER_SECONDS),
  });

/** A write that waited WRITE_TURN_TIMEOUT_MS for its turn (organization-turns.ts) without getting one: nothing ran. */
export const noTurnInTime = () =>
  new HttpError(
    503,
    `Service temporarily unavailable: too many changes are waiting on this server (behind a deletion that is still running); this one did not start and nothing was changed. Retry after ${OUTAGE_RETRY_AFTER_SECONDS}s.`,
    {},
    { 'Retry-After': String(OUTAGE_RETRY_AFTER_SECONDS) },
  );

/**
 * A write whose client went away while it waited for its turn: it left the line, nothing ran. Nobody reads the answer,
 * but its Idempotency-Key must stay free for the client's retry: a 503 with Retry-After is never kept as the key's.
 */
export const abandonedBeforeItsTurn = () =>
  new HttpError(503, 'The client went away before this change started; nothing was changed.', {}, { 'Retry-After': '0' });

/**
 * The answer to a request whose mail could not be sent: 422 when the mail server refused the address for good (the
 * client must change it; retrying the same request would fail the same way), else 503 (try again later).
 */
export function mailNotSent(err: unknown): HttpError {
  return isRecipientRefused(err)
    ? unprocessable('The mail server refused the e-mail address (it does not exist, or does not take mail from this service): check it.')
    : serviceUnavailable('the mail server');
}

/** A PostgreSQL or Redis outage is a 503 the client may retry, not a 500. */
function fromOutage(err: unknown): HttpError | undefined {
  if (isDatabaseUnavailable(err)) return serviceUnavailable('the database');
  if (isRedisUnavailable(err)) return serviceUnavailable('Redis');
  return undefined;
}

/**
 * A write whose parent row was deleted while it ran (the foreign key refused it; its transaction rolled back): the
 * client lost a race with a deletion, not a server fault.
 */
function fromRace(err: unknown): HttpError | undefined {
  if (!isForeignKeyViolation(err)) return undefined;
  return new HttpError(409, 'Something this request refers to was deleted while it ran; nothing was changed. Read it again.');
}

/**
 * A transaction PostgreSQL rolled back to break a deadlock with another request's (or a serialization failure): the
 * client collided with a concurrent change, and the same request sent again goes through.
 */
function fromCollision(err: unknown): HttpError | undefined {
  if (!isTransactionConflict(err)) return undefined;
  return new HttpError(409, COLLISION_DETAIL, {}, { 'Retry-After': '1' });
}

export const COLLISION_DETAIL = 'This request collided with a concurrent change to the same data; its last step was rolled back. Send it again.';

export const missingScope = (scope: string) => forbidden(`Missing required scope: ${scope}.`);

export const unknownRoute: RequestHandler = (req, _res, next) => {
  next(new HttpError(404, `No route for ${req.method} ${req.path}.`));
};

/** body-parser and other http-errors carry `status`/`type`; map the ones a client can cause to 4xx. */
function fromClientError(err: { status?: number; type?: string; message?: string }): HttpError | undefined {
  switch (err.type) {
    case 'entity.parse.failed':
      return new HttpError(400, 'Malformed JSON body.');
    case 'entity.too.large':
      return new HttpError(413, 'Request body too large.');
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new HttpError(415, 'Unsupported body encoding.');
    case 'request.aborted':
      return new HttpError(400, 'Request aborted.');
  }
  if (typeof err.status === 'number' && err.status >= 400 && err.status < 500) {
    return new HttpError(err.status, err.message || 'Bad request.');
  }
  return undefined;
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) {
      // Part of the body is already on the wire (a streamed export failing midway): no envelope can follow.
      // Express's default handler destroys the connection, so the client sees a truncated response, not a 200.
      logger.error('Error after the response started', { error: err instanceof Error ? err.stack : String(err) });
      next(err);
      return;
    }
    const outage = err instanceof HttpError ? undefined : fromOutage(err);
    if (outage) logger.warn('Backing service unavailable', { status: 503, error: err instanceof Error ? err.message : String(err) });
    const collision = err instanceof HttpError || outage ? undefined : fromCollision(err);
    // Told to the operator: a collision that recurs is two code paths taking the same rows in opposite orders.
    if (collision) logger.warn('Transaction rolled back by PostgreSQL (deadlock or serialization failure)', { method: req.method, route: req.route?.path, error: err instanceof Error ? err.message : String(err) });
    const httpError = err instanceof HttpError ? err : (outage ?? fromRace(err) ?? collision ?? fromClientError(err));
    if (!httpError) {
      logger.error('Unhandled error', { error: err instanceof Error ? err.stack : String(err) });
      res.status(500).json({ detail: 'Internal server error.' });
      return;
    }
    // SPEC: the body is exactly { detail }, plus `code` where SPEC or docs/api.md names one (EMAIL_NOT_VERIFIED,
    // REAUTHENTICATION_REQUIRED, INVALID_CURRENT_PASSWORD, TOTP_REQUIRED).
    const code = typeof httpError.extra.code === 'string' ? { code: httpError.extra.code } : {};
    res.set(httpError.headers).status(httpError.status).json({ detail: httpError.detail, ...code });
  };
}
