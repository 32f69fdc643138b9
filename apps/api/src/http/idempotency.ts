// Idempotency-Key on the POST routes that create something (issue 37). Mounted by route.ts around validation:
// `checkIdempotencyKey` before it (is the header allowed here, well-formed; the request's hash over the body as
// sent), `claimIdempotencyKey` after it (a request that fails validation never takes a key, so the fixed request can
// be sent with the same key). The first request with a key runs the handler; its response (2xx or 4xx) is stored
// before it is sent, so any later request with that key finds it; a refusal that asks for the password is not (the
// request is sent again with it). The rules themselves are in @svc/domain.
import { createHash } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import {
  IDEMPOTENCY_KEY_HEADER,
  IDEMPOTENT_REPLAYED_HEADER,
  idempotentOutcomeIsStored,
  isValidIdempotencyKey,
  judgeTakenKey,
  methodIgnoresIdempotencyKey,
} from '@svc/domain';
import { canonicalJson } from '@svc/webhooks';
import type { AppDeps } from '../app-deps';
import {
  claimIdempotencyKey as claimRow,
  ANSWER_NOT_STORED,
  completeIdempotencyKey,
  releaseIdempotencyKey,
  type IdempotencyScope,
  type StoredResponse,
} from '../modules/idempotency/idempotency.store';
import type { HeldIdempotencyKeys, HeldKey } from '../modules/idempotency/held-keys';
import { HttpError, badRequest, unprocessable } from './errors';
import { REAUTHENTICATION_CODES, withoutCurrentPassword } from '../modules/auth/reauthentication';

/** What route.ts needs to know of a route to decide whether it takes the header. */
export interface IdempotencyRouteFacts {
  method: string;
  scope: string;
  status?: number;
  requestMediaType?: string;
  responseMediaType?: string;
  idempotent?: boolean;
  sudoMode?: boolean;
}

/**
 * The rule: an authenticated POST that answers 201 or 202 with a JSON body creates something and takes the header;
 * a route says `idempotent: true` (a create that answers 200 for an existing row) or `false` to override it.
 * Uploads (a streamed body the API does not keep) never do.
 */
export function takesIdempotencyKey(route: IdempotencyRouteFacts): boolean {
  if (route.requestMediaType || route.responseMediaType || route.scope === 'public' || route.method !== 'post') return false;
  return route.idempotent ?? (route.status === 201 || route.status === 202);
}

interface PendingKey {
  key: string;
  requestHash: string;
  /** A sudo-mode route: a session's keys are its own (scopeOf). */
  perSession: boolean;
}

const pending = new WeakMap<Request, PendingKey>();
/** Responses answered (res.json called) whose sending waits for the outcome to be stored. */
const held = new WeakSet<Response>();

/** The handler already answered: its response goes out once stored (route.ts must not answer again meanwhile). */
export const answerIsHeld = (res: Response): boolean => held.has(res);

/** The Idempotency-Key header, or undefined; two of them are a 400 (Node would join them into one value). */
function headerValue(req: Request): string | undefined {
  const lower = IDEMPOTENCY_KEY_HEADER.toLowerCase();
  if (req.headers[lower] === undefined) return undefined;
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === lower) count += 1;
  if (count > 1) throw badRequest(`Send one ${IDEMPOTENCY_KEY_HEADER} header, not ${count}.`);
  return count === 1 ? (req.headers[lower] as string) : undefined;
}

/**
 * Method, path with query, and the body as the client sent it (before defaults are filled in), canonically. Without
 * `current_password`: a password never goes into a stored hash (it could be guessed offline from the rest of the
 * body), and a request sent again with the password that a refusal asked for is the same request.
 */
function requestHash(req: Request): string {
  return createHash('sha256')
    .update(`${req.method} ${req.originalUrl}\n`)
    .update(canonicalBody(req))
    .digest('hex');
}

/**
 * The body canonically, or 400: JSON.parse reads a number past double range (1e400) as Infinity, which canonical
 * JSON refuses, and a body nested thousands deep overflows the stack. No route's schema accepts either, but the hash
 * is taken before validation: without this they answered 500 when the header was sent.
 */
function canonicalBody(req: Request): string {
  try {
    return canonicalJson(withoutCurrentPassword(req.body ?? null));
  } catch {
    throw badRequest('Invalid body: a number out of range, or nesting too deep.');
  }
}

/** A refusal that asks the caller to prove who they are (reauthentication.ts): the retry with the proof must run. */
function asksToReauthenticate(body: unknown): boolean {
  const code = body !== null && typeof body === 'object' ? (body as { code?: unknown }).code : undefined;
  return typeof code === 'string' && REAUTHENTICATION_CODES.includes(code);
}

/** Before validation: refuses the header where it means nothing, checks its format, hashes the request. */
export function checkIdempotencyKey(route: IdempotencyRouteFacts): RequestHandler {
  const supported = takesIdempotencyKey(route);
  return (req, _res, next) => {
    const key = headerValue(req);
    if (key === undefined || methodIgnoresIdempotencyKey(req.method)) return next();
    if (!supported) {
      if (route.requestMediaType) {
        throw badRequest(
          `${IDEMPOTENCY_KEY_HEADER} is not accepted on uploads (the streamed body is not kept to compare a retry with); ` +
            'uploading the same bytes again answers the stored archive with duplicate: true.',
        );
      }
      throw badRequest(
        `${IDEMPOTENCY_KEY_HEADER} is not supported on ${req.method} ${req.originalUrl.split('?')[0]}: only the requests that create something take it.`,
      );
    }
    if (!isValidIdempotencyKey(key)) {
      throw badRequest(`${IDEMPOTENCY_KEY_HEADER} must be 1 to 255 printable ASCII characters.`);
    }
    pending.set(req, { key, requestHash: requestHash(req), perSession: route.sudoMode === true });
    next();
  };
}

/**
 * Whose keys these are: an API key's, else the user's (every session of the user: a retry from another tab or
 * device). On a sudo-mode route a session's own: a replay skips the handler and its password check, so a key taken
 * by a fresh session must not answer an old one (perhaps stolen) of the same user with what it created.
 */
function scopeOf(req: Request, asked: PendingKey): IdempotencyScope {
  const p = req.principal!;
  const credential = p.apiKeyId ? `key:${p.apiKeyId}` : asked.perSession ? `session:${p.sessionId}` : `user:${p.userId}`;
  return { organizationId: p.organizationId, credential, key: asked.key };
}

function replay(res: Response, stored: StoredResponse): void {
  res.set(IDEMPOTENT_REPLAYED_HEADER, 'true').status(stored.status);
  if (stored.body === null) res.end();
  else res.json(stored.body);
}

/**
 * Stores the outcome before the response leaves: res.json (the route's answer or the error handler's envelope)
 * waits for the row. A response without a JSON body (204) is stored when it finishes. A client that hangs up early
 * changes nothing: the handler still answers, into the void, and that answer is stored for its retry.
 */
function storeOutcomeOf(deps: AppDeps, res: Response, scope: IdempotencyScope, lockToken: string, key: HeldKey): void {
  const send = res.json.bind(res);
  let settled = false;
  const settle = async (status: number, body: unknown): Promise<void> => {
    settled = true;
    const store = idempotentOutcomeIsStored(status, res.get('Retry-After') !== undefined) && !asksToReauthenticate(body)
      ? async () => {
          const stored = await completeIdempotencyKey(deps.prisma, scope, lockToken, { status, body }, deps.config.encryptionKey);
          if (!stored) {
            deps.logger.warn(ANSWER_NOT_STORED, { status });
          }
        }
      : () => releaseIdempotencyKey(deps.prisma, scope, lockToken);
    // The response goes out either way. Not stored, the key stays locked (a retry answers 409) and the outcome is
    // stored again with the next renewals: while this process lives, no retry takes the key over and runs it again.
    const failed = await key.settle(store);
    if (failed) {
      deps.logger.warn('Could not record the outcome of an idempotent request; trying again with the lock renewals', {
        status,
        error: failed.message,
      });
    }
  };
  res.json = (body: unknown) => {
    if (settled) return send(body);
    held.add(res);
    void settle(res.statusCode, body).then(() => {
      try {
        send(body);
      } catch (err) {
        deps.logger.error('Could not send the response of an idempotent request', { error: err instanceof Error ? err.stack : String(err) });
      }
    });
    return res;
  };
  res.once('finish', () => {
    if (!settled) void settle(res.statusCode, null);
  });
  // Ended but never flushed (the client had gone): answered all the same.
  res.once('close', () => {
    if (!settled && res.writableEnded) void settle(res.statusCode, null);
  });
}

/** After validation: takes the key (first request), or answers the replay, 409 or 422. */
export function claimIdempotencyKey(deps: AppDeps, heldKeys: HeldIdempotencyKeys): RequestHandler {
  return async (req, res, next) => {
    const asked = pending.get(req);
    if (!asked) return next();
    const scope = scopeOf(req, asked);
    const claim = await claimRow(deps.prisma, scope, asked.requestHash, deps.clock.now(), deps.config.encryptionKey);
    if (claim.won) {
      storeOutcomeOf(deps, res, scope, claim.lockToken, heldKeys.hold(scope, claim.lockToken));
      return next();
    }
    switch (judgeTakenKey(claim.row, asked.requestHash)) {
      case 'different_request':
        throw unprocessable(`${IDEMPOTENCY_KEY_HEADER} was already used with a different request (method, path or body); use a new key.`);
      case 'in_flight':
        throw new HttpError(409, `A request with this ${IDEMPOTENCY_KEY_HEADER} is still being processed; retry it later.`, {}, {
          'Retry-After': '1',
        });
      case 'replay':
        replay(res, claim.row.response!);
        return;
    }
  };
}
