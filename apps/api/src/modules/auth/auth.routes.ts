import type { AppDeps } from '../../app-deps';
import type { RateLimiters } from '../../http/rate-limit';
import type { RouteSpec } from '../../http/route';

export function authRoutes(_deps: AppDeps, _limiters: RateLimiters): RouteSpec[] {
  return [];
}
