// Sudo mode (reauthentication.ts confirmSensitiveChange) on the notification targets: a new chat URL or e-mail
// recipients are a new outside address the organization's findings and reports go to. Creating a target, moving its
// URL, adding a recipient and turning a disabled one back on ask a session signed in more than 10 minutes ago for the
// password; renaming, other fields, removing recipients, turning one off, revoking and test messages never do. A
// request that fails anyway answers its own 4xx first; API keys and recent sessions are not asked.
import pg from 'pg';
import request from 'supertest';
import { pgFields, seal, unseal } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { A_WHILE_AGO, expectAskedForPassword, failedPasswordChecks, signedInAgo } from './support/reauthentication';
import { bearer, createOrg, createUserInOrg, TEST_PASSWORD, type TestOrg, type TestUser } from './support/fixtures';
import { createKey, PUBLIC_URL } from './support/domain';
import { untilBlockedBy } from './support/row-locks';
import { RECENT_SIGN_IN_WINDOW_MS } from '../src/modules/auth/reauthentication';
import { MAX_LIVE_TARGETS } from '../src/modules/notification-targets/notification-targets.service';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const TARGETS = '/api/v1/notification-targets';
const CHAT = { kind: 'slack', name: 'chat', url: PUBLIC_URL, events: ['report.ready'] };
const MAIL = { kind: 'email', name: 'mail', recipients: ['alice@example.com', 'bob@example.com'], events: ['report.ready'] };

const create = (token: string, body: Record<string, unknown>) => request(h.app).post(TARGETS).set(bearer(token)).send(body);
const patch = (token: string, id: string, body: Record<string, unknown>) => request(h.app).patch(`${TARGETS}/${id}`).set(bearer(token)).send(body);
const failedChecks = (user: TestUser, operation?: string) => failedPasswordChecks(h, user.id, operation);
const targetsOf = (org: TestOrg) => h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id, deletedAt: null } });
const rowOf = (id: string) => h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id } });
const storedUrl = async (id: string) => unseal((await rowOf(id)).urlEnc!, h.config.encryptionKey);

function expectNotAsked(res: request.Response, status = 200) {
  expect([res.status, res.body.code]).toEqual([status, undefined]);
}

/** A target made from a recent session; returns its id. */
async function targetOf(org: TestOrg, body: Record<string, unknown>): Promise<string> {
  const res = await create(org.admin.token, body);
  if (res.status !== 201) throw new Error(`target creation failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.id as string;
}

describe('creating a target', () => {
  it('an older session is asked (403, no target); a wrong password is 400 and audited; the right one creates it', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    for (const body of [CHAT, MAIL]) expectAskedForPassword(await create(org.admin.token, body));
    expect(await targetsOf(org)).toBe(0);

    const wrong = await create(org.admin.token, { ...CHAT, current_password: 'not the password at all' });
    expect([wrong.status, wrong.body]).toEqual([400, { detail: 'The current password is not correct.', code: 'INVALID_CURRENT_PASSWORD' }]);
    expect(await targetsOf(org)).toBe(0);
    const failures = await failedChecks(org.admin, 'notification_target_create');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ organizationId: org.id, metadata: { reason: 'invalid_current_password', operation: 'notification_target_create' } });

    expect((await create(org.admin.token, { ...CHAT, current_password: TEST_PASSWORD })).status).toBe(201);
    expect((await create(org.admin.token, { ...MAIL, current_password: TEST_PASSWORD })).status).toBe(201);
    expect(await targetsOf(org)).toBe(2);
  });

  it('a session signed in within the window, and an API key, create without a password', async () => {
    const org = await createOrg(h);
    const key = await createKey(h, org.admin.token, ['notification_targets:configure']);
    await signedInAgo(h, org.admin.token, RECENT_SIGN_IN_WINDOW_MS - 60_000);
    expectNotAsked(await create(org.admin.token, CHAT), 201);
    h.clock.advance(A_WHILE_AGO);
    try {
      expectNotAsked(await create(key, MAIL), 201);
    } finally {
      h.clock.reset();
    }
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });

  it('an account without a password is told to sign in again', async () => {
    const org = await createOrg(h);
    const oauthOnly = await createUserInOrg(h, org.id, 'admin', 'oauth');
    await h.deps.prisma.user.update({ where: { id: oauthOnly.id }, data: { passwordHash: null } });
    await signedInAgo(h, oauthOnly.token, A_WHILE_AGO);
    const res = await create(oauthOnly.token, { ...CHAT, current_password: TEST_PASSWORD });
    expect([res.status, res.body.code, res.body.detail]).toEqual([403, 'REAUTHENTICATION_REQUIRED', expect.stringContaining('Sign in again')]);
    expect(await targetsOf(org)).toBe(0);
  });

  it('a request that fails anyway answers its own 4xx without asking for the password', async () => {
    const org = await createOrg(h);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const refusals = [
      [await create(org.admin.token, { ...CHAT, events: ['no.such_event'] }), 422],
      [await create(org.admin.token, { ...CHAT, url: 'https://127.0.0.1/hooks' }), 422],
      [await create(org.admin.token, { ...CHAT, recipients: ['a@example.com'] }), 400],
    ] as const;
    for (const [res, status] of refusals) expectNotAsked(res, status);
    // The limit, too (counted again under the lock, after the password).
    await h.deps.prisma.webhookSubscription.createMany({
      data: Array.from({ length: MAX_LIVE_TARGETS }, (_, i) => ({
        id: `ntgt_full${org.id.slice(-8)}${i}`, organizationId: org.id, level: 'organization' as const, kind: 'email', payloadFormat: 'email',
        secretEnc: 'x', name: `t${i}`, url: '', events: ['report.ready'], emailRecipients: ['x@example.com'],
      })),
    });
    expectNotAsked(await create(org.admin.token, MAIL), 400);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });
});

describe('changing a target', () => {
  it('a new chat URL asks; the stored URL in another spelling, a new name, events or filter do not', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, CHAT);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expectNotAsked(await patch(org.admin.token, id, { name: 'renamed', events: ['report.ready', 'finding.created'], severity_filter: ['high'] }));
    expectNotAsked(await patch(org.admin.token, id, { url: 'HTTPS://203.0.114.10:443/hooks' }));
    expect(await storedUrl(id)).toBe(PUBLIC_URL);

    const elsewhere = 'https://203.0.114.10/other-channel'; // another path: another channel all the same
    expectAskedForPassword(await patch(org.admin.token, id, { url: elsewhere }));
    expect(await storedUrl(id)).toBe(PUBLIC_URL);
    expect((await patch(org.admin.token, id, { url: elsewhere, current_password: 'wrong one' })).body.code).toBe('INVALID_CURRENT_PASSWORD');
    expect(await failedChecks(org.admin, 'notification_target_destination_change')).toHaveLength(1);
    expectNotAsked(await patch(org.admin.token, id, { url: elsewhere, current_password: TEST_PASSWORD }));
    expect(await storedUrl(id)).toBe(elsewhere);
    // The password alone is no change.
    expect((await patch(org.admin.token, id, { current_password: TEST_PASSWORD })).status).toBe(400);
  });

  it('a new recipient asks; removing, reordering or re-sending recipients in another case do not', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, MAIL);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expectNotAsked(await patch(org.admin.token, id, { recipients: ['Bob@Example.com', 'alice@example.com'] }));
    expectNotAsked(await patch(org.admin.token, id, { recipients: ['alice@example.com'] }));
    expect((await rowOf(id)).emailRecipients).toEqual(['alice@example.com']);

    // bob was a recipient before, but is not now: adding him back is a new address.
    expectAskedForPassword(await patch(org.admin.token, id, { recipients: ['alice@example.com', 'bob@example.com'] }));
    expectAskedForPassword(await patch(org.admin.token, id, { recipients: ['mallory@example.net'] }));
    expect((await rowOf(id)).emailRecipients).toEqual(['alice@example.com']);
    expect((await patch(org.admin.token, id, { recipients: ['mallory@example.net'], current_password: 'wrong one' })).status).toBe(400);
    expect(await failedChecks(org.admin, 'notification_target_destination_change')).toHaveLength(1);
    expectNotAsked(await patch(org.admin.token, id, { recipients: ['alice@example.com', 'mallory@example.net'], current_password: TEST_PASSWORD }));
    expect((await rowOf(id)).emailRecipients).toEqual(['alice@example.com', 'mallory@example.net']);
  });

  it('turning a disabled target back on asks; turning it off, revoking and a test message never do', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, CHAT);
    const other = await targetOf(org, MAIL);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    expectNotAsked(await patch(org.admin.token, id, { active: true })); // already on: no change of where it goes
    expectNotAsked(await request(h.app).post(`${TARGETS}/${id}/test`).set(bearer(org.admin.token)), 202);
    expectNotAsked(await patch(org.admin.token, id, { active: false }));
    expect((await rowOf(id)).status).toBe('disabled');

    expectAskedForPassword(await patch(org.admin.token, id, { active: true }));
    expect((await rowOf(id)).status).toBe('disabled');
    expect((await patch(org.admin.token, id, { active: true, current_password: 'wrong one' })).status).toBe(400);
    expect(await failedChecks(org.admin, 'notification_target_reenable')).toHaveLength(1);
    expectNotAsked(await patch(org.admin.token, id, { active: true, current_password: TEST_PASSWORD }));
    expect((await rowOf(id)).status).toBe('active');

    expectNotAsked(await request(h.app).delete(`${TARGETS}/${other}`).set(bearer(org.admin.token)), 204);
  });

  it('a recent session and an API key change the destination without a password', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, CHAT);
    const key = await createKey(h, org.admin.token, ['notification_targets:configure']);
    expectNotAsked(await patch(org.admin.token, id, { url: 'https://203.0.114.11/recent' }));
    h.clock.advance(A_WHILE_AGO);
    try {
      expectNotAsked(await patch(key, id, { url: 'https://203.0.114.12/key' }));
    } finally {
      h.clock.reset();
    }
    expect(await storedUrl(id)).toBe('https://203.0.114.12/key');
  });

  it('a request that fails anyway answers its own 4xx without asking for the password', async () => {
    const org = await createOrg(h);
    const chat = await targetOf(org, CHAT);
    const mail = await targetOf(org, MAIL);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const refusals = [
      [await patch(org.admin.token, chat, { url: 'https://127.0.0.1/x' }), 422],
      [await patch(org.admin.token, chat, { url: 'https://203.0.114.13/x', events: ['no.such_event'] }), 422],
      [await patch(org.admin.token, mail, { url: 'https://203.0.114.13/x' }), 422],
      [await patch(org.admin.token, chat, { recipients: ['mallory@example.net'] }), 422],
      [await patch(org.admin.token, 'ntgt_nosuchtarget', { url: 'https://203.0.114.13/x' }), 404],
    ] as const;
    for (const [res, status] of refusals) expectNotAsked(res, status);
    expect(await failedChecks(org.admin)).toHaveLength(0);
  });
});

describe('a change made meanwhile', () => {
  /**
   * Sends `send` while a second connection has changed the target's row (`change`, not yet committed): the request
   * reads the row as it was, then waits on the row for its write; the change commits, and the request's answer is
   * returned. A plain UPDATE would write over what the request never judged.
   */
  async function whileChangedMeanwhile(id: string, change: string, params: unknown[], send: () => request.Test) {
    const holder = new pg.Client(pgFields(h.config.databaseUrl));
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(change, [id, ...params]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      const answer = send().then((res) => res);
      await untilBlockedBy(h, pid, 1);
      await holder.query('COMMIT');
      return await answer;
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }

  it('the stored URL sent back while another admin moves the target does not move it back unasked', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, CHAT);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const moved = 'https://203.0.114.20/moved-meanwhile';
    const res = await whileChangedMeanwhile(id, 'UPDATE webhook_subscriptions SET url = $2, url_enc = $3 WHERE id = $1',
      [new URL(moved).origin, seal(moved, h.config.encryptionKey)], () => patch(org.admin.token, id, { url: PUBLIC_URL, name: 'renamed' }));
    expect([res.status, res.body.detail]).toEqual([409, expect.stringContaining('changed while this request ran')]);
    expect(await storedUrl(id)).toBe(moved);
  });

  it('turning on a target the worker disables meanwhile does not re-enable it unasked', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, CHAT);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const res = await whileChangedMeanwhile(id, "UPDATE webhook_subscriptions SET status = 'disabled' WHERE id = $1", [],
      () => patch(org.admin.token, id, { active: true }));
    expect(res.status).toBe(409);
    expect((await rowOf(id)).status).toBe('disabled');
  });
});

describe('the password goes nowhere', () => {
  it('neither a wrong nor the right password is in the targets, the audit log or the idempotency rows', async () => {
    const org = await createOrg(h);
    const id = await targetOf(org, MAIL);
    await signedInAgo(h, org.admin.token, A_WHILE_AGO);
    const wrong = 'Wr0ng-but-distinctive-pa55';
    expect((await create(org.admin.token, { ...CHAT, current_password: wrong })).status).toBe(400);
    expect((await patch(org.admin.token, id, { recipients: ['eve@example.net'], current_password: wrong })).status).toBe(400);
    const made = await request(h.app).post(TARGETS).set({ ...bearer(org.admin.token), 'Idempotency-Key': `sudo-ntgt-${Date.now()}` })
      .send({ ...CHAT, current_password: TEST_PASSWORD });
    expect(made.status).toBe(201);
    expectNotAsked(await patch(org.admin.token, made.body.id, { url: 'https://203.0.114.14/moved', current_password: TEST_PASSWORD }));
    const rows = JSON.stringify([
      await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id } }),
      await h.deps.prisma.webhookSubscription.findMany({ where: { organizationId: org.id } }),
      await h.deps.prisma.idempotencyKey.findMany({ where: { organizationId: org.id } }),
    ]);
    for (const secret of [wrong, TEST_PASSWORD, '"current_password"']) expect(rows).not.toContain(secret);
    const ops = (await failedChecks(org.admin)).map((e) => (e.metadata as { operation?: string }).operation).sort();
    expect(ops).toEqual(['notification_target_create', 'notification_target_destination_change']);
  });
});
