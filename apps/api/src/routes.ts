// Every API route of /api/v1, gathered from the modules.
import type { AppDeps } from './app-deps';
import type { RateLimiters } from './http/rate-limit';
import type { RouteSpec } from './http/route';
import { apiKeyRoutes } from './modules/api-keys/api-keys.routes';
import { authRoutes } from './modules/auth/auth.routes';
import { webhookRoutes } from './modules/webhooks/webhooks.routes';

export function apiRoutes(deps: AppDeps, limiters: RateLimiters): RouteSpec[] {
  return [...authRoutes(deps, limiters), ...apiKeyRoutes(deps), ...webhookRoutes(deps)];
}
