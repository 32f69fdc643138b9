// Helpers for the dashboard's sudo-mode tests (docs/api.md, "Sensitive changes"): a page whose session signed in
// a while ago, and the requests the page sends to one path.
import type { Page, Request } from 'playwright-core';
import { sessionIdOf } from '../../../api/test/support/auth-helpers';
import { RECENT_SIGN_IN_WINDOW_MS } from '../../../api/src/modules/auth/reauthentication';
import type { BrowserWorld } from './browser-world';

/** The page's session, its sign-in moved back past the window (as if the person had signed in a while ago). */
export async function signedInAWhileAgo(b: BrowserWorld, page: Page): Promise<void> {
  const cookie = (await page.context().cookies()).find((c) => c.name === 'session')!;
  await b.w.h.deps.prisma.session.update({
    where: { id: sessionIdOf(cookie.value) },
    data: { createdAt: new Date(Date.now() - RECENT_SIGN_IN_WINDOW_MS - 60_000) },
  });
}

/** Every request (of `method`, when given) the page sends to `path`, with its body, from now on. */
export function requestsTo(page: Page, path: string, method?: string): Request[] {
  const seen: Request[] = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname === path && (method === undefined || r.method() === method)) seen.push(r);
  });
  return seen;
}
