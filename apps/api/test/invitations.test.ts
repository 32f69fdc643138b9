import bcrypt from 'bcrypt';
import request from 'supertest';
import { sha256Hex } from '../src/lib/crypto';
import { INVITATION_TTL_MS } from '../src/modules/invitations/invitations.service';
import { newId } from '@svc/db';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { TEST_PASSWORD, bearer, createOrg, createUserInOrg, type TestOrg, type TestUser } from './support/fixtures';
import { auditLog } from './support/audit-log';
import { whileMailRefused } from './support/smtp';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness({ PUBLIC_BASE_URL: 'https://app.example.test' });
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);
const freshEmail = (label = 'invitee') => `${label}-${uniqueSuffix()}@example.test`;
const invite = (token: string, body: Record<string, unknown>) => api().post('/api/v1/invitations').set(bearer(token)).send(body);
const accept = (body: Record<string, unknown>) => api().post('/api/v1/invitations/accept').send(body);
const NEW_PASSWORD = 'a brand new passphrase';

/** The token of the last invitation e-mailed to this address, read from the link in the message. */
function tokenMailedTo(address: string): string {
  const messages = h.mail().filter((m) => m.to === address);
  expect(messages.length).toBeGreaterThan(0);
  const match = /https:\/\/app\.example\.test\/accept-invite\?token=([A-Za-z0-9_-]+)/.exec(messages[messages.length - 1].text);
  expect(match).not.toBeNull();
  return match![1];
}

async function invited(by = org.admin, role = 'member', address = freshEmail()) {
  const res = await invite(by.token, { email: address, role });
  expect(res.status).toBe(201);
  return { id: res.body.id as string, email: address, token: tokenMailedTo(address) };
}

describe('POST /invitations', () => {
  it('stores the invitation with a hashed token, a 7-day expiry, and mails the accept link', async () => {
    const address = freshEmail();
    const before = Date.now();
    const res = await invite(org.admin.token, { email: address, role: 'manager' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^inv_[0-9a-z]{26}$/),
      email: address,
      role: 'manager',
      status: 'pending',
      invited_by_id: org.admin.id,
      expires_at: expect.any(String),
      accepted_at: null,
      created_at: expect.any(String),
    });
    const week = 7 * 24 * 3600 * 1000;
    const expiresAt = new Date(res.body.expires_at).getTime();
    expect(expiresAt).toBeGreaterThanOrEqual(before + week - 1000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + week + 1000);

    const token = tokenMailedTo(address);
    const mail = h.mail().find((m) => m.to === address)!;
    expect(mail.subject).toContain(org.name);
    expect(mail.text).toContain('manager');
    const row = await h.deps.prisma.invitation.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.tokenHash).toBe(sha256Hex(token));
    expect(JSON.stringify(row)).not.toContain(token);
    expect(JSON.stringify(res.body)).not.toContain(token);
  });

  it('normalises the e-mail address to lower case', async () => {
    const address = freshEmail('MiXeD').replace('@example.test', '@Example.TEST');
    const res = await invite(org.owner.token, { email: address, role: 'member' });
    expect(res.status).toBe(201);
    expect(res.body.email).toBe(address.toLowerCase());
  });

  it('refuses managers and members with 403 naming members:invite', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await invite(user.token, { email: freshEmail(), role: 'member' });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('members:invite');
    }
  });

  it('never invites as owner (400); an admin may invite up to admin', async () => {
    for (const user of [org.owner, org.admin]) {
      const res = await invite(user.token, { email: freshEmail(), role: 'owner' });
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('owner');
    }
    expect((await invite(org.admin.token, { email: freshEmail(), role: 'admin' })).status).toBe(201);
  });

  it('rejects malformed bodies with 400', async () => {
    for (const body of [{ email: 'not-an-email', role: 'member' }, { email: freshEmail(), role: 'king' }, { email: freshEmail() }, {}]) {
      const res = await invite(org.owner.token, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });

  it('answers 409 for an existing member and for an address with a pending invitation', async () => {
    expect((await invite(org.owner.token, { email: org.member.email, role: 'member' })).status).toBe(409);
    const { email } = await invited();
    expect((await invite(org.owner.token, { email, role: 'manager' })).status).toBe(409);
  });
});

describe('GET and DELETE /invitations', () => {
  it('lists the organization\'s invitations to anyone with members:read', async () => {
    const { id } = await invited();
    for (const user of [org.member, org.manager]) {
      const res = await api().get('/api/v1/invitations?limit=100').set(bearer(user.token));
      expect(res.status).toBe(200);
      expect(res.body.data.find((i: { id: string }) => i.id === id)).toMatchObject({ id, status: 'pending' });
    }
  });

  it('revokes a pending invitation; its link then fails with 400', async () => {
    const inv = await invited();
    const denied = await api().delete(`/api/v1/invitations/${inv.id}`).set(bearer(org.manager.token));
    expect(denied.status).toBe(403);
    expect(denied.body.detail).toContain('members:invite');
    expect((await api().delete(`/api/v1/invitations/${inv.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await h.deps.prisma.invitation.count({ where: { id: inv.id } })).toBe(0);
    expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(400);
    expect((await api().delete(`/api/v1/invitations/${inv.id}`).set(bearer(org.admin.token))).status).toBe(404);
  });

  it('refuses to revoke an accepted invitation (409)', async () => {
    const inv = await invited();
    expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(200);
    expect((await api().delete(`/api/v1/invitations/${inv.id}`).set(bearer(org.admin.token))).status).toBe(409);
    const list = await api().get('/api/v1/invitations?limit=100').set(bearer(org.admin.token));
    expect(list.body.data.find((i: { id: string }) => i.id === inv.id).status).toBe('accepted');
  });
});

describe('POST /invitations/accept', () => {
  it('creates an active user with the chosen password for a new address, with the invited role', async () => {
    const inv = await invited(org.admin, 'manager');
    const res = await accept({ token: inv.token, name: 'New Person', password: NEW_PASSWORD });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      organization: { id: org.id, name: org.name },
      user_id: expect.stringMatching(/^usr_/),
      email: inv.email,
      role: 'manager',
      new_user: true,
    });
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: res.body.user_id } });
    expect(user.status).toBe('active');
    expect(user.emailVerifiedAt).toBeInstanceOf(Date);
    expect(user.name).toBe('New Person');
    expect(user.passwordHash).toMatch(/^\$2[aby]\$/);
    expect(await bcrypt.compare(NEW_PASSWORD, user.passwordHash!)).toBe(true);
    const membership = await h.deps.prisma.membership.findUnique({
      where: { organizationId_userId: { organizationId: org.id, userId: user.id } },
    });
    expect(membership!.role).toBe('manager');
    expect((await h.deps.prisma.invitation.findUniqueOrThrow({ where: { id: inv.id } })).acceptedAt).toBeInstanceOf(Date);
  });

  it('refuses to use a link twice (400)', async () => {
    const inv = await invited();
    expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(200);
    const again = await accept({ token: inv.token, password: NEW_PASSWORD });
    expect(again.status).toBe(400);
    expect(again.body).toEqual({ detail: expect.any(String) });
  });

  it('refuses unknown and expired tokens (400)', async () => {
    expect((await accept({ token: 'no-such-token', password: NEW_PASSWORD })).status).toBe(400);
    const inv = await invited();
    h.clock.advance(7 * 24 * 3600 * 1000 + 60_000);
    try {
      expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(400);
    } finally {
      h.clock.reset();
    }
    const list = await api().get('/api/v1/invitations?limit=100').set(bearer(org.admin.token));
    expect(list.body.data.find((i: { id: string }) => i.id === inv.id).status).toBe('pending');
    expect(await h.deps.prisma.user.count({ where: { email: inv.email } })).toBe(0);
  });

  it('requires an acceptable password for a new account: missing, short or over 72 bytes is 400', async () => {
    const inv = await invited();
    expect((await accept({ token: inv.token })).status).toBe(400);
    expect((await accept({ token: inv.token, password: 'short' })).status).toBe(400);
    const tooLong = 'é'.repeat(37); // 37 characters, 74 bytes
    const res = await accept({ token: inv.token, password: tooLong });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('72 bytes');
    expect(await h.deps.prisma.user.count({ where: { email: inv.email } })).toBe(0);
    // The link is still good after refused attempts.
    expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(200);
  });

  it('adds an existing user after they prove their password; their account is otherwise unchanged', async () => {
    const elsewhere = await createOrg(h);
    const inv = await invited(org.admin, 'member', elsewhere.manager.email);
    const before = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: elsewhere.manager.id } });

    expect((await accept({ token: inv.token })).status).toBe(400);
    const wrong = await accept({ token: inv.token, password: 'not the right password' });
    expect(wrong.status).toBe(401);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: org.id, userId: elsewhere.manager.id } })).toBe(0);

    const res = await accept({ token: inv.token, password: TEST_PASSWORD, name: 'ignored' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ user_id: elsewhere.manager.id, role: 'member', new_user: false });
    const after = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: elsewhere.manager.id } });
    expect(after.passwordHash).toBe(before.passwordHash);
    expect(after.name).toBe(before.name);
    const memberships = await h.deps.prisma.membership.findMany({ where: { userId: elsewhere.manager.id } });
    expect(memberships.map((m) => [m.organizationId, m.role]).sort()).toEqual([[elsewhere.id, 'manager'], [org.id, 'member']].sort());
  });

  it("activates an account still pending (someone else's signup with the address) with the password given now, not the signup's", async () => {
    // A stranger signed up with the invitee's address first and never verified it: the invitee, holding the mailed
    // invitation, could not accept without the stranger's password (401), and accepting with it kept it.
    const address = freshEmail('squatted');
    const squat = await api().post('/api/v1/auth/signup').send({ email: address, password: 'the stranger chose this one', name: 'Stranger', organization_name: 'Squat' });
    expect(squat.status).toBe(201);
    const inv = await invited(org.admin, 'member', address);
    expect((await accept({ token: inv.token })).status).toBe(400);
    expect((await accept({ token: inv.token, password: 'short' })).status).toBe(400);

    const res = await accept({ token: inv.token, password: NEW_PASSWORD });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ user_id: squat.body.user_id, role: 'member', new_user: false });
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { id: squat.body.user_id } });
    expect(user.status).toBe('active');
    expect(await bcrypt.compare(NEW_PASSWORD, user.passwordHash!)).toBe(true);
    expect((await api().post('/api/v1/auth/login').send({ email: address, password: 'the stranger chose this one' })).status).toBe(401);
    expect((await api().post('/api/v1/auth/login').send({ email: address, password: NEW_PASSWORD })).status).toBe(200);
  });

  it("counts an existing account's password guesses with its logins: past the login limit (10 a minute per e-mail) 429, even for the right password", async () => {
    // The accept route checks the account's password: without the login's per-e-mail count it was a second,
    // faster place to guess it (only the 600-a-minute per-client limit applied).
    const elsewhere = await createOrg(h);
    const inv = await invited(org.admin, 'member', elsewhere.member.email);
    for (let i = 0; i < 10; i++) expect((await accept({ token: inv.token, password: `guess number ${i}` })).status).toBe(401);
    const limited = await accept({ token: inv.token, password: TEST_PASSWORD });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: org.id, userId: elsewhere.member.id } })).toBe(0);
    // The same count as the login's: a password login of that account is limited too.
    expect((await api().post('/api/v1/auth/login').send({ email: elsewhere.member.email, password: TEST_PASSWORD })).status).toBe(429);
  });

  it('answers 409 when the invitee is already a member, and leaves the invitation unused', async () => {
    const inv = await invited();
    const first = await accept({ token: inv.token, password: NEW_PASSWORD });
    expect(first.status).toBe(200);
    // A second invitation to the same (now member) address can no longer be created...
    expect((await invite(org.admin.token, { email: inv.email, role: 'member' })).status).toBe(409);
    // ...and one created before they joined answers 409 on accept.
    const other = await createOrg(h);
    const stale = await invited(other.admin, 'member', freshEmail('stale'));
    await h.deps.prisma.user.create({
      data: { id: newId('usr'), email: stale.email, name: 's', passwordHash: await bcrypt.hash(NEW_PASSWORD, 4), status: 'active' },
    });
    const user = await h.deps.prisma.user.findUniqueOrThrow({ where: { email: stale.email } });
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: other.id, userId: user.id, role: 'member' } });
    const res = await accept({ token: stale.token, password: NEW_PASSWORD });
    expect(res.status).toBe(409);
    expect((await h.deps.prisma.invitation.findUniqueOrThrow({ where: { id: stale.id } })).acceptedAt).toBeNull();
  });

  it('accepts a link only once under concurrency', async () => {
    const inv = await invited();
    const results = await Promise.all([1, 2, 3].map(() => accept({ token: inv.token, password: NEW_PASSWORD })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    for (const s of statuses.filter((x) => x !== 200)) expect([400, 409]).toContain(s);
    expect(await h.deps.prisma.user.count({ where: { email: inv.email } })).toBe(1);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: org.id, user: { email: inv.email } } })).toBe(1);
    // The accepts that lost the race rolled back their audit entry with the rest.
    const accepted = await auditLog(h, org.owner.token, { action: 'invitation.accepted' });
    expect(accepted.filter((e) => e.metadata?.invitation_id === inv.id)).toHaveLength(1);
  });

  it('rejects a malformed body with 400', async () => {
    expect((await accept({})).status).toBe(400);
    expect((await accept({ token: 'x', password: 'y', extra: 1 })).status).toBe(400);
  });
});

describe('invitations sent by someone who lost the right to send them', () => {
  // An admin invites a second address of their own as admin, is then demoted or removed, and accepts the link:
  // before, the link still made that address an admin, so the demotion or removal was undone by its subject.
  it.each([
    ['demoted to member', 'member.role_changed', (u: { id: string }) => api().patch(`/api/v1/members/${u.id}`).set(bearer(org.owner.token)).send({ role: 'member' })],
    ['removed', 'member.removed', (u: { id: string }) => api().delete(`/api/v1/members/${u.id}`).set(bearer(org.owner.token))],
  ])('an admin %s: their pending invitations no longer admit anyone (400), nothing is created; %s counts them', async (_label, action, demote) => {
    const admin = await createUserInOrg(h, org.id, 'admin', 'soon-demoted');
    const inv = await invited(admin, 'admin', freshEmail('alt'));
    const other = await invited(org.admin, 'member', freshEmail('unrelated'));
    // The same person's invitation in another organization, where they keep their role.
    const elsewhere = await createOrg(h);
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: elsewhere.id, userId: admin.id, role: 'admin' } });
    const theirs = await h.deps.prisma.invitation.create({
      data: {
        id: newId('inv'), organizationId: elsewhere.id, email: freshEmail('theirs'), role: 'admin', tokenHash: sha256Hex(`t-${uniqueSuffix()}`),
        invitedById: admin.id, expiresAt: new Date(Date.now() + 3600_000),
      },
    });
    const res = await demote(admin);
    expect([200, 204]).toContain(res.status);
    // This organization's one invitation of theirs, not the other organization's.
    const [entry] = await auditLog(h, org.owner.token, { action, target_id: admin.id });
    expect(entry.metadata).toMatchObject({ invitations_revoked: 1 });

    const accepted = await accept({ token: inv.token, password: NEW_PASSWORD });
    expect(accepted.status).toBe(400);
    expect(accepted.body).toEqual({ detail: expect.any(String) });
    expect(await h.deps.prisma.user.count({ where: { email: inv.email } })).toBe(0);
    expect(await h.deps.prisma.membership.count({ where: { organizationId: org.id, user: { email: inv.email } } })).toBe(0);
    const listed = await api().get('/api/v1/invitations?limit=100').set(bearer(org.owner.token));
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((i: { id: string }) => i.id)).not.toContain(inv.id);
    expect(await h.deps.prisma.invitation.findUnique({ where: { id: theirs.id } })).not.toBeNull();
    // Invitations sent by others stay valid.
    expect((await accept({ token: other.token, password: NEW_PASSWORD })).status).toBe(200);
  });

  it('a demotion that keeps the admin role (ownership transfer) leaves their invitations valid', async () => {
    const local = await createOrg(h);
    const inv = await invited(local.owner, 'admin', freshEmail('kept'));
    const moved = await api().post('/api/v1/organization/transfer-ownership').set(bearer(local.owner.token)).send({ user_id: local.admin.id });
    expect(moved.status).toBe(200);
    const accepted = await accept({ token: inv.token, password: NEW_PASSWORD });
    expect(accepted.status).toBe(200);
    expect(accepted.body.role).toBe('admin');
  });
});

describe('the audit log', () => {
  const listed = (viewer: TestUser, action: string) => auditLog(h, viewer.token, { action });
  const revoke = (by: TestUser, id: string) => api().delete(`/api/v1/invitations/${id}`).set(bearer(by.token));

  it('invitation.created and invitation.revoked: by whoever did it, the invitation as target, its e-mail and role', async () => {
    const local = await createOrg(h);
    const inv = await invited(local.admin, 'manager');
    const byAdmin = { actor_type: 'user', actor_id: local.admin.id, actor_label: local.admin.email, target_type: 'invitation', target_id: inv.id };
    expect(await listed(local.owner, 'invitation.created')).toEqual([
      expect.objectContaining({ ...byAdmin, metadata: { email: inv.email, role: 'manager' } }),
    ]);
    expect((await revoke(local.admin, inv.id)).status).toBe(204);
    expect(await listed(local.owner, 'invitation.revoked')).toEqual([
      expect.objectContaining({ ...byAdmin, metadata: { email: inv.email, role: 'manager', reason: 'user' } }),
    ]);
    // Revoking it again changes nothing and records nothing.
    expect((await revoke(local.admin, inv.id)).status).toBe(404);
    expect(await listed(local.owner, 'invitation.revoked')).toHaveLength(1);
  });

  it('records nothing for a refused invitation or revocation (403, 400, 409, 404)', async () => {
    const local = await createOrg(h);
    const inv = await invited(local.admin);
    const accepted = await invited(local.admin);
    expect((await accept({ token: accepted.token, password: NEW_PASSWORD })).status).toBe(200);
    const before = await auditLog(h, local.owner.token);
    expect((await invite(local.manager.token, { email: freshEmail(), role: 'member' })).status).toBe(403);
    expect((await invite(local.admin.token, { email: freshEmail(), role: 'owner' })).status).toBe(400);
    expect((await invite(local.admin.token, { email: inv.email, role: 'member' })).status).toBe(409);
    expect((await revoke(local.manager, inv.id)).status).toBe(403);
    expect((await revoke(local.member, inv.id)).status).toBe(403);
    expect((await revoke(local.admin, accepted.id)).status).toBe(409);
    expect((await revoke(local.admin, 'inv_doesnotexist')).status).toBe(404);
    expect(await auditLog(h, local.owner.token)).toEqual(before);
    // The one that is allowed is recorded, once.
    expect((await revoke(local.admin, inv.id)).status).toBe(204);
    const added = (await auditLog(h, local.owner.token)).filter((e) => !before.some((b) => b.id === e.id));
    expect(added).toEqual([expect.objectContaining({ action: 'invitation.revoked', target_id: inv.id })]);
  });

  it('when the invitation cannot be mailed it is revoked, and the audit log says why', async () => {
    const local = await createOrg(h);
    const address = freshEmail('unlucky');
    const working = h.deps.mailer;
    h.deps.mailer = { send: async () => { throw new Error('the mail server is down'); } };
    try {
      const refused = await invite(local.admin.token, { email: address, role: 'member' });
      expect(refused.status).toBe(503);
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
      expect(refused.body).toEqual({ detail: expect.stringContaining('the mail server') });
    } finally {
      h.deps.mailer = working;
    }
    const [created] = await listed(local.owner, 'invitation.created');
    expect(created.metadata).toEqual({ email: address, role: 'member' });
    expect(await listed(local.owner, 'invitation.revoked')).toEqual([
      expect.objectContaining({ target_id: created.target_id, metadata: { email: address, role: 'member', reason: 'mail_failed' } }),
    ]);
    // A retry is not refused as "already pending".
    expect((await invite(local.admin.token, { email: address, role: 'member' })).status).toBe(201);
  });

  it("when the mail fails after its sender was demoted meanwhile: the invitation is gone, taken back by the demotion (which counts it), never left to accept", async () => {
    const local = await createOrg(h);
    const address = freshEmail('never-told');
    const working = h.deps.mailer;
    // As the mail goes out (the invitation committed), the owner demotes its sender; then the transport fails.
    h.deps.mailer = {
      send: async () => {
        expect((await request(h.app).patch(`/api/v1/members/${local.admin.id}`).set(bearer(local.owner.token)).send({ role: 'member' })).status).toBe(200);
        throw new Error('the mail server is down');
      },
    };
    try {
      expect((await invite(local.admin.token, { email: address, role: 'member' })).status).toBe(503);
    } finally {
      h.deps.mailer = working;
    }
    expect(await h.deps.prisma.invitation.count({ where: { organizationId: local.id, email: address } })).toBe(0);
    // The demotion took it back in its own transaction; the service's revocation after the failed mail found nothing
    // left to revoke (and records nothing twice).
    expect(await listed(local.owner, 'invitation.revoked')).toEqual([]);
    expect(await listed(local.owner, 'member.role_changed')).toEqual([
      expect.objectContaining({ target_id: local.admin.id, metadata: expect.objectContaining({ role: 'member', invitations_revoked: 1 }) }),
    ]);
  });

  it("a mail server's refusal of the invitation is logged without the address it quotes", async () => {
    const local = await createOrg(h);
    const address = freshEmail('refused');
    const { logged, refused } = await whileMailRefused(h, async () => {
      // Refused for good (SMTP 550): 422, the address to be checked (a server out of reach: 503, above).
      expect((await invite(local.admin.token, { email: address, role: 'member' })).status).toBe(422);
    });
    expect(refused).toEqual([address]);
    expect(logged).toContainEqual(['Mailing an invitation failed; the invitation is revoked', { invitation_id: expect.any(String), error: expect.stringContaining('Recipient address rejected') }]);
    // Logged with its stack, whose paths may hold an "@" (node_modules/.pnpm/name@version): the address's own part.
    expect(JSON.stringify(logged)).not.toContain(address.split('@')[0]);
  });

  it("invitation.accepted: in the invitation's organization, by the user who accepted, a new or an existing account", async () => {
    const local = await createOrg(h);
    const elsewhere = await createOrg(h);
    const fresh = await invited(local.admin, 'manager');
    const joined = await accept({ token: fresh.token, password: NEW_PASSWORD });
    expect(joined.status).toBe(200);
    const existing = await invited(local.admin, 'member', elsewhere.member.email);
    expect((await accept({ token: existing.token, password: TEST_PASSWORD })).status).toBe(200);

    const newUserId = joined.body.user_id as string;
    expect(await listed(local.owner, 'invitation.accepted')).toEqual([
      expect.objectContaining({
        actor_type: 'user', actor_id: elsewhere.member.id, actor_label: elsewhere.member.email, target_type: 'user', target_id: elsewhere.member.id,
        metadata: { invitation_id: existing.id, role: 'member', new_user: false },
      }),
      expect.objectContaining({
        actor_type: 'user', actor_id: newUserId, actor_label: fresh.email, target_type: 'user', target_id: newUserId,
        metadata: { invitation_id: fresh.id, role: 'manager', new_user: true },
      }),
    ]);
    // The organization the existing user came from is told nothing.
    expect(await listed(elsewhere.owner, 'invitation.accepted')).toEqual([]);
  });

  it('records nothing for an unknown, expired or used token or a refused password; a wrong password of an existing account only in its own organizations', async () => {
    const local = await createOrg(h);
    const elsewhere = await createOrg(h);
    const before = await auditLog(h, local.owner.token);
    expect((await accept({ token: 'no-such-token', password: NEW_PASSWORD })).status).toBe(400);
    const inv = await invited(local.admin);
    expect((await accept({ token: inv.token, password: 'short' })).status).toBe(400);
    h.clock.advance(INVITATION_TTL_MS + 60_000);
    try {
      expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(400);
    } finally {
      h.clock.reset();
    }
    const theirs = await invited(local.admin, 'member', elsewhere.manager.email);
    expect((await accept({ token: theirs.token, password: 'not the right password' })).status).toBe(401);
    expect(await listed(local.owner, 'invitation.accepted')).toEqual([]);
    // The guess at the existing account's password is recorded where that account is a member, like a failed sign-in.
    expect(await listed(elsewhere.owner, 'auth.login_failed')).toEqual([
      expect.objectContaining({ target_id: elsewhere.manager.id, metadata: { reason: 'invalid_password', operation: 'invitation_accept' } }),
    ]);

    expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(200);
    expect((await accept({ token: inv.token, password: NEW_PASSWORD })).status).toBe(400);
    expect(await listed(local.owner, 'invitation.accepted')).toHaveLength(1);
    expect((await auditLog(h, local.owner.token)).filter((e) => !before.some((b) => b.id === e.id)).map((e) => e.action).sort()).toEqual(
      ['invitation.accepted', 'invitation.created', 'invitation.created'],
    );
  });

  it("one organization's invitations show in no other organization's audit log", async () => {
    const a = await createOrg(h);
    const b = await createOrg(h);
    const kept = await invited(a.admin);
    const dropped = await invited(a.admin);
    expect((await revoke(a.admin, dropped.id)).status).toBe(204);
    expect((await accept({ token: kept.token, password: NEW_PASSWORD })).status).toBe(200);
    const ofA = await auditLog(h, a.owner.token);
    expect(ofA.map((e) => e.action).sort()).toEqual(['invitation.accepted', 'invitation.created', 'invitation.created', 'invitation.revoked']);
    const theirs = await invited(b.admin);
    // B's admin cannot revoke A's invitation (404), and neither log says anything of the attempt.
    const pending = await invited(a.admin);
    expect((await revoke(b.admin, pending.id)).status).toBe(404);
    expect(await auditLog(h, a.owner.token, { action: 'invitation.revoked' })).toHaveLength(1);
    const ofB = await auditLog(h, b.owner.token);
    expect(ofB).toEqual([expect.objectContaining({ action: 'invitation.created', target_id: theirs.id })]);
    for (const value of [...ofA.map((e) => e.id), kept.id, dropped.id, kept.email, dropped.email]) expect(JSON.stringify(ofB)).not.toContain(value);
  });

  it('never holds an invitation token, nor its hash', async () => {
    const local = await createOrg(h);
    const accepted = await invited(local.admin);
    const revoked = await invited(local.admin);
    expect((await accept({ token: accepted.token, password: NEW_PASSWORD })).status).toBe(200);
    expect((await revoke(local.admin, revoked.id)).status).toBe(204);
    const page = await auditLog(h, local.owner.token);
    expect(page).toHaveLength(4);
    const text = JSON.stringify(page);
    for (const token of [accepted.token, revoked.token]) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(sha256Hex(token));
    }
  });
});
