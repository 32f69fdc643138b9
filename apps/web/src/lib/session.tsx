// Who is signed in (GET /auth/me): the user, the organization, the role and the effective scopes that decide
// which controls the pages offer.
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from 'react';
import { client, unwrap } from '../api/client';
import { allows } from './scopes';

export type Me = NonNullable<Awaited<ReturnType<typeof loadMe>>>;

async function loadMe() {
  return unwrap(client.GET('/api/v1/auth/me'), { quiet401: true });
}

interface SessionState {
  me: Me | null;
  loading: boolean;
  refresh(): Promise<void>;
  can(scope: string): boolean;
}

const SessionContext = createContext<SessionState>({ me: null, loading: true, refresh: async () => {}, can: () => false });

export function SessionProvider({ children }: { children: ReactNode }) {
  const [me, setMe] = useState<Me | null>(null);
  const [loading, setLoading] = useState(true);
  const refresh = useCallback(async () => {
    try {
      setMe(await loadMe());
    } catch {
      setMe(null);
    } finally {
      setLoading(false);
    }
  }, []);
  useEffect(() => void refresh(), [refresh]);
  const can = useCallback((scope: string) => !!me && allows(me.scopes ?? [], scope), [me]);
  return <SessionContext.Provider value={{ me, loading, refresh, can }}>{children}</SessionContext.Provider>;
}

export function useSession(): SessionState {
  return useContext(SessionContext);
}
