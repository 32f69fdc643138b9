import type { AppDeps } from '../../app-deps';
import { principalOf } from '../../auth/principal';
import type { RateLimiters } from '../../http/rate-limit';
import type { RouteSpec } from '../../http/route';
import { requestMeta } from '../audit/audit.context';
import { page } from '../../http/responses';
import { apiKeyIdParams, apiKeyResponse, createApiKeyBody, createdApiKeyResponse, listApiKeysQuery } from './api-keys.schemas';
import { createApiKey, listApiKeys, revokeApiKey } from './api-keys.service';

export function apiKeyRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [
    {
      method: 'post',
      path: '/api-keys',
      scope: 'api_keys:create',
      summary:
        'Mint an API key; the key value is in this response only. A session signed in more than 10 minutes ago confirms with current_password (else 403 REAUTHENTICATION_REQUIRED)',
      schemas: { body: createApiKeyBody },
      status: 201,
      response: createdApiKeyResponse,
      sudoMode: true,
      handler: (req) => createApiKey(deps, limiters, principalOf(req), req.body, requestMeta(req)),
    },
    {
      method: 'get',
      path: '/api-keys',
      scope: 'api_keys:read',
      summary: 'List your API keys (admins and owners: the organization\'s)',
      schemas: { query: listApiKeysQuery },
      response: page(apiKeyResponse),
      handler: (req) => listApiKeys(deps, principalOf(req), req.query as never),
    },
    {
      method: 'delete',
      path: '/api-keys/:id',
      scope: 'api_keys:revoke',
      summary: 'Revoke an API key, effective on the next request: your own, or (admins and owners) one of someone whose role is not above yours (else 403)',
      schemas: { params: apiKeyIdParams },
      handler: (req) => revokeApiKey(deps, principalOf(req), req.params.id as string, requestMeta(req)),
    },
  ];
}
