import Joi from 'joi';
import type { RouteSpec } from '../http/route';
import { buildOpenApiDocument } from './document';

const API_VERSION = '1.0.0';

/** GET /api/v1/openapi.json: the document of every route, itself included (built once, on first request). */
export function openApiRoute(allRoutes: () => RouteSpec[], publicBaseUrl: string): RouteSpec {
  let document: ReturnType<typeof buildOpenApiDocument> | undefined;
  return {
    method: 'get',
    path: '/openapi.json',
    scope: 'public',
    summary: 'This OpenAPI 3.1 document',
    response: Joi.object({
      openapi: Joi.string().valid('3.1.0'),
      info: Joi.object().unknown(true),
      servers: Joi.array().items(Joi.object({ url: Joi.string() })),
      paths: Joi.object().unknown(true),
      components: Joi.object().unknown(true),
    }),
    handler: () => (document ??= buildOpenApiDocument(allRoutes(), { version: API_VERSION, serverUrl: publicBaseUrl })),
  };
}
