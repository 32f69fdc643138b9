// The caller's own profile: who they are, in which organization, with which credential and scopes.
import type { AppDeps } from '../../app-deps';
import type { Principal } from '../../auth/principal';
import { unauthorized } from '../../http/errors';

export async function describePrincipal(deps: AppDeps, principal: Principal) {
  const [user, organization] = await Promise.all([
    deps.prisma.user.findUnique({ where: { id: principal.userId } }),
    deps.prisma.organization.findUnique({ where: { id: principal.organizationId } }),
  ]);
  if (!user || !organization) throw unauthorized();
  return {
    user: { id: user.id, email: user.email, name: user.name, two_factor_enabled: user.totpEnabled, has_password: user.passwordHash !== null },
    organization: { id: organization.id, name: organization.name },
    role: principal.role,
    credential:
      principal.kind === 'api_key'
        ? { type: 'api_key' as const, key_prefix: principal.apiKeyPrefix }
        : { type: 'session' as const },
    scopes: [...principal.scopes].sort(),
  };
}
