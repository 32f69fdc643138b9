// Helpers for the re-authentication and sudo-mode tests: a session's sign-in moved back in time, the failed password
// checks the audit log recorded, and the security notices in the mail outbox.
import request from 'supertest';
import type { Harness } from './harness';
import { bearer } from './fixtures';
import { sessionIdOf } from './auth-helpers';
import { RECENT_SIGN_IN_WINDOW_MS } from '../../src/modules/auth/reauthentication';

/** Longer ago than the window: a session signed in then is asked for the password. */
export const A_WHILE_AGO = RECENT_SIGN_IN_WINDOW_MS + 60_000;

/** Moves the session's sign-in back by `ms` (its row's created_at), as a sign-in that long ago would have left it. */
export function signedInAgo(h: Harness, token: string, ms: number) {
  return h.deps.prisma.session.update({ where: { id: sessionIdOf(token) }, data: { createdAt: new Date(h.clock.now().getTime() - ms) } });
}

/** The user's failed password checks in the audit log (auth.login_failed), of one operation when given. */
export function failedPasswordChecks(h: Harness, userId: string, operation?: string) {
  return h.deps.prisma.auditEvent.findMany({
    where: { action: 'auth.login_failed', actorId: userId, ...(operation !== undefined && { metadata: { path: ['operation'], equals: operation } }) },
  });
}

export type Mail = { to?: string; subject: string; text: string };

/** The mails to `email` with `subject` so far. */
export function mailsTo(h: Pick<Harness, 'mail'>, email: string, subject: string): Mail[] {
  return h.mail().filter((m: Mail) => m.to === email && m.subject === subject);
}

/** Waits for the first `subject` mail to `email` (security notices are sent after the answer). */
export async function noticeTo(h: Pick<Harness, 'mail'>, email: string, subject: string, timeoutMs = 10_000): Promise<Mail> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [mail] = mailsTo(h, email, subject);
    if (mail) return mail;
    if (Date.now() > deadline) throw new Error(`no "${subject}" mail to ${email}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** POST /api-keys as `token` (a key with projects:read unless the body says otherwise). */
export function mintKey(h: Harness, token: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  return request(h.app).post('/api/v1/api-keys').set({ ...bearer(token), ...headers }).send({ name: 'ci', scopes: ['projects:read'], ...body });
}

/** How many API keys the user has. */
export function keysOf(h: Harness, userId: string) {
  return h.deps.prisma.apiKey.count({ where: { userId } });
}

/** The 403 that asks an older session for its password (sudo mode), nothing else. */
export function expectAskedForPassword(res: request.Response): void {
  expect([res.status, res.body]).toEqual([403, { detail: expect.stringContaining('current_password'), code: 'REAUTHENTICATION_REQUIRED' }]);
}

/** The 400 of a wrong current password. */
export function expectWrongPassword(res: request.Response): void {
  expect([res.status, res.body]).toEqual([400, { detail: 'The current password is not correct.', code: 'INVALID_CURRENT_PASSWORD' }]);
}
