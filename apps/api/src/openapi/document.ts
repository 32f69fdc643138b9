// The OpenAPI 3.1 document, generated from the route declarations and the very joi schemas the routes validate
// requests (and, in tests, responses) with: it cannot drift from what the API does.
import parseJoi from 'joi-to-json';
import type Joi from 'joi';
import type { RouteSpec } from '../http/route';
import { takesIdempotencyKey } from '../http/idempotency';

type JsonSchema = Record<string, unknown>;

const ERROR_RESPONSES: Record<string, string> = {
  '400': 'Malformed input or business-rule failure',
  '401': 'Missing, expired, invalid or revoked credentials',
  '403': 'Role too low or scope missing (the detail names the scope)',
  '404': 'Absent, or belongs to another organization',
  '409': 'State conflict or uniqueness violation',
  '422': 'Well-formed but refused value',
  '429': 'Rate limited; honour Retry-After',
  '503': 'PostgreSQL or Redis cannot be reached, or a change waited too long for its turn; nothing changed, retry after Retry-After',
};

const SUBSCHEMA_KEYS = new Set(['if', 'then', 'else', 'not']);

/** `then: false` is valid JSON Schema, but OpenAPI tooling expects schema objects: false -> {not: {}}, true -> {}. */
function withoutBooleanSubschemas(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutBooleanSubschemas);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => {
      if (SUBSCHEMA_KEYS.has(key) && typeof child === 'boolean') return [key, child ? {} : { not: {} }];
      return [key, withoutBooleanSubschemas(child)];
    }),
  );
}

function toSchema(schema: Joi.Schema): JsonSchema {
  return withoutBooleanSubschemas(parseJoi(schema, 'open-api-3.1')) as JsonSchema;
}

/**
 * Response bodies are checked with presence 'required' (route.ts): every documented property is always present.
 * joi-to-json only lists keys marked .required(), so state it here for every object of a response schema.
 */
function allPropertiesRequired(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(allPropertiesRequired);
  if (value === null || typeof value !== 'object') return value;
  const node = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, allPropertiesRequired(v)])) as JsonSchema;
  if (node.type === 'object' && node.properties && typeof node.properties === 'object') {
    node.required = Object.keys(node.properties as object);
  }
  return node;
}

function toResponseSchema(schema: Joi.Schema): JsonSchema {
  return allPropertiesRequired(toSchema(schema)) as JsonSchema;
}

/** Express `/a/:id/b` -> OpenAPI `/a/{id}/b`. */
export function openApiPath(expressPath: string): string {
  return `/api/v1${expressPath.replace(/:([A-Za-z_]+)/g, '{$1}')}`;
}

function pathParameterNames(expressPath: string): string[] {
  return [...expressPath.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]);
}

function parameters(route: RouteSpec) {
  const pathParams = pathParameterNames(route.path).map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: { type: 'string' },
  }));
  const query = route.schemas?.query ? toSchema(route.schemas.query) : undefined;
  const properties = (query?.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((query?.required as string[] | undefined) ?? []);
  const queryParams = Object.entries(properties).map(([name, schema]) => ({
    name,
    in: 'query',
    required: required.has(name),
    schema,
  }));
  return [...pathParams, ...queryParams, ...(takesIdempotencyKey(route) ? [IDEMPOTENCY_KEY_PARAMETER] : [])];
}

/** docs/api.md "Idempotent requests": the header every creating POST takes. */
const IDEMPOTENCY_KEY_PARAMETER = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the same key with the same request (method, path, body) within 24 hours answers the first ' +
    'response again with `Idempotent-Replayed: true` and creates nothing (a 4xx is answered again too, a 5xx is not ' +
    'kept); the key with a different request answers 422; while the first request still runs, 409 with Retry-After. ' +
    'Keys belong to the organization and the credential (an API key, or the user of a session).',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7E]+$' },
};

const REPLAYED_HEADER = {
  'Idempotent-Replayed': {
    description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
  },
};

function successResponse(route: RouteSpec) {
  const headers = takesIdempotencyKey(route) ? { headers: REPLAYED_HEADER } : {};
  if (route.responseMediaType) {
    return { description: 'Success', content: { [route.responseMediaType]: { schema: { type: 'string' } } } };
  }
  if (!route.response) return { description: 'Success, no body', ...headers };
  return { description: 'Success', ...headers, content: { 'application/json': { schema: toResponseSchema(route.response) } } };
}

function successStatus(route: RouteSpec): string {
  if (route.responseMediaType) return String(route.status ?? 200);
  return route.response ? String(route.status ?? 200) : '204';
}

function operation(route: RouteSpec) {
  const isPublic = route.scope === 'public';
  const errors = Object.fromEntries(
    Object.entries(ERROR_RESPONSES)
      .filter(([status]) => !(isPublic && (status === '401' || status === '403')))
      .map(([status, description]) => [status, { $ref: `#/components/responses/E${status}` , description }]),
  );
  return {
    summary: route.summary,
    operationId: `${route.method}${route.path.replace(/[/:-]+(\w)/g, (_m, c: string) => c.toUpperCase())}`,
    tags: [route.path.split('/')[1]],
    ...(isPublic
      ? { security: [] }
      : { security: [{ bearer: [route.scope] }, { sessionCookie: [route.scope] }], 'x-required-scope': route.scope }),
    description: isPublic ? 'No credential required.' : `Requires the \`${route.scope}\` scope.`,
    parameters: parameters(route),
    ...(route.schemas?.body && {
      requestBody: { required: true, content: { 'application/json': { schema: toSchema(route.schemas.body) } } },
    }),
    ...(route.requestMediaType && {
      requestBody: { required: true, content: { [route.requestMediaType]: { schema: { type: 'string', format: 'binary' } } } },
    }),
    responses: { [successStatus(route)]: successResponse(route), ...stripRefSiblings(errors), ...uploadErrors(route) },
  };
}

/** Routes that take a raw upload also answer 413 (too large) and 415 (wrong media type). */
function uploadErrors(route: RouteSpec) {
  if (!route.requestMediaType) return {};
  const error = (description: string) => ({
    description,
    content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
  });
  return {
    '413': error('The body is larger than the configured cap; answered while the body is still being sent'),
    '415': error(`The body is not ${route.requestMediaType}`),
  };
}

// OpenAPI 3.1 allows description next to $ref, but keep the document minimal and lint-clean.
function stripRefSiblings(responses: Record<string, { $ref: string; description: string }>) {
  return Object.fromEntries(Object.entries(responses).map(([k, v]) => [k, { $ref: v.$ref }]));
}

export function buildOpenApiDocument(routes: RouteSpec[], info: { version: string; serverUrl: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = openApiPath(route.path);
    paths[path] ??= {};
    paths[path][route.method] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Security Assessment Service API',
      version: info.version,
      description:
        'Authentication with scoped API keys and sessions, tenancy, assessments and findings, and signed outbound ' +
        'webhooks. Every error body is `{detail}`; dispatch on the status code.',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: info.serverUrl }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API key (`sk-svc-…`) or a session token from login.',
        },
        sessionCookie: {
          type: 'apiKey',
          in: 'cookie',
          name: 'session',
          description: 'Session cookie set by login; state-changing requests also need the X-CSRF-Token header.',
        },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['detail'],
          properties: {
            detail: { type: 'string', description: 'Human-readable; not a contract.' },
            code: { type: 'string', description: 'Machine-readable code where documented (EMAIL_NOT_VERIFIED, REAUTHENTICATION_REQUIRED).' },
          },
        },
      },
      responses: Object.fromEntries(
        Object.entries(ERROR_RESPONSES).map(([status, description]) => [
          `E${status}`,
          {
            description,
            ...((status === '429' || status === '503') && {
              headers: { 'Retry-After': { description: 'Seconds to wait', schema: { type: 'integer' } } },
            }),
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
          },
        ]),
      ),
    },
  };
}
