// Routes are declared as data: method, path, the scope they require (or `public`), their joi schemas and a
// handler. One place mounts them, so every route gets authentication, rate limiting, its scope check and
// validation in the same order, and the list can be inspected (OpenAPI, tests that every route has a scope).
import { Router, type Request, type RequestHandler, type Response } from 'express';
import type Joi from 'joi';
import { hasScope } from '@svc/scopes';
import type { AppDeps } from '../app-deps';
import { ApiKeyCache, authenticate } from '../auth/authenticate';
import type { RateLimiters } from './rate-limit';
import { clientAddressKey, consumeOneOf } from './rate-limit';
import { missingScope } from './errors';
import { validate, type RequestSchemas } from './validate';
import { answerIsHeld, checkIdempotencyKey, claimIdempotencyKey, takesIdempotencyKey } from './idempotency';
import { HeldIdempotencyKeys } from '../modules/idempotency/held-keys';
import { abandonedSignal, offerTurnTo, turnsFor, type OrganizationTurns } from './organization-turns';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The `:id` of a route's path (validated by the route's params schema before the handler runs). */
export const idParam = (req: { params: Record<string, unknown> }): string => req.params.id as string;

export interface RouteSpec {
  method: HttpMethod;
  path: string;
  /** The scope a principal needs, or 'public' for routes that take no credential. */
  scope: string | 'public';
  summary: string;
  schemas?: RequestSchemas;
  /** Status of a successful response carrying a body (default 200); a handler returning undefined answers 204. */
  status?: number;
  /** Shape of the success body: documented in OpenAPI and, under NODE_ENV=test, checked on every response. */
  response?: Joi.Schema;
  /** Media type of a raw request body the handler streams itself (an upload); no JSON parsing happens for it. */
  requestMediaType?: string;
  /** Media type of a non-JSON success body (a PDF, a CSV export...); such handlers write the response themselves. */
  responseMediaType?: string;
  /**
   * Whether the route takes an Idempotency-Key (http/idempotency.ts). Left out, the rule decides: an authenticated
   * POST answering 201 or 202 creates something and takes it. Set it only to override the rule.
   */
  idempotent?: boolean;
  /**
   * Marks a sudo-mode route, whose service calls reauthentication.ts confirmSensitiveChange: an old session confirms
   * the change with the password. The flag does not do the asking; what it changes is that the route's
   * Idempotency-Keys (where it takes them) belong to the session, not to every session of the user
   * (http/idempotency.ts scopeOf), because a replay skips the password check.
   */
  sudoMode?: boolean;
  /**
   * Concurrent requests of this route share their statements (a Coalescer: one statement of each kind in flight,
   * whatever the number of requests), so a burst of them holds a connection or two, not one each: they run without
   * taking one of their organization's turns (http/organization-turns.ts).
   */
  sharesStatements?: boolean;
  handler: (req: Request, res: Response) => unknown | Promise<unknown>;
}

function requireScope(scope: string): RequestHandler {
  return (req, _res, next) => {
    if (!req.principal || !hasScope(req.principal.scopes, scope)) throw missingScope(scope);
    next();
  };
}

function rateLimitPrincipal(limiters: RateLimiters): RequestHandler {
  return async (req, _res, next) => {
    const p = req.principal!;
    await consumeOneOf(limiters.request, p.apiKeyId ? `key:${p.apiKeyId}` : `ses:${p.sessionId}`);
    next();
  };
}

function rateLimitClient(limiters: RateLimiters): RequestHandler {
  return async (req, _res, next) => {
    await consumeOneOf(limiters.request, clientAddressKey(req.ip));
    next();
  };
}

/** In tests, a body that differs from the documented response shape fails loudly (the OpenAPI cannot drift). */
function checkDocumentedShape(spec: RouteSpec, body: unknown): void {
  if (!spec.response) {
    throw new Error(`${spec.method.toUpperCase()} ${spec.path} returned a JSON body but documents no response shape`);
  }
  const { error } = spec.response.validate(body, { presence: 'required', convert: false });
  if (error) {
    throw new Error(`Response of ${spec.method.toUpperCase()} ${spec.path} differs from its documented shape: ${error.message}`);
  }
}

/**
 * A write of an authenticated caller runs in one of its organization's turns (http/organization-turns.ts). Not an
 * upload: its body streams for as long as the client sends it, with no connection held until its short record at
 * the end, and a turn held meanwhile would hold up the organization's other writes instead.
 */
function takesTurns(spec: RouteSpec): boolean {
  return writes(spec) && !spec.sharesStatements && !spec.requestMediaType;
}

/** A write of an authenticated caller. */
function writes(spec: RouteSpec): boolean {
  return spec.method !== 'get' && spec.scope !== 'public';
}

/**
 * The route's handler, run in one of its organization's turns when it takes them, or offered a later one: its
 * statements that may wait for row locks take a turn of their own (inTurnOf). A public route's in the organization
 * its token names (a shared report's view counted on its share, an invitation's acceptance claiming it).
 */
function handlerInTurns(spec: RouteSpec, turns: OrganizationTurns): RouteSpec['handler'] {
  if (takesTurns(spec)) return (req, res) => turns.run(req.principal!.organizationId, async () => spec.handler(req, res), abandonedSignal(req, res));
  // A signed-in caller's read waits for no row lock: no later turn to offer (nothing is stored for it per request).
  if (!writes(spec) && spec.scope !== 'public') return (req, res) => spec.handler(req, res);
  return (req, res) => {
    offerTurnTo(req, turns, req.principal?.organizationId, () => abandonedSignal(req, res));
    return spec.handler(req, res);
  };
}

function respond(spec: RouteSpec, checkResponses: boolean, turns: OrganizationTurns): RequestHandler {
  const handle = handlerInTurns(spec, turns);
  return async (req, res) => {
    const body = await handle(req, res);
    if (res.headersSent || answerIsHeld(res)) return;
    if (body === undefined) {
      res.status(204).end();
      return;
    }
    if (checkResponses) checkDocumentedShape(spec, JSON.parse(JSON.stringify(body)));
    res.status(spec.status ?? 200).json(body);
  };
}

export function mountRoutes(
  router: Router,
  specs: RouteSpec[],
  deps: AppDeps,
  limiters: RateLimiters,
  keyCache = new ApiKeyCache(deps.config.apiKeyCacheTtlSeconds * 1000),
  heldKeys = new HeldIdempotencyKeys(deps.idempotencyPool, deps.clock, deps.logger),
  turns = turnsFor(deps.config),
): Router {
  const authenticated = authenticate(deps, keyCache);
  for (const spec of specs) {
    const chain: RequestHandler[] =
      spec.scope === 'public'
        ? [rateLimitClient(limiters)]
        : [authenticated, rateLimitPrincipal(limiters), requireScope(spec.scope)];
    chain.push(checkIdempotencyKey(spec));
    // Every route with schemas, and every authenticated one without: its path parameters are checked for NUL
    // characters at least. A public route without schemas answers a malformed path its own way (a share token: the
    // uniform 404, its pattern refusing a NUL before any query).
    if (spec.schemas || spec.scope !== 'public') chain.push(validate(spec.schemas ?? {}));
    if (takesIdempotencyKey(spec)) chain.push(claimIdempotencyKey(deps, heldKeys));
    chain.push(respond(spec, deps.config.nodeEnv === 'test', turns));
    router[spec.method](spec.path, ...chain);
  }
  return router;
}

export function routerFor(
  specs: RouteSpec[],
  deps: AppDeps,
  limiters: RateLimiters,
  keyCache?: ApiKeyCache,
  heldKeys?: HeldIdempotencyKeys,
  turns?: OrganizationTurns,
): Router {
  return mountRoutes(Router({ mergeParams: true }), specs, deps, limiters, keyCache, heldKeys, turns);
}
