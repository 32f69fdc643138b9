import type { Request } from 'express';
import type { Role } from '@svc/scopes';
import { unauthorized } from '../http/errors';

/** Who is calling: a user through a session, or an API key acting for the user who created it. */
export interface Principal {
  kind: 'session' | 'api_key';
  userId: string;
  organizationId: string;
  role: Role;
  scopes: ReadonlySet<string>;
  sessionId?: string;
  apiKeyId?: string;
  apiKeyPrefix?: string;
  /** The calling key's own expiration (null: none); a key it mints may not outlive it. */
  apiKeyExpiresAt?: Date | null;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      requestId: string;
      principal?: Principal;
    }
  }
}

export function principalOf(req: Request): Principal {
  if (!req.principal) throw unauthorized();
  return req.principal;
}

/** The caller's organization, for services scoped to it alone. */
export function tenantOf(req: Request): { organizationId: string } {
  return { organizationId: principalOf(req).organizationId };
}
