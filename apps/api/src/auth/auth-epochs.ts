// Called after a committed change that can take access away from an API key (revocation, member removal, role
// change, ownership transfer, organization deletion, key-policy change, a user deactivated): every API instance's
// cached principals of those organizations / users are stale from the next request on (see authenticate.ts).
import { bumpAuthEpochs, type AuthEpochTargets } from '@svc/queue';
import type { AppDeps } from '../app-deps';

export async function invalidateCachedPrincipals(deps: Pick<AppDeps, 'redis' | 'config' | 'logger'>, targets: AuthEpochTargets): Promise<void> {
  const bump = () => bumpAuthEpochs(deps.redis, deps.config.redisPrefix, targets);
  // One retry for a blip; the change is committed either way, and then cached principals live out their TTL.
  await bump()
    .catch(bump)
    .catch((err: unknown) =>
      deps.logger.error('Could not bump authentication epochs: cached API-key principals stay valid until their TTL', {
        ttl_seconds: deps.config.apiKeyCacheTtlSeconds,
        error: String(err),
      }),
    );
}
