// Authentication epochs: how every API instance learns at once that a cached API-key principal is stale.
//
// The API caches the principal an API key resolves to (key row, member role, user status) for a few seconds
// (API_KEY_CACHE_TTL_SECONDS). Each cached principal remembers the epochs of its organization and its user as
// they were read BEFORE the database was; every request reads the current epochs with one MGET and drops the
// entry when either differs. Whatever can take access away (revoking a key, removing a member, changing a role,
// transferring ownership, deleting the organization, changing the key policy, deactivating a user) calls
// `bumpAuthEpochs` after its transaction commits: the next request on any instance then reads the database again.
//
// An epoch is a random token, not a counter, so a key evicted from Redis and bumped again can never come back
// to a value a stale entry still holds. Granting access (a new membership, a user activated) needs no bump: the
// API never caches a refusal.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** Epoch keys outlive any cache entry by far (the TTL is capped well below this). */
const EPOCH_KEY_TTL_SECONDS = 24 * 3600;

export const organizationEpochKey = (redisPrefix: string, organizationId: string) => `${redisPrefix}:auth-epoch:org:${organizationId}`;
export const userEpochKey = (redisPrefix: string, userId: string) => `${redisPrefix}:auth-epoch:user:${userId}`;

export interface AuthEpochTargets {
  organizationIds?: Iterable<string>;
  userIds?: Iterable<string>;
}

/**
 * Gives the organizations and users new epochs; cached principals of theirs are then stale. One SET per key, sent
 * together (one round trip on a single server), not a transaction: on a Redis Cluster the keys live in different
 * slots, and each bump stands on its own anyway (a failure throws, and the caller reports it).
 */
export async function bumpAuthEpochs(redis: Redis, redisPrefix: string, targets: AuthEpochTargets): Promise<void> {
  const keys = [
    ...[...(targets.organizationIds ?? [])].map((id) => organizationEpochKey(redisPrefix, id)),
    ...[...(targets.userIds ?? [])].map((id) => userEpochKey(redisPrefix, id)),
  ];
  if (keys.length === 0) return;
  await Promise.all(keys.map((key) => redis.set(key, randomBytes(9).toString('base64url'), 'EX', EPOCH_KEY_TTL_SECONDS)));
}

/**
 * The current epochs of an organization and a user ('' where none was ever set). Two GETs written together rather
 * than an MGET, which a Redis Cluster refuses across slots.
 */
export async function readAuthEpochs(
  redis: Redis,
  redisPrefix: string,
  organizationId: string,
  userId: string,
): Promise<{ organization: string; user: string }> {
  const [organization, user] = await Promise.all([
    redis.get(organizationEpochKey(redisPrefix, organizationId)),
    redis.get(userEpochKey(redisPrefix, userId)),
  ]);
  return { organization: organization ?? '', user: user ?? '' };
}
