// Called after a committed change that can take access away from an API key (revocation, member removal, role
// change, ownership transfer, organization deletion, key-policy change, a user deactivated): every API instance's
// cached principals of those organizations / users are stale from the next request on (see authenticate.ts).
import { bumpAuthEpochs, type AuthEpochTargets } from '@svc/queue';
import type { AppDeps } from '../app-deps';

export async function invalidateCachedPrincipals(deps: Pick<AppDeps, 'redis' | 'config' | 'logger'>, targets: AuthEpochTargets): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await bumpAuthEpochs(deps.redis, deps.config.redisPrefix, targets);
      return;
    } catch (err) {
      if (attempt < 2) continue;
      // The change is committed; what is left is that cached principals live out their TTL.
      deps.logger.error('Could not bump authentication epochs: cached API-key principals stay valid until their TTL', {
        ttl_seconds: deps.config.apiKeyCacheTtlSeconds,
        error: String(err),
      });
      return;
    }
  }
}
