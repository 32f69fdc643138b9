// The typed client of the public REST API (types generated from its OpenAPI document: `pnpm --filter @svc/web
// openapi`). Same origin: the httpOnly session cookie travels by itself; state-changing requests add the CSRF
// header from the readable csrf_token cookie. Nothing is kept in localStorage or sessionStorage.
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema';

export class ApiError extends Error {
  /** `code`: the API's machine-readable code where it documents one (EMAIL_NOT_VERIFIED, REAUTHENTICATION_REQUIRED, TOTP_REQUIRED). */
  constructor(readonly status: number, readonly detail: string, readonly code?: string) {
    super(detail);
  }
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export function csrfToken(): string | undefined {
  const match = /(?:^|;\s*)csrf_token=([^;]*)/.exec(document.cookie);
  return match ? decodeURIComponent(match[1]) : undefined;
}

let onUnauthorized: () => void = () => {};
/** What a 401 does (the app sends the person to the login page, and back afterwards). */
export function setUnauthorizedHandler(handler: () => void): void {
  onUnauthorized = handler;
}

const csrf: Middleware = {
  onRequest({ request }) {
    const token = csrfToken();
    if (UNSAFE.has(request.method) && token) request.headers.set('X-CSRF-Token', token);
    return request;
  },
};

export const client = createClient<paths>({ baseUrl: '', credentials: 'same-origin' });
client.use(csrf);

/** Unwraps an openapi-fetch result: the data, or an ApiError carrying the API's `detail`. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>, opts: { quiet401?: boolean } = {}): Promise<T> {
  const { data, error, response } = await call;
  if (response.ok) return data as T;
  const body = error as { detail?: string; code?: unknown } | undefined;
  const detail = body?.detail ?? `${response.status} ${response.statusText}`;
  if (response.status === 401 && !opts.quiet401) onUnauthorized();
  throw new ApiError(response.status, detail, typeof body?.code === 'string' ? body.code : undefined);
}

/**
 * For the three webhook levels, whose paths are built at run time (/webhooks, /projects/{id}/webhooks,
 * /assessments/{id}/webhooks): same middleware and error handling, path typed as a string.
 */
export function request<T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const loose = client as unknown as Record<string, (p: string, init: { body?: unknown }) => Promise<{ data?: T; error?: unknown; response: Response }>>;
  return unwrap(loose[method](path, body === undefined ? {} : { body }));
}
