// Sign-in and signup through an OAuth provider (SPEC: Authentication, credential 3).
//
// Start: a random `state`, a PKCE verifier (S256) and, for OpenID Connect, a nonce are kept in Redis for a short
// time under a random flow id; the browser gets that id in an httpOnly cookie scoped to the provider's callback
// path, and is sent to the provider. Callback: the flow is taken out of Redis (GETDEL: single use, so a replayed
// callback finds nothing), the cookie's flow must carry the very `state` the provider sent back, and only then is
// the code exchanged. The verified identity then resolves to a user: by the linked identity, else by the same
// e-mail address (linked now), else a new account (joining the organization of a pending invitation, or owning a
// new one). Users with TOTP on get a partial token, exactly as at password login.
//
// The same flow (same callback, same state, PKCE and single-use rules) connects a signed-in person's personal
// GitHub account (source:connect_personal): the flow record then names the person and asks for the repository
// scopes; the callback stores the sealed token (source-connections module) instead of signing anyone in.
import { createHash } from 'node:crypto';
import { isUniqueViolation, type User } from '@svc/db';
import { normalizedEmail, oneLine } from '@svc/domain';
import type { AppDeps } from '../../app-deps';
import { HttpError, badRequest, conflict } from '../../http/errors';
import { randomToken, safeEqual, sha256Hex } from '../../lib/crypto';
import { newId } from '@svc/db';
import { createOwnerAccount } from '../auth/accounts';
import { completeFirstFactor, type LoginOutcome } from '../auth/login';
import type { RequestMeta } from '../audit/audit.context';
import { joinInvitedOrganization } from '../invitations/invitations.service';
import { saveConnection } from '../source-connections/source-connections.service';
import { GITHUB_PERSONAL_SCOPES, githubProvider } from './github';
import { googleProvider } from './google';
import { isProviderName, type OAuthProvider, type ProviderIdentity, type ProviderName } from './provider';

type Deps = Pick<AppDeps, 'prisma' | 'config' | 'clock' | 'redis'>;

const PROVIDER_LABELS: Record<ProviderName, string> = { github: 'GitHub', google: 'Google' };

export type OAuthProviders = Map<ProviderName, OAuthProvider>;

/** The configured providers; one without a client id is absent (disabled). */
export function createProviders(deps: Pick<AppDeps, 'config' | 'clock'>): OAuthProviders {
  const { oauth } = deps.config;
  const providers: OAuthProviders = new Map();
  if (oauth.github) providers.set('github', githubProvider(oauth.github, oauth.httpTimeoutMs));
  if (oauth.google) providers.set('google', googleProvider(oauth.google, oauth.httpTimeoutMs, deps.clock));
  return providers;
}

export function providerOrThrow(providers: OAuthProviders, name: string): OAuthProvider {
  if (!isProviderName(name)) throw new HttpError(404, 'Unknown sign-in provider: use github or google.');
  const provider = providers.get(name);
  if (!provider) throw new HttpError(404, `Sign-in with ${PROVIDER_LABELS[name]} is not configured on this server.`);
  return provider;
}

/** The exact redirect URI to register with the provider. */
export function redirectUriFor(publicBaseUrl: string, provider: ProviderName): string {
  return `${publicBaseUrl}/api/v1/auth/oauth/${provider}/callback`;
}

export const flowCookieName = (provider: ProviderName) => `oauth_${provider}`;

/** The flow cookie is sent only to the provider's start and callback routes, as the browser sees their path. */
export function flowCookiePath(publicBaseUrl: string, provider: ProviderName): string {
  return new URL(redirectUriFor(publicBaseUrl, provider)).pathname.replace(/\/callback$/, '');
}

// ---------------------------------------------------------------------------------------------------------
// The flow, kept in Redis between start and callback

interface FlowRecord {
  provider: ProviderName;
  state: string;
  codeVerifier: string;
  nonce?: string;
  redirectAfter?: string;
  /** Set when the flow connects a personal source account of this signed-in user instead of signing in. */
  connectUserId?: string;
}

// The key holds a hash of the cookie's value, so what sits in Redis cannot be replayed as a cookie.
const flowKey = (deps: Deps, flowId: string) => `${deps.config.redisPrefix}:oauth-flow:${sha256Hex(flowId)}`;

const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

async function startFlow(
  deps: Deps,
  provider: OAuthProvider,
  extra: Pick<FlowRecord, 'redirectAfter' | 'connectUserId'>,
  scope?: string,
): Promise<{ location: string; flowId: string }> {
  const flow: FlowRecord = {
    provider: provider.name,
    state: randomToken(32),
    codeVerifier: randomToken(48), // 64 characters of the RFC 7636 alphabet
    nonce: provider.usesNonce ? randomToken(32) : undefined,
    ...extra,
  };
  const location = await provider.authorizationUrl({
    state: flow.state,
    codeChallenge: s256(flow.codeVerifier),
    nonce: flow.nonce,
    redirectUri: redirectUriFor(deps.config.publicBaseUrl, provider.name),
    scope,
  });
  const flowId = randomToken(32);
  await deps.redis.set(flowKey(deps, flowId), JSON.stringify(flow), 'EX', deps.config.oauth.stateTtlSeconds);
  return { location, flowId };
}

export function startSignIn(deps: Deps, provider: OAuthProvider, redirectAfter: string | undefined) {
  return startFlow(deps, provider, { redirectAfter });
}

/** Where the browser lands after connecting a personal account. */
export const PERSONAL_CONNECTION_RETURN = '/profile';

/** Starts connecting the signed-in user's personal account; 404 for a provider that is not a source host. */
export function startPersonalConnection(deps: Deps, provider: OAuthProvider, userId: string) {
  if (!provider.sourceAccountFor) throw new HttpError(404, `${provider.label} is not a source host: connect a GitHub account.`);
  return startFlow(deps, provider, { redirectAfter: PERSONAL_CONNECTION_RETURN, connectUserId: userId }, GITHUB_PERSONAL_SCOPES);
}

async function takeFlow(deps: Deps, flowId: string): Promise<FlowRecord | undefined> {
  const raw = await deps.redis.getdel(flowKey(deps, flowId));
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as FlowRecord;
  } catch {
    return undefined;
  }
}

export interface CallbackQuery {
  code?: string;
  state?: string;
  error?: string;
  error_description?: string;
  iss?: string;
}

export async function finishSignIn(
  deps: Deps,
  provider: OAuthProvider,
  flowId: string | undefined,
  query: CallbackQuery,
  meta?: RequestMeta,
): Promise<{ outcome: LoginOutcome | { kind: 'connected' }; redirectAfter?: string }> {
  if (!flowId || flowId.length > 100) {
    throw badRequest('No sign-in is in progress in this browser (the state cookie is missing); start the sign-in again.');
  }
  // Taken out before anything is checked: whatever happens next, this flow cannot be completed twice.
  const flow = await takeFlow(deps, flowId);
  if (!flow || flow.provider !== provider.name) {
    throw badRequest('This sign-in has expired or was already completed; start the sign-in again.');
  }
  if (typeof query.state !== 'string' || !safeEqual(query.state, flow.state)) {
    throw badRequest('The state parameter does not match the sign-in started in this browser; start the sign-in again.');
  }
  if (query.error !== undefined) {
    const description = query.error_description ? `: ${query.error_description.slice(0, 200)}` : '';
    throw badRequest(`${provider.label} did not authorize the sign-in (${query.error}${description}).`);
  }
  if (!query.code) throw badRequest(`The callback from ${provider.label} carries no authorization code.`);

  const exchange = {
    code: query.code,
    codeVerifier: flow.codeVerifier,
    nonce: flow.nonce,
    redirectUri: redirectUriFor(deps.config.publicBaseUrl, provider.name),
    iss: query.iss,
  };
  if (flow.connectUserId && provider.sourceAccountFor) {
    const account = await provider.sourceAccountFor(exchange);
    if (!account.scopes.includes('repo')) {
      throw badRequest(`${provider.label} did not grant repository access (repo); connect again and approve it.`);
    }
    await saveConnection(deps, flow.connectUserId, provider.name, account, meta ?? {});
    return { outcome: { kind: 'connected' }, redirectAfter: flow.redirectAfter };
  }
  const identity = await provider.identityFor(exchange);
  const user = await userForIdentity(deps, identity, meta ?? {});
  const outcome = await completeFirstFactor(deps, user, undefined, { method: `oauth_${provider.name}`, meta });
  return { outcome, redirectAfter: flow.redirectAfter };
}

// ---------------------------------------------------------------------------------------------------------
// From a verified identity to a user

const emailFilter = (address: string) => ({ equals: address, mode: 'insensitive' as const });

async function linkIdentity(deps: Deps, userId: string, identity: ProviderIdentity): Promise<void> {
  try {
    await deps.prisma.$transaction(async (tx) => {
      // The account found by the address, as committed, its row held (FOR KEY SHARE, as the link's foreign key takes
      // it) until the link commits: a GDPR erasure of the account (apps/worker erasure.ts, account step: the row FOR
      // UPDATE, then its sign-in identities deleted and the address replaced) either waits and then deletes this
      // link too, or committed first: the account no longer has the address, and nothing is linked to it.
      const [row] = await tx.$queryRaw<Array<{ email: string }>>`SELECT email FROM users WHERE id = ${userId} FOR KEY SHARE`;
      if (!row || normalizedEmail(row.email) !== normalizedEmail(identity.email)) {
        throw conflict('The account changed while you signed in; sign in again.');
      }
      await tx.oAuthIdentity.create({
        data: { id: newId('oid'), userId, provider: identity.provider, subject: identity.subject, email: identity.email },
      });
    });
  } catch (err) {
    if (err instanceof HttpError || !isUniqueViolation(err)) throw err;
    // A concurrent callback for the same provider account linked it first: fine if it linked it to this user.
    const existing = await deps.prisma.oAuthIdentity.findUnique({
      where: { provider_subject: { provider: identity.provider, subject: identity.subject } },
    });
    if (existing?.userId !== userId) throw conflict('This provider account was linked concurrently; sign in again.');
  }
}

/**
 * The provider verified the address: an account still waiting for its verification e-mail becomes active. Its
 * password is dropped: whoever chose it at signup never proved the address was theirs (it may be someone who signed
 * up with another person's address, waiting for them to arrive), so it must not open the account now owned by the
 * address's holder. The pending account never signed in, so it has no sessions or keys to keep.
 * Only while it is still pending, as committed: `user` was read before the link, and meanwhile an invitation may have
 * activated it with the password its holder just chose (kept), or a new signup may have replaced it (409).
 */
async function activate(deps: Deps, user: User): Promise<User> {
  if (user.status === 'active') return user;
  await deps.prisma.user.updateMany({
    where: { id: user.id, status: 'pending' },
    data: { status: 'active', emailVerifiedAt: deps.clock.now(), passwordHash: null },
  });
  const current = await deps.prisma.user.findUnique({ where: { id: user.id } });
  if (!current) throw conflict('The account changed while you signed in; sign in again.');
  return current;
}

/** The provider's name for the user as a name of ours (validate.ts name()): one line, at most 200 characters. */
function displayName(identity: ProviderIdentity): string {
  // Not checked by name(): a control character (a line break, or a NUL PostgreSQL cannot store) becomes a space.
  const name = oneLine(identity.name).slice(0, 200).trim();
  return name || identity.email.split('@')[0];
}

/**
 * The user a verified provider identity signs in as: the one it is linked to; else the user with its e-mail
 * address, linking it; else a new active user, who accepts a pending invitation for the address (the newest) or
 * else owns a new organization named after them.
 */
export async function userForIdentity(deps: Deps, identity: ProviderIdentity, meta: RequestMeta): Promise<User> {
  const linked = await deps.prisma.oAuthIdentity.findUnique({
    where: { provider_subject: { provider: identity.provider, subject: identity.subject } },
    include: { user: true },
  });
  if (linked) {
    if (linked.email !== identity.email) {
      await deps.prisma.oAuthIdentity.update({ where: { id: linked.id }, data: { email: identity.email } });
    }
    return activate(deps, linked.user);
  }

  const existing = await deps.prisma.user.findFirst({ where: { email: emailFilter(identity.email) } });
  if (existing) {
    await linkIdentity(deps, existing.id, identity);
    return activate(deps, existing);
  }

  const name = displayName(identity);
  // Unscoped: a new user signing in belongs to no organization yet; a pending invitation to the address names one.
  const invitation = await deps.prisma.invitation.findFirst({
    where: { email: emailFilter(identity.email), acceptedAt: null, expiresAt: { gt: deps.clock.now() } },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
  });
  let userId: string;
  if (invitation) {
    userId = (await joinInvitedOrganization(deps, invitation, { create: { name, passwordHash: null } }, meta)).user_id;
  } else {
    const organizationName = `${name.slice(0, 180)}'s organization`;
    userId = (await createOwnerAccount(deps, { email: identity.email, name, organization_name: organizationName }, { verified: true }))
      .userId;
  }
  await linkIdentity(deps, userId, identity);
  return deps.prisma.user.findUniqueOrThrow({ where: { id: userId } });
}
