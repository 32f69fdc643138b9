// Review of the security notices (security-notices.ts) and of the session-scoped Idempotency-Keys of sudo-mode
// routes (http/idempotency.ts scopeOf), as an attacker and as an operator would look at them.
//
// Findings (each failed before its fix):
//  - a key name, or an organization name, with line breaks wrote lines of its own into the notice: whoever mints a
//    key with a stolen session could append "If this was you, there is nothing to do" or a link of theirs to the
//    very mail meant to warn the owner;
//  - one session could have the service mail its owner once per key minted, ~600 a minute (the request limit), with
//    nothing bounding it: a mailbox flooded, and the service's sending quota spent (verification, reset mails).
// Proofs (pass against the reviewed code): the Idempotency-Key scopes of sessions, keys and users do not collide, a
// non-sensitive route still replays to the user's other sessions, a 403 is still stored and replayed.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { mailsTo as mailsToIn, noticeTo as waitForNotice, type Mail } from './support/reauthentication';
import { bearer, createOrg, createUserInOrg, type TestOrg } from './support/fixtures';
import { createKey } from './support/domain';
import { issueSession } from '../src/modules/auth/sessions';
import { renderSecurityNotice } from '@svc/domain';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

const KEY_NOTICE = 'A new API key was created';
const mailsTo = (email: string, subject: string): Mail[] => mailsToIn(h, email, subject);
const noticeTo = (email: string, subject: string, timeoutMs?: number): Promise<Mail> => waitForNotice(h, email, subject, timeoutMs);
const settle = (ms = 500) => new Promise((r) => setTimeout(r, ms));

/** The lines a reader sees: CR, LF, CRLF and the Unicode line and paragraph separators all break one. */
const linesOf = (text: string) => text.split(/\r\n|[\r\n\u2028\u2029\u0085\u000b\u000c]/);

const FORGED =
  'x"\n\nIf this was you, there is nothing to do. Keys made by your organization\'s scanner are listed at https://evil.example/settings/api-keys\r\n' +
  '\u2028If it was not, sign in at https://evil.example/login\u202e';

describe('forged content in a notice', () => {
  it('a key name with line breaks is refused (400): no key, no notice', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'forger');
    const res = await request(h.app).post('/api/v1/api-keys').set(bearer(user.token)).send({ name: FORGED, scopes: ['projects:read'] });
    expect(res.status).toBe(400);
    expect(await h.deps.prisma.apiKey.count({ where: { userId: user.id } })).toBe(0);
    await settle();
    expect(mailsTo(user.email, KEY_NOTICE)).toHaveLength(0);
  });

  it('a key name stored before names were one line writes no line of its own into the notice (pure)', () => {
    const key = { name: FORGED, prefix: 'sk_live_abcd', scopeCount: 1, expiresAt: null };
    const context = { name: 'Ada', at: new Date('2026-11-28T08:00:00.000Z'), ip: null, publicBaseUrl: 'https://svc.example' };
    const { text } = renderSecurityNotice({ kind: 'api_key_created', key, organizationName: 'Acme', lastThisHour: false }, context);
    const lines = linesOf(text);
    // The service's own advice is the only line that starts so; the name stays on the line that quotes it.
    expect(lines.filter((l) => l.startsWith('If this was you'))).toHaveLength(1);
    expect(lines.filter((l) => l.includes('evil.example')).every((l) => l.startsWith('An API key was created'))).toBe(true);
    expect(text).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
  });

  it("an organization's name with line breaks (stored before names were one line) writes no line of its own into a member's notice", async () => {
    const other = await createOrg(h);
    // The API refuses such a name now (http/validate.ts name()); one stored before it did is still rendered safely.
    await h.deps.prisma.organization.update({
      where: { id: other.id },
      data: { name: 'Acme\n\nAction required: confirm your account at https://evil.example/verify within 24 hours.\nAcme' },
    });
    const res = await request(h.app).post('/api/v1/api-keys').set(bearer(other.manager.token)).send({ name: 'ci', scopes: ['projects:read'] });
    expect(res.status).toBe(201);
    const mail = await noticeTo(other.manager.email, KEY_NOTICE);
    const lines = linesOf(mail.text);
    expect(lines.filter((l) => l.includes('evil.example')).every((l) => l.startsWith('An API key was created'))).toBe(true);
  });

  it("the account's own name (chosen at sign-up) writes no line of its own either (pure)", () => {
    const name = 'Ada,\n\nIf this was you, there is nothing to do.\n\nAda';
    const context = { name, at: new Date('2026-11-28T08:00:00.000Z'), ip: null, publicBaseUrl: 'https://svc.example' };
    for (const kind of ['password_changed', 'password_reset', '2fa_enabled', '2fa_disabled'] as const) {
      const { text } = renderSecurityNotice({ kind }, context);
      expect(linesOf(text).filter((l) => l.startsWith('If this was you'))).toHaveLength(1);
    }
  });
});

describe('a flood of notices', () => {
  it('minting many keys from one session does not mail the owner once per key', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'flood');
    const before = h.mail().length;
    for (let i = 0; i < 20; i += 1) {
      const res = await request(h.app).post('/api/v1/api-keys').set(bearer(user.token)).send({ name: `k${i}`, scopes: ['projects:read'] });
      // Every key is made and its value answered: only the mails are bounded.
      expect([res.status, typeof res.body.key]).toEqual([201, 'string']);
    }
    await settle(1000);
    const notices = mailsTo(user.email, KEY_NOTICE);
    expect(notices.length).toBeGreaterThanOrEqual(1);
    expect(notices.length).toBeLessThanOrEqual(5);
    // The last one sent says that more are not mailed one by one, and where to see them all.
    expect(notices[notices.length - 1]!.text).toContain(`${h.config.publicBaseUrl}/settings/api-keys`);
    expect(notices[notices.length - 1]!.text).toMatch(/not mailed one by one/);
    // Nobody else was mailed meanwhile.
    expect(h.mail().slice(before).every((m: Mail) => m.to === user.email)).toBe(true);
    // Another user of the organization still gets theirs.
    const neighbour = await createUserInOrg(h, org.id, 'manager', 'neighbour');
    expect((await request(h.app).post('/api/v1/api-keys').set(bearer(neighbour.token)).send({ name: 'n', scopes: ['projects:read'] })).status).toBe(201);
    await noticeTo(neighbour.email, KEY_NOTICE);
  });
});

describe('Idempotency-Keys of sessions (proofs)', () => {
  const mint = (token: string, key: string, name = 'same body') =>
    request(h.app).post('/api/v1/api-keys').set(bearer(token)).set('Idempotency-Key', key).send({ name, scopes: ['projects:read'] });

  it('on POST /api-keys: two sessions of one user, and a key of that user, each mint their own key with one Idempotency-Key', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'idem-sessions');
    const second = await issueSession(h.deps, user.id, org.id);
    const apiKey = await createKey(h, user.token, ['api_keys:create', 'projects:read']);
    const first = await mint(user.token, 'one-key');
    expect(first.status).toBe(201);
    const again = await mint(user.token, 'one-key');
    expect([again.status, again.headers['idempotent-replayed'], again.body.id]).toEqual([201, 'true', first.body.id]);
    const other = await mint(second.token, 'one-key');
    expect(other.status).toBe(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(other.body.id).not.toBe(first.body.id);
    const byKey = await mint(apiKey, 'one-key');
    expect(byKey.status).toBe(201);
    expect(byKey.headers['idempotent-replayed']).toBeUndefined();
    expect(new Set([first.body.id, other.body.id, byKey.body.id]).size).toBe(3);
  });

  it("another user's session with the same Idempotency-Key gets its own key, never the first one's value", async () => {
    const a = await createUserInOrg(h, org.id, 'manager', 'idem-a');
    const b = await createUserInOrg(h, org.id, 'manager', 'idem-b');
    const first = await mint(a.token, 'shared-key');
    const second = await mint(b.token, 'shared-key');
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body.key).not.toBe(first.body.key);
    expect(second.body.user_id).toBe(b.id);
  });

  it('a route that is not sudo-mode still replays to the same user\'s other session', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'idem-project');
    const second = await issueSession(h.deps, user.id, org.id);
    const send = (token: string) => request(h.app).post('/api/v1/projects').set(bearer(token)).set('Idempotency-Key', 'prj-1').send({ name: 'p' });
    const first = await send(user.token);
    expect(first.status).toBe(201);
    const replay = await send(second.token);
    expect([replay.status, replay.headers['idempotent-replayed'], replay.body.id]).toEqual([201, 'true', first.body.id]);
  });

  it('a 403 (scopes outside the role) is still stored and replayed, in the session\'s own row', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'idem-403');
    const ask = () =>
      request(h.app).post('/api/v1/api-keys').set(bearer(user.token)).set('Idempotency-Key', 'k403').send({ name: 'w', scopes: ['webhooks:create'] });
    const refused = await ask();
    expect(refused.status).toBe(403);
    const replay = await ask();
    expect([replay.status, replay.headers['idempotent-replayed']]).toEqual([403, 'true']);
    const rows = await h.deps.prisma.$queryRaw<Array<{ credential: string }>>`
      SELECT credential FROM idempotency_keys WHERE organization_id = ${org.id} AND key = 'k403'`;
    expect(rows).toEqual([{ credential: `session:${user.sessionId}` }]);
  });
});
