// The scheduled half of the API-key lifecycle policy (the API enforces the creation rules): warn a key's owner and
// the organization's admins and owner by e-mail `warn_days_before` its expiry, and revoke keys unused for longer
// than `inactivity_days` (audited, actor `system`). Each key is claimed with a conditional update first, so a key
// is warned or revoked once even when two workers run the job at the same time.
import { SYSTEM_ACTOR, recordAudit } from '@svc/audit';
import type { Prisma } from '@svc/db';
import { oneLine } from '@svc/domain';
import { createMailer, mailErrorForLog, type Mailer } from '@svc/mail';
import { bumpAuthEpochs } from '@svc/queue';
import type { Redis } from 'ioredis';
import type { WorkerDeps } from './deps';

const DAY_MS = 24 * 3600 * 1000;
const BATCH = 200;

export interface KeyLifecycleResult {
  warned: number;
  revoked: number;
}

/** Organizations with the policy on and the given rule set, grouped by the rule's number of days. */
async function organizationsByDays(deps: WorkerDeps, rule: 'keyPolicyWarnDays' | 'keyPolicyInactivityDays'): Promise<Map<number, string[]>> {
  // Unscoped: the job serves every organization whose policy asks for it.
  const orgs = await deps.prisma.organization.findMany({
    where: { keyPolicyEnabled: true, [rule]: { not: null } },
    select: { id: true, keyPolicyWarnDays: true, keyPolicyInactivityDays: true },
  });
  const groups = new Map<number, string[]>();
  for (const org of orgs) {
    const days = org[rule]!;
    groups.set(days, [...(groups.get(days) ?? []), org.id]);
  }
  return groups;
}

/** Every key matching `where`, in id order and in batches (claimed keys may or may not drop out of `where`). */
async function* keysWhere(deps: WorkerDeps, where: Prisma.ApiKeyWhereInput) {
  // Unscoped: `where` names the organizations of this run (organizationsByDays).
  for (let cursor: string | undefined; ; ) {
    const keys = await deps.prisma.apiKey.findMany({
      where: { ...where, ...(cursor && { id: { gt: cursor } }) },
      orderBy: { id: 'asc' },
      take: BATCH,
      include: { user: { select: { email: true, status: true } }, organization: { select: { name: true } } },
    });
    yield* keys;
    if (keys.length < BATCH) return;
    cursor = keys[keys.length - 1].id;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Expiry warnings

/** The addresses a key's warning goes to: its owner and the organization's admins and owner (active users). */
async function warningRecipients(deps: WorkerDeps, organizationId: string, owner: { email: string; status: string }) {
  const admins = await deps.prisma.membership.findMany({
    where: { organizationId, role: { in: ['owner', 'admin'] }, user: { status: 'active' } },
    select: { user: { select: { email: true } } },
    orderBy: { createdAt: 'asc' },
  });
  const emails = [...(owner.status === 'active' ? [owner.email] : []), ...admins.map((m) => m.user.email)];
  return [...new Set(emails)];
}

function warningMail(key: { name: string; displayPrefix: string; expiresAt: Date }, organizationName: string, ownerEmail: string, now: Date) {
  const daysLeft = Math.max(0, Math.ceil((key.expiresAt.getTime() - now.getTime()) / DAY_MS));
  return {
    subject: oneLine(`API key "${key.name}" of ${organizationName} expires in ${daysLeft} day${daysLeft === 1 ? '' : 's'}`),
    text:
      `The API key "${oneLine(key.name)}" (${key.displayPrefix}…) of the organization "${oneLine(organizationName)}", created by ` +
      `${ownerEmail}, expires on ${key.expiresAt.toISOString()}.\n\n` +
      'Programs still using it will get 401 from then on. To replace it: create a new key, switch the clients to ' +
      'it, then revoke this one.\n\nYou receive this message because you own the key or administer the organization ' +
      "(its API-key policy sends one warning per key before it expires).\n",
  };
}

/** How long a run holds a key's warning while it mails it (a mail server's timeouts are well under this). */
const WARNING_CLAIM_MS = 15 * 60_000;

/** Warns about every key of a policy organization that expires within its warning window; returns the keys warned. */
export async function sendExpiryWarnings(
  deps: WorkerDeps,
  now: Date,
  mailer: Mailer = deps.mailer ?? createMailer(deps.config.mail),
): Promise<number> {
  const startedAt = performance.now();
  let warned = 0;
  for (const [days, organizationIds] of await organizationsByDays(deps, 'keyPolicyWarnDays')) {
    const window = new Date(now.getTime() + days * DAY_MS);
    const unclaimed = { OR: [{ expiryWarningClaimedUntil: null }, { expiryWarningClaimedUntil: { lte: now } }] };
    const due = keysWhere(deps, {
      organizationId: { in: organizationIds },
      revokedAt: null,
      expiryWarnedAt: null,
      expiresAt: { gt: now, lte: window },
      ...unclaimed,
    });
    for await (const key of due) {
      // The claim: whichever run holds it sends the warning. It expires, so a run killed before it marked the key
      // warned (or whose mail server hung past the shutdown deadline) leaves the warning to a later run, which may
      // then send it a second time (at least once, never lost).
      // From the moment of the claim, in the run's time frame: a run that took long to get here keeps its full hold.
      const claimUntil = new Date(now.getTime() + (performance.now() - startedAt) + WARNING_CLAIM_MS);
      const claimed = await deps.prisma.apiKey.updateMany({
        where: { id: key.id, expiryWarnedAt: null, revokedAt: null, ...unclaimed },
        data: { expiryWarningClaimedUntil: claimUntil },
      });
      if (claimed.count !== 1) continue;
      const recipients = await warningRecipients(deps, key.organizationId, key.user);
      const mail = warningMail({ ...key, expiresAt: key.expiresAt! }, key.organization.name, key.user.email, now);
      let sent = 0;
      try {
        for (const to of recipients) {
          await mailer.send({ to, ...mail });
          sent++;
        }
        warned++;
      } catch (err) {
        deps.logger.error('Could not send an API-key expiry warning', { key_id: key.id, sent, error: mailErrorForLog(err, recipients) });
      }
      // Someone was told (or there is nobody to tell): warned, no second round for the rest. Nobody was: the claim
      // goes and the next run tries again.
      const done = sent > 0 || recipients.length === 0;
      await deps.prisma.apiKey.updateMany({
        where: { id: key.id, expiryWarningClaimedUntil: claimUntil },
        data: done ? { expiryWarnedAt: now, expiryWarningClaimedUntil: null } : { expiryWarningClaimedUntil: null },
      });
    }
  }
  if (warned > 0) deps.logger.info('API-key expiry warnings sent', { keys: warned });
  return warned;
}

// ---------------------------------------------------------------------------------------------------------------
// Inactivity revocation

/** Unused since before `cutoff`: last used then, or never used and created then. */
function unusedSince(cutoff: Date): Prisma.ApiKeyWhereInput {
  return { OR: [{ lastUsedAt: { lt: cutoff } }, { lastUsedAt: null, createdAt: { lt: cutoff } }] };
}

/** Revokes every live key of a policy organization unused for longer than its window; returns the keys revoked. */
export async function revokeInactiveKeys(deps: WorkerDeps, now: Date): Promise<number> {
  let revoked = 0;
  let redis: Redis | undefined;
  try {
    for (const [days, organizationIds] of await organizationsByDays(deps, 'keyPolicyInactivityDays')) {
      const cutoff = new Date(now.getTime() - days * DAY_MS);
      const live = { revokedAt: null, OR: [{ expiresAt: null }, { expiresAt: { gt: now } }] };
      const idle = keysWhere(deps, { organizationId: { in: organizationIds }, AND: [live, unusedSince(cutoff)] });
      for await (const key of idle) {
        const done = await deps.prisma.$transaction(async (tx) => {
          // Conditional on still being live and unused: a key used (or revoked) meanwhile is left alone.
          const claimed = await tx.apiKey.updateMany({
            where: { id: key.id, revokedAt: null, ...unusedSince(cutoff) },
            data: { revokedAt: now, revokedReason: 'inactivity' },
          });
          if (claimed.count !== 1) return false;
          await recordAudit(tx, {
            organizationId: key.organizationId,
            actor: SYSTEM_ACTOR,
            action: 'api_key.revoked',
            target: { type: 'api_key', id: key.id },
            metadata: {
              name: key.name,
              prefix: key.displayPrefix,
              reason: 'inactivity',
              inactivity_days: days,
              last_used_at: key.lastUsedAt?.toISOString() ?? null,
              owner_user_id: key.userId,
            },
            at: now,
          });
          return true;
        });
        if (!done) continue;
        revoked++;
        // API instances cache a key's principal: a new epoch for its organization refuses it on the next request.
        try {
          redis ??= deps.redis();
          await bumpAuthEpochs(redis, deps.config.redisPrefix, { organizationIds: [key.organizationId] });
        } catch (err) {
          deps.logger.error('Could not bump the authentication epoch of a revoked key; API caches expire it within their TTL', {
            key_id: key.id,
            error: String(err),
          });
        }
      }
    }
  } finally {
    await redis?.quit().catch(() => undefined);
  }
  if (revoked > 0) deps.logger.info('API keys revoked for inactivity', { keys: revoked });
  return revoked;
}

/** One run of the lifecycle job at `now` (the worker's clock by default; tests pass their own). */
export async function runKeyLifecycle(deps: WorkerDeps, now: Date = deps.clock.now()): Promise<KeyLifecycleResult> {
  const revoked = await revokeInactiveKeys(deps, now);
  const warned = await sendExpiryWarnings(deps, now);
  return { warned, revoked };
}
