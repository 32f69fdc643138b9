// The audit log: one entry per security-relevant action (actor, organization, action, target, time, IP, user
// agent), listing with filters and cursor pagination, JSON Lines and CSV exports, the scopes that guard them,
// isolation between organizations, and never a secret in the table.
import pg from 'pg';
import request from 'supertest';
import { AUDIT_ACTIONS } from '@svc/audit';
import type { AuditEvent } from '@svc/db';
import { newId, pgFields } from '@svc/db';
import { csvField } from '../src/http/csv';
import { AUDIT_CSV_COLUMNS, auditCsvRecord, presentAuditEvent } from '../src/modules/audit/audit.service';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { TEST_PASSWORD, bearer, createOrg, createUserInOrg, insertGrant, insertProject, type TestOrg, type TestUser } from './support/fixtures';
import { oathtoolCode, signupAndVerify, wrongCode } from './support/auth-helpers';
import { untilBlockedBy } from './support/row-locks';

const IP = '203.0.113.7';
const UA = 'audit-test/1.0 (+https://example.test)';
const PUBLIC_URL = 'https://203.0.114.10/hooks';
const STEP_MS = 30_000;

let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  // Behind a proxy: the client address is the X-Forwarded-For the tests send.
  h = await createHarness({ TRUST_PROXY: 'true', LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
/** A request from a known client address and user agent, with a credential when given. */
function call(method: Method, path: string, token?: string) {
  const req = request(h.app)[method](`/api/v1${path}`).set('User-Agent', UA).set('X-Forwarded-For', IP);
  return token ? req.set(bearer(token)) : req;
}

/** An export, its body read as text whatever its content type. */
function download(query: string, token: string) {
  return call('get', `/audit-events/export${query}`, token)
    .buffer(true)
    .parse((res, done) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done(null, text));
    });
}

/** RFC 4180 records (CRLF line ends, quoted fields with doubled quotes): checks the export's syntax too. */
function parseCsv(text: string): string[][] {
  const records: string[][] = [];
  let field = '';
  let record: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === '"' && field === '') {
      const end = (function findEnd(from: number): number {
        const q = text.indexOf('"', from);
        if (q < 0) throw new Error('unterminated quoted field');
        return text[q + 1] === '"' ? findEnd(q + 2) : q;
      })(i + 1);
      field = text.slice(i + 1, end).replace(/""/g, '"');
      i = end + 1;
      if (![',', '\r'].includes(text[i])) throw new Error(`garbage after a quoted field at ${i}`);
      if (text[i] === ',') {
        record.push(field);
        field = '';
        i++;
        if (text[i] === '\r') throw new Error('empty last field not expected here');
        continue;
      }
    }
    if (text.startsWith('\r\n', i)) {
      record.push(field);
      records.push(record);
      record = [];
      field = '';
      i += 2;
    } else if (text[i] === ',') {
      record.push(field);
      field = '';
      i++;
    } else {
      if (text[i] === '"' || text[i] === '\n' || text[i] === '\r') throw new Error(`bare ${JSON.stringify(text[i])} at ${i}`);
      field += text[i++];
    }
  }
  if (field !== '' || record.length > 0) throw new Error('the last record has no CRLF');
  return records;
}

/** The audit rows of an organization (straight from the table), newest first. */
function rows(organizationId: string, where: { action?: string; targetId?: string; actorId?: string } = {}) {
  return h.deps.prisma.auditEvent.findMany({ where: { organizationId, ...where }, orderBy: { id: 'desc' } });
}

/** Rows written after the response (a failed login is recorded without delaying the answer). */
async function eventually<T>(read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  for (let i = 0; ; i++) {
    const value = await read();
    if (done(value) || i >= 100) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function only(organizationId: string, where: { action: string; targetId?: string; actorId?: string }): Promise<AuditEvent> {
  const found = await rows(organizationId, where);
  expect(found).toHaveLength(1);
  return found[0];
}

function expectFromRequest(e: AuditEvent) {
  expect(e.ip).toBe(IP);
  expect(e.userAgent).toBe(UA);
  expect(e.createdAt.getTime()).toBeGreaterThan(Date.now() - 60_000);
}

const byUser = (u: TestUser) => ({ actorType: 'user', actorId: u.id, actorLabel: u.email });

describe('what is recorded', () => {
  it('auth.login: a password login, in the organization of the session, with the session as target', async () => {
    const res = await call('post', '/auth/login').send({ email: org.member.email, password: TEST_PASSWORD });
    expect(res.status).toBe(200);
    const [e] = await rows(org.id, { action: 'auth.login', actorId: org.member.id });
    expect(e).toMatchObject({ ...byUser(org.member), targetType: 'session', metadata: { method: 'password' } });
    expect(e.targetId).toMatch(/^ses_/);
    expectFromRequest(e);
  });

  it('auth.login_failed: a known user in each of their organizations; an unknown e-mail is not recorded', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'twoorgs');
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: other.id, userId: user.id, role: 'member' } });
    const res = await call('post', '/auth/login').send({ email: user.email, password: 'not the password at all' });
    expect(res.status).toBe(401);
    for (const orgId of [org.id, other.id]) {
      await eventually(() => rows(orgId, { action: 'auth.login_failed', actorId: user.id }), (found) => found.length > 0);
      const e = await only(orgId, { action: 'auth.login_failed', actorId: user.id });
      expect(e).toMatchObject({ ...byUser(user), targetType: 'user', targetId: user.id, metadata: { reason: 'invalid_password' } });
      expectFromRequest(e);
    }

    const unknown = `nobody-${uniqueSuffix()}@example.test`;
    expect((await call('post', '/auth/login').send({ email: unknown, password: 'whatever it is' })).status).toBe(401);
    expect(await h.deps.prisma.auditEvent.count({ where: { actorLabel: unknown } })).toBe(0);
    const text = await auditTableText();
    expect(text).not.toContain(unknown);
  });

  it('auth.2fa_enabled, auth.login_failed (wrong code), auth.login (second factor), auth.2fa_disabled', async () => {
    const account = await signupAndVerify(h);
    const login = await call('post', '/auth/login').send({ email: account.email, password: account.password });
    const token = login.body.token as string;
    const setup = await call('post', '/auth/2fa/setup', token);
    const secret = setup.body.secret as string;
    expect((await call('post', '/auth/2fa/enable', token).send({ code: oathtoolCode(secret, h.clock.now()), current_password: account.password })).status).toBe(200);
    const enabled = await only(account.organizationId, { action: 'auth.2fa_enabled' });
    expect(enabled).toMatchObject({ actorType: 'user', actorId: account.userId, actorLabel: account.email, targetId: account.userId });
    expectFromRequest(enabled);

    h.clock.advance(STEP_MS);
    const partial = (await call('post', '/auth/login').send({ email: account.email, password: account.password })).body.partial_token;
    const wrong = await call('post', '/auth/login/2fa').send({ partial_token: partial, code: wrongCode(secret, h.clock.now()) });
    expect(wrong.status).toBe(401);
    const failed = await only(account.organizationId, { action: 'auth.login_failed' });
    expect(failed).toMatchObject({ actorId: account.userId, metadata: { reason: 'invalid_totp_code' } });
    const ok = await call('post', '/auth/login/2fa').send({ partial_token: partial, code: oathtoolCode(secret, h.clock.now()) });
    expect(ok.status).toBe(200);
    const logins = await rows(account.organizationId, { action: 'auth.login' });
    expect(logins[0]).toMatchObject({ actorId: account.userId, metadata: { second_factor: 'totp' } });
    expectFromRequest(logins[0]);

    h.clock.advance(STEP_MS);
    expect((await call('post', '/auth/2fa/disable', ok.body.token).send({ code: oathtoolCode(secret, h.clock.now()), current_password: account.password })).status).toBe(200);
    const disabled = await only(account.organizationId, { action: 'auth.2fa_disabled' });
    expect(disabled).toMatchObject({ actorId: account.userId, targetType: 'user', targetId: account.userId });
    expectFromRequest(disabled);
  });

  it('auth.logout: the session ended, once', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'logout');
    expect((await call('post', '/auth/logout', user.token)).status).toBe(204);
    const e = await only(org.id, { action: 'auth.logout', actorId: user.id });
    expect(e).toMatchObject({ ...byUser(user), targetType: 'session', targetId: user.sessionId });
    expectFromRequest(e);
  });

  it('api_key.created and api_key.revoked, by a session and by a key (actor: the key id and its prefix)', async () => {
    const created = await call('post', '/api-keys', org.admin.token).send({ name: 'deploy', scopes: ['api_keys:revoke', 'projects:read'] });
    expect(created.status).toBe(201);
    const e = await only(org.id, { action: 'api_key.created', targetId: created.body.id });
    expect(e).toMatchObject({
      ...byUser(org.admin),
      targetType: 'api_key',
      metadata: { name: 'deploy', prefix: created.body.prefix, scopes: ['api_keys:revoke', 'projects:read'], expires_at: null },
    });
    expectFromRequest(e);

    const victim = await call('post', '/api-keys', org.admin.token).send({ name: 'old', scopes: ['projects:read'] });
    expect((await call('delete', `/api-keys/${victim.body.id}`, created.body.key)).status).toBe(204);
    const revoked = await only(org.id, { action: 'api_key.revoked', targetId: victim.body.id });
    expect(revoked).toMatchObject({
      actorType: 'api_key',
      actorId: created.body.id,
      actorLabel: created.body.prefix,
      metadata: { name: 'old', reason: 'user' },
    });
    expectFromRequest(revoked);
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: victim.body.id } })).revokedReason).toBe('user');
  });

  it('member.role_changed: previous and new role, the member as target', async () => {
    const user = await createUserInOrg(h, org.id, 'member', 'promoted');
    expect((await call('patch', `/members/${user.id}`, org.admin.token).send({ role: 'manager' })).status).toBe(200);
    const e = await only(org.id, { action: 'member.role_changed', targetId: user.id });
    expect(e).toMatchObject({ ...byUser(org.admin), targetType: 'user', metadata: { email: user.email, previous_role: 'member', role: 'manager' } });
    expectFromRequest(e);
  });

  it('member.removed, with the team memberships and grants that went with it, and the revocation of their keys (reason member_removed)', async () => {
    const user = await createUserInOrg(h, org.id, 'manager', 'leaver');
    const key = await call('post', '/api-keys', user.token).send({ name: 'laptop', scopes: ['projects:read'] });
    const team = await call('post', '/teams', org.admin.token).send({ name: `Leavers ${uniqueSuffix()}` });
    expect(team.status).toBe(201);
    expect((await call('put', `/teams/${team.body.id}/members/${user.id}`, org.admin.token)).status).toBe(200);
    const project = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: project.id }, { userId: user.id }, 'write');
    await insertGrant(h, org.id, { projectId: project.id }, { teamId: team.body.id }, 'read');
    // The same person in another organization, in a team there and with a grant there: none of it is this removal's.
    const elsewhere = await createOrg(h);
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: elsewhere.id, userId: user.id, role: 'member' } });
    const theirTeam = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: elsewhere.id, name: 'kept' } });
    await h.deps.prisma.teamMember.create({ data: { teamId: theirTeam.id, userId: user.id } });
    const theirGrant = await insertGrant(h, elsewhere.id, { projectId: (await insertProject(h, elsewhere.id)).id }, { userId: user.id }, 'read');
    expect((await call('delete', `/members/${user.id}`, org.owner.token)).status).toBe(204);
    expect(await h.deps.prisma.teamMember.count({ where: { userId: user.id } })).toBe(1);
    expect(await h.deps.prisma.accessGrant.findUnique({ where: { id: theirGrant.id } })).not.toBeNull();
    const e = await only(org.id, { action: 'member.removed', targetId: user.id });
    expect(e).toMatchObject({
      ...byUser(org.owner),
      targetType: 'user',
      // The team's own grant stays with the team: only the person's went.
      metadata: { email: user.email, role: 'manager', api_keys_revoked: 1, team_memberships_removed: 1, grants_removed: 1 },
    });
    expectFromRequest(e);
    const revoked = await only(org.id, { action: 'api_key.revoked', targetId: key.body.id });
    expect(revoked).toMatchObject({ ...byUser(org.owner), metadata: { reason: 'member_removed', owner_user_id: user.id } });
    expect((await h.deps.prisma.apiKey.findUniqueOrThrow({ where: { id: key.body.id } })).revokedReason).toBe('member_removed');
  });

  it('organization.ownership_transferred: the new owner as target', async () => {
    const o = await createOrg(h);
    expect((await call('post', '/organization/transfer-ownership', o.owner.token).send({ user_id: o.admin.id })).status).toBe(200);
    const e = await only(o.id, { action: 'organization.ownership_transferred' });
    expect(e).toMatchObject({
      ...byUser(o.owner),
      targetType: 'user',
      targetId: o.admin.id,
      metadata: { previous_owner_id: o.owner.id, new_owner_previous_role: 'admin' },
    });
    expectFromRequest(e);
  });

  it('webhook.subscription_created / _updated / secret_rotated / _deleted, without the URL path, secret or header value', async () => {
    const sub = await call('post', '/webhooks/subscriptions', org.admin.token).send({ name: 'SIEM', url: `${PUBLIC_URL}?token=abc123def456`, events: ['finding.created'] });
    expect(sub.status).toBe(201);
    const id = sub.body.id as string;
    const created = await only(org.id, { action: 'webhook.subscription_created', targetId: id });
    expect(created).toMatchObject({
      ...byUser(org.admin),
      targetType: 'webhook_subscription',
      metadata: { level: 'organization', name: 'SIEM', url_host: '203.0.114.10', events: ['finding.created'] },
    });
    expectFromRequest(created);

    const authorization = `Splunk hec-${uniqueSuffix()}-credential`;
    expect((await call('patch', `/webhooks/subscriptions/${id}`, org.admin.token).send({ active: false, authorization })).status).toBe(200);
    const updated = await only(org.id, { action: 'webhook.subscription_updated', targetId: id });
    expect(updated.metadata).toMatchObject({ fields: ['active', 'authorization'], active: false, receiver_header: 'set' });
    expectFromRequest(updated);

    const rotated = await call('post', `/webhooks/subscriptions/${id}/rotate-secret`, org.admin.token);
    expect(rotated.status).toBe(200);
    const e = await only(org.id, { action: 'webhook.secret_rotated', targetId: id });
    expect(e).toMatchObject({ ...byUser(org.admin), metadata: { grace_period_ends_at: rotated.body.previous_secret_expires_at } });
    expectFromRequest(e);

    expect((await call('delete', `/webhooks/subscriptions/${id}`, org.admin.token)).status).toBe(204);
    expectFromRequest(await only(org.id, { action: 'webhook.subscription_deleted', targetId: id }));

    const text = await auditTableText();
    for (const secret of [sub.body.secret, rotated.body.secret, authorization, 'abc123def456']) expect(text).not.toContain(secret);
  });

  it('webhook changes at the project level are recorded too', async () => {
    const project = await h.deps.prisma.project.create({ data: { id: newId('prj'), organizationId: org.id, name: 'p' } });
    const sub = await call('post', `/projects/${project.id}/webhooks/subscriptions`, org.owner.token).send({ name: 'p', url: PUBLIC_URL, events: ['report.ready'] });
    expect(sub.status).toBe(201);
    const e = await only(org.id, { action: 'webhook.subscription_created', targetId: sub.body.id });
    expect(e.metadata).toMatchObject({ level: 'project', project_id: project.id });
  });

  it("webhook.subscription_deleted for each live subscription an assessment's or a project's deletion takes with it; nothing when refused", async () => {
    const o = await createOrg(h);
    const subscribeAt = async (base: string, name: string) => {
      const res = await call('post', `${base}/webhooks/subscriptions`, o.admin.token).send({ name, url: PUBLIC_URL, events: ['finding.created'] });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const newAssessment = async (projectId: string) => {
      const res = await call('post', `/projects/${projectId}/assessments`, o.admin.token).send({ name: 'A' });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const deletedEvents = async () => (await rows(o.id, { action: 'webhook.subscription_deleted' })).sort((x, y) => (x.targetId! < y.targetId! ? -1 : 1));

    const project = (await call('post', '/projects', o.admin.token).send({ name: 'P' })).body.id as string;
    const first = await newAssessment(project);
    const second = await newAssessment(project);
    const onFirst = await subscribeAt(`/assessments/${first}`, 'first siem');
    const onSecond = await subscribeAt(`/assessments/${second}`, 'second siem');
    const onProject = await subscribeAt(`/projects/${project}`, 'project siem');
    const deletedBefore = await subscribeAt(`/projects/${project}`, 'gone already');
    expect((await call('delete', `/projects/${project}/webhooks/subscriptions/${deletedBefore}`, o.admin.token)).status).toBe(204);

    // Refused: a queued assessment is not deleted, and neither is its subscription, so nothing is recorded.
    const queued = await newAssessment(project);
    const onQueued = await subscribeAt(`/assessments/${queued}`, 'queued siem');
    expect((await call('post', `/assessments/${queued}/launch`, o.admin.token)).status).toBe(200);
    expect((await call('delete', `/assessments/${queued}`, o.admin.token)).status).toBe(409);
    expect(await rows(o.id, { action: 'webhook.subscription_deleted', targetId: onQueued })).toEqual([]);

    expect((await call('delete', `/assessments/${first}`, o.admin.token)).status).toBe(204);
    const withAssessment = await only(o.id, { action: 'webhook.subscription_deleted', targetId: onFirst });
    expect(withAssessment).toMatchObject({
      ...byUser(o.admin),
      targetType: 'webhook_subscription',
      metadata: { level: 'assessment', project_id: project, assessment_id: first, name: 'first siem', reason: 'assessment_deleted' },
    });
    expectFromRequest(withAssessment);

    expect((await call('delete', `/projects/${project}`, o.admin.token)).status).toBe(204);
    const events = await deletedEvents();
    const byTarget = new Map(events.map((e) => [e.targetId, e]));
    // Each subscription once: the one deleted on its own is not recorded again with the project.
    expect(events.map((e) => e.targetId).sort()).toEqual([deletedBefore, onFirst, onProject, onQueued, onSecond].sort());
    expect(byTarget.get(onProject)!.metadata).toEqual({ level: 'project', project_id: project, name: 'project siem', reason: 'project_deleted' });
    expect(byTarget.get(onSecond)!.metadata).toMatchObject({ level: 'assessment', assessment_id: second, reason: 'project_deleted' });
    expect(byTarget.get(onQueued)!.metadata).toMatchObject({ assessment_id: queued, reason: 'project_deleted' });
    expectFromRequest(byTarget.get(onProject)!);
    expect(await h.deps.prisma.webhookSubscription.count({ where: { organizationId: o.id } })).toBe(0);
  });

  describe('a subscription deleted on its own while its assessment is being deleted', () => {
    /** An assessment (with a finding) and a subscription on it, through the API. */
    async function withSubscription() {
      const o = await createOrg(h);
      const project = (await call('post', '/projects', o.admin.token).send({ name: 'P' })).body.id as string;
      const assessment = (await call('post', `/projects/${project}/assessments`, o.admin.token).send({ name: 'A' })).body.id as string;
      const res = await call('post', `/assessments/${assessment}/webhooks/subscriptions`, o.admin.token).send({ name: 'siem', url: PUBLIC_URL, events: ['finding.created'] });
      expect(res.status).toBe(201);
      const finding = newId('fnd');
      await h.deps.prisma.finding.create({
        data: { id: finding, organizationId: o.id, projectId: project, assessmentId: assessment, fingerprint: 'fp', title: 'T', severity: 'high', originalSeverity: 'high' },
      });
      // An access grant on the assessment: its cascade goes before the subscriptions' (constraints in creation order).
      const grant = (await insertGrant(h, o.id, { assessmentId: assessment }, { userId: o.member.id }, 'read')).id;
      return { o, assessment, finding, grant, subscription: res.body.id as string };
    }

    /**
     * DELETE of the assessment held up by a second connection holding `table`'s row `id` (FOR UPDATE), the
     * subscription's own DELETE sent meanwhile, then the row let go. Answers both statuses.
     */
    async function raced(s: Awaited<ReturnType<typeof withSubscription>>, table: 'assessments' | 'access_grants' | 'findings', id: string) {
      const holder = new pg.Client(pgFields(h.config.databaseUrl));
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT id FROM ${table} WHERE id = $1 FOR UPDATE`, [id]);
        const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
        const deletion = call('delete', `/assessments/${s.assessment}`, s.o.admin.token).then((res) => res.status);
        await untilBlockedBy(h, pid, 1); // the deletion reached the held row
        const own = call('delete', `/assessments/${s.assessment}/webhooks/subscriptions/${s.subscription}`, s.o.admin.token).then((res) => res.status);
        // It answers, or it waits for the deletion: either way the held row goes now.
        await Promise.race([own, new Promise((r) => setTimeout(r, 1500))]);
        await holder.query('COMMIT');
        return { deletion: await deletion, own: await own };
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
    }

    it('is recorded deleted once, when it goes before the deletion lists the subscriptions', async () => {
      const s = await withSubscription();
      const answers = await raced(s, 'assessments', s.assessment);
      expect(answers.deletion).toBe(204);
      expect([204, 404]).toContain(answers.own);
      expect(await rows(s.o.id, { action: 'webhook.subscription_deleted', targetId: s.subscription })).toHaveLength(1);
    }, 30_000);

    it('is recorded deleted once, when it goes after the deletion listed the subscriptions and before its cascade reached them', async () => {
      const s = await withSubscription();
      const answers = await raced(s, 'access_grants', s.grant);
      expect(answers.deletion).toBe(204);
      expect([204, 404]).toContain(answers.own);
      expect(await rows(s.o.id, { action: 'webhook.subscription_deleted', targetId: s.subscription })).toHaveLength(1);
    }, 30_000);

    it("answers 404 (not 500) when the assessment's deletion took the subscription first, and is recorded deleted once", async () => {
      const s = await withSubscription();
      const answers = await raced(s, 'findings', s.finding);
      expect(answers.deletion).toBe(204);
      expect([204, 404]).toContain(answers.own);
      expect(await rows(s.o.id, { action: 'webhook.subscription_deleted', targetId: s.subscription })).toHaveLength(1);
    }, 30_000);
  });

  it("another organization is untouched by a deletion: its subscriptions stay live, its audit log gains nothing, and its project is out of reach (404)", async () => {
    const [o, them] = [await createOrg(h), await createOrg(h)];
    const projectOf = async (owner: TestOrg) => (await call('post', '/projects', owner.admin.token).send({ name: 'P' })).body.id as string;
    const [mine, theirs] = [await projectOf(o), await projectOf(them)];
    for (const [owner, project] of [[o, mine], [them, theirs]] as const) {
      const res = await call('post', `/projects/${project}/webhooks/subscriptions`, owner.admin.token).send({ name: 'siem', url: PUBLIC_URL, events: ['finding.created'] });
      expect(res.status).toBe(201);
    }
    const theirEventsBefore = await rows(them.id);
    // o's admin cannot reach the other organization's project; deleting its own touches only its own rows.
    expect((await call('delete', `/projects/${theirs}`, o.admin.token)).status).toBe(404);
    expect((await call('delete', `/projects/${mine}`, o.admin.token)).status).toBe(204);
    expect(await rows(o.id, { action: 'webhook.subscription_deleted' })).toHaveLength(1);
    expect(await rows(them.id)).toEqual(theirEventsBefore);
    expect(await h.deps.prisma.webhookSubscription.count({ where: { organizationId: them.id, projectId: theirs, deletedAt: null } })).toBe(1);
    expect(await h.deps.prisma.project.count({ where: { id: theirs } })).toBe(1);
  });

  it('api_key_policy.updated: the policy before and after', async () => {
    const o = await createOrg(h);
    expect((await call('put', '/organization/api-key-policy', o.admin.token).send({ enabled: true, inactivity_days: 30 })).status).toBe(200);
    const e = await only(o.id, { action: 'api_key_policy.updated' });
    expect(e).toMatchObject({
      ...byUser(o.admin),
      targetType: 'organization',
      targetId: o.id,
      metadata: {
        before: { enabled: false, inactivity_days: 90 },
        after: { enabled: true, require_expiration: false, max_lifetime_days: 90, warn_days_before: 7, inactivity_days: 30 },
      },
    });
    expectFromRequest(e);
  });

  it('refused changes record nothing', async () => {
    const o = await createOrg(h);
    expect((await call('patch', `/members/${o.owner.id}`, o.admin.token).send({ role: 'member' })).status).toBe(403);
    expect((await call('put', '/organization/api-key-policy', o.manager.token).send({ enabled: true })).status).toBe(403);
    expect((await call('post', '/api-keys', o.member.token).send({ name: 'x', scopes: ['projects:read'] })).status).toBe(403);
    expect(await rows(o.id)).toEqual([]);
  });
});

/** Every audit row of the database as text: what a secret must never appear in. */
async function auditTableText(): Promise<string> {
  const all = await h.deps.prisma.$queryRaw<Array<{ t: string }>>`SELECT row_to_json(a)::text AS t FROM audit_events a`;
  return all.map((r) => r.t).join('\n');
}

describe('no secrets', () => {
  it('holds no key value, webhook secret, password, session token or CSRF token', async () => {
    const o = await createOrg(h);
    const key = await call('post', '/api-keys', o.owner.token).send({ name: 'ci', scopes: ['api_keys:revoke'] });
    const sub = await call('post', '/webhooks/subscriptions', o.admin.token).send({ name: 'x', url: PUBLIC_URL, events: ['report.ready'] });
    const rotated = await call('post', `/webhooks/subscriptions/${sub.body.id}/rotate-secret`, o.admin.token);
    const login = await call('post', '/auth/login').send({ email: o.admin.email, password: TEST_PASSWORD });
    const failed = await call('post', '/auth/login').send({ email: o.member.email, password: 'a wrong password 123' });
    expect([key.status, sub.status, rotated.status, login.status, failed.status]).toEqual([201, 201, 200, 200, 401]);
    expect((await call('delete', `/api-keys/${key.body.id}`, key.body.key)).status).toBe(204);
    await eventually(() => rows(o.id, { action: 'auth.login_failed' }), (found) => found.length > 0);
    expect((await rows(o.id)).map((e) => e.action).sort()).toEqual(
      ['api_key.created', 'api_key.revoked', 'auth.login', 'auth.login_failed', 'webhook.secret_rotated', 'webhook.subscription_created'],
    );

    const text = await auditTableText();
    const secrets = {
      key: key.body.key,
      keyBody: (key.body.key as string).slice('sk-svc-'.length, -6),
      secret: sub.body.secret,
      rotated: rotated.body.secret,
      password: TEST_PASSWORD,
      wrongPassword: 'a wrong password 123',
      token: login.body.token,
      csrf: login.body.csrf_token,
      sessionToken: o.owner.token,
    };
    for (const [name, value] of Object.entries(secrets)) {
      expect(typeof value === 'string' && value.length > 8).toBe(true);
      expect([name, text.includes(value as string)]).toEqual([name, false]);
    }
    // Through the API as well.
    const exported = (await download('?format=jsonl', o.owner.token)).body as string;
    for (const value of Object.values(secrets)) expect(exported).not.toContain(value);
  });
});

describe('listing', () => {
  let f: TestOrg;
  let keyIds: string[];
  let marks: Date[];

  beforeAll(async () => {
    f = await createOrg(h);
    keyIds = [];
    marks = [];
    // Five keys a minute apart, by the admin (3) and the owner (2); then one revoked.
    for (let i = 0; i < 5; i++) {
      marks.push(h.clock.now());
      const who = i < 3 ? f.admin : f.owner;
      const res = await call('post', '/api-keys', who.token).send({ name: `k${i}`, scopes: ['projects:read'] });
      expect(res.status).toBe(201);
      keyIds.push(res.body.id);
      h.clock.advance(60_000);
    }
    expect((await call('delete', `/api-keys/${keyIds[0]}`, f.owner.token)).status).toBe(204);
    h.clock.reset();
  });

  const list = (query: string, token = f.owner.token) => call('get', `/audit-events${query}`, token);

  it('answers the events newest first with actor, target, time, IP and user agent', async () => {
    const res = await list('');
    expect(res.status).toBe(200);
    expect(res.body.next_cursor).toBeNull();
    expect(res.body.data.map((e: { action: string }) => e.action)).toEqual([
      'api_key.revoked', 'api_key.created', 'api_key.created', 'api_key.created', 'api_key.created', 'api_key.created',
    ]);
    expect(res.body.data[0]).toEqual({
      id: expect.stringMatching(/^aud_/),
      created_at: expect.any(String),
      action: 'api_key.revoked',
      actor_type: 'user',
      actor_id: f.owner.id,
      actor_label: f.owner.email,
      target_type: 'api_key',
      target_id: keyIds[0],
      ip: IP,
      user_agent: UA,
      metadata: expect.objectContaining({ name: 'k0', reason: 'user' }),
    });
  });

  it('pages with limit and cursor: every event once, in order', async () => {
    const all = (await list('?limit=100')).body.data.map((e: { id: string }) => e.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await list(`?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      expect(res.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.data.map((e: { id: string }) => e.id));
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all);
    expect(all).toHaveLength(6);
    expect((await list('?limit=0')).status).toBe(400);
    expect((await list('?limit=101')).status).toBe(400);
  });

  it('filters by action, actor_id, target_id, since and until', async () => {
    const ids = async (query: string) => {
      const res = await list(query);
      expect(res.status).toBe(200);
      return res.body.data as Array<{ action: string; actor_id: string; target_id: string; created_at: string }>;
    };
    expect((await ids('?action=api_key.revoked')).map((e) => e.target_id)).toEqual([keyIds[0]]);
    expect((await ids('?action=api_key.created')).map((e) => e.target_id)).toEqual([...keyIds].reverse());
    expect((await ids(`?actor_id=${f.admin.id}`)).map((e) => e.target_id)).toEqual(keyIds.slice(0, 3).reverse());
    expect((await ids(`?target_id=${keyIds[0]}`)).map((e) => e.action)).toEqual(['api_key.revoked', 'api_key.created']);
    expect((await ids(`?actor_id=${f.owner.id}&action=api_key.created`)).map((e) => e.target_id)).toEqual([keyIds[4], keyIds[3]]);

    // since is inclusive, until exclusive: the keys created in the 2nd and 3rd minute.
    const window = await ids(`?action=api_key.created&since=${marks[1].toISOString()}&until=${marks[3].toISOString()}`);
    expect(window.map((e) => e.target_id)).toEqual([keyIds[2], keyIds[1]]);
    expect(await ids(`?since=${new Date(Date.now() + 3600_000).toISOString()}`)).toEqual([]);
  });

  it('refuses an unknown action (422) and malformed filters (400)', async () => {
    const unknown = await list('?action=api_key.stolen');
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toContain('api_key.created');
    expect((await list('?since=yesterday')).status).toBe(400);
    expect((await list('?until=2026-13-45')).status).toBe(400);
    expect((await list('?color=blue')).status).toBe(400);
  });

  it('refuses since/until that JavaScript parses but PostgreSQL cannot hold (400 with the envelope, list and export)', async () => {
    // Joi's iso() takes expanded years (±YYYYYY): these dates reached the query and PostgreSQL refused them (500;
    // the export had sent its 200 and then cut the body).
    for (const query of ['?since=-271821-04-20T00:00:00.000Z', '?until=%2B275760-09-13T00:00:00.000Z', '?since=-000001-01-01T00:00:00Z']) {
      const listed = await list(query);
      expect(listed.status).toBe(400);
      expect(listed.body).toEqual({ detail: expect.stringMatching(/since|until/) });
      const exported = await call('get', `/audit-events/export${query}`, f.owner.token);
      expect(exported.status).toBe(400);
      expect(exported.body).toEqual({ detail: expect.stringMatching(/since|until/) });
    }
    expect((await list('?since=2026-01-01T00:00:00Z&until=9999-12-31T00:00:00Z')).status).toBe(200);
  });

  it('needs audit:read: admins and owners list, managers and members get 403 naming the scope', async () => {
    expect((await list('', f.admin.token)).status).toBe(200);
    for (const user of [f.manager, f.member]) {
      const res = await list('', user.token);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('audit:read');
    }
    expect((await call('get', '/audit-events')).status).toBe(401);
  });

  it('an API key needs audit:read to list and audit:export to export', async () => {
    const o = await createOrg(h);
    const key = await call('post', '/api-keys', o.owner.token).send({ name: 'siem', scopes: ['audit:read'] });
    const listed = await list('', key.body.key);
    expect(listed.status).toBe(200);
    expect(listed.body.data.map((e: { action: string }) => e.action)).toEqual(['api_key.created']);
    const exp = await call('get', '/audit-events/export', key.body.key);
    expect(exp.status).toBe(403);
    expect(exp.body.detail).toContain('audit:export');
  });

  it("never shows another organization's events, whatever the filters", async () => {
    const theirs = await list('?limit=100', other.owner.token);
    expect(theirs.status).toBe(200);
    const fIds = new Set((await rows(f.id)).map((e) => e.id));
    expect(theirs.body.data.filter((e: { id: string }) => fIds.has(e.id))).toEqual([]);
    expect((await list(`?actor_id=${f.admin.id}`, other.owner.token)).body.data).toEqual([]);
    expect((await list(`?target_id=${keyIds[0]}`, other.owner.token)).body.data).toEqual([]);
    // A cursor from this organization only moves the window: it never reveals the events behind it.
    const withCursor = await list(`?cursor=${[...fIds][0]}&limit=100`, other.owner.token);
    expect(withCursor.body.data.filter((e: { id: string }) => fIds.has(e.id))).toEqual([]);
    const exported = (await download('?format=jsonl', other.owner.token)).body as string;
    for (const id of fIds) expect(exported).not.toContain(id);
    expect(exported).not.toContain(f.admin.email);
  });

  describe('exports', () => {
    it('JSON Lines: one event per line, oldest first, the same fields as the list', async () => {
      const res = await download('?format=jsonl', f.admin.token);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/jsonl; charset=utf-8');
      expect(res.headers['content-disposition']).toMatch(/^attachment; filename="?audit-events-\d{4}-\d{2}-\d{2}\.jsonl"?$/);
      const lines = (res.body as string).split('\n');
      expect(lines.pop()).toBe('');
      const parsed = lines.map((l) => JSON.parse(l));
      const listed = (await list('?limit=100')).body.data;
      expect(parsed).toEqual([...listed].reverse());
    });

    it('applies the filters, and defaults to JSON Lines', async () => {
      const res = await download(`?action=api_key.created&actor_id=${f.owner.id}`, f.owner.token);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/jsonl; charset=utf-8');
      const parsed = (res.body as string).trim().split('\n').map((l) => JSON.parse(l));
      expect(parsed.map((e) => e.target_id)).toEqual([keyIds[3], keyIds[4]]);
      expect((await call('get', '/audit-events/export?format=xml', f.owner.token)).status).toBe(400);
      expect((await call('get', '/audit-events/export?action=nope', f.owner.token)).status).toBe(422);
    });

    it('CSV: a header and one CRLF record per event', async () => {
      const res = await download('?format=csv', f.owner.token);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(res.headers['content-disposition']).toMatch(/^attachment; filename="?audit-events-\d{4}-\d{2}-\d{2}\.csv"?$/);
      const [header, ...records] = parseCsv(res.body as string);
      expect(header).toEqual(['id', 'created_at', 'action', 'actor_type', 'actor_id', 'actor_label', 'target_type', 'target_id', 'ip', 'user_agent', 'metadata']);
      expect(records).toHaveLength(6);
      const listed = [...(await list('?limit=100')).body.data].reverse();
      expect(records).toEqual(
        listed.map((e) => [e.id, e.created_at, e.action, e.actor_type, e.actor_id, e.actor_label, e.target_type, e.target_id, e.ip, e.user_agent, JSON.stringify(e.metadata)]),
      );
      expect(records[0].slice(2, 9)).toEqual(['api_key.created', 'user', f.admin.id, f.admin.email, 'api_key', keyIds[0], IP]);
    });

    it('CSV: values a spreadsheet would run as formulas are defused', async () => {
      const o = await createOrg(h);
      const evil = '=HYPERLINK("http://evil.example","click"),@SUM(1+1)';
      const res = await request(h.app)
        .post('/api/v1/api-keys')
        .set(bearer(o.owner.token))
        .set('User-Agent', evil)
        .send({ name: '+cmd|/C calc!A0', scopes: ['projects:read'] });
      expect(res.status).toBe(201);
      const csv = (await download('?format=csv', o.owner.token)).body as string;
      expect(csv).toContain(`"'=HYPERLINK(""http://evil.example"",""click""),@SUM(1+1)"`);
      const fields = parseCsv(csv).flat();
      expect(fields).toContain(`'${evil}`);
      expect(fields.filter((v) => /^[=+\-@\t\r]/.test(v))).toEqual([]);
    });

    it("CSV: a user agent sent with a wrong password cannot start a formula in a ';'-separated spreadsheet", async () => {
      // Anyone who knows a member's address can put a user agent in the organization's audit log (auth.login_failed).
      const o = await createOrg(h);
      const agent = 'Mozilla;=1+2;x';
      expect((await request(h.app).post('/api/v1/auth/login').set('User-Agent', agent).send({ email: o.member.email, password: 'not the password' })).status).toBe(401);
      let csv = '';
      for (let waited = 0; !csv.includes('auth.login_failed'); waited += 50) {
        if (waited > 10_000) throw new Error('no auth.login_failed entry in the export');
        await new Promise((r) => setTimeout(r, 50));
        csv = (await download('?format=csv', o.owner.token)).body as string;
      }
      const line = csv.split('\r\n').find((l) => l.includes('auth.login_failed'))!;
      // A spreadsheet separating lists with ';' (or tabs) starts a cell after every one, inside quotes or not.
      for (const separator of [';', '\t']) {
        expect(line.split(separator).filter((cell) => /^[=+\-@]/.test(cell))).toEqual([]);
      }
      expect(line).toContain(`"Mozilla;'=1+2;x"`);
    });

    it('needs audit:export (a manager: 403 naming it)', async () => {
      const res = await call('get', '/audit-events/export', f.manager.token);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('audit:export');
    });
  });
});

describe('CSV fields', () => {
  it.each([
    ['=1+1', "'=1+1"],
    ['+1', "'+1"],
    ['-1', "'-1"],
    ['@x', "'@x"],
    ['\tx', "'\tx"],
    ['a,b', '"a,b"'],
    ['say "hi"', '"say ""hi"""'],
    ['line\nbreak', '"line\nbreak"'],
    ['=a,b', `"'=a,b"`],
    // A spreadsheet that separates lists with ';' would make `=1+1` a cell of its own, unquoted.
    ['Mozilla;=1+1;', `"Mozilla;'=1+1;"`],
    ['a;b', '"a;b"'],
    ['a\t-1', "a\t'-1"],
    ['x;;@y', `"x;;'@y"`],
    // Nor a row of its own: a line break starts one there even inside quotes.
    ['a\n=1+2', `"a\n'=1+2"`],
    ['a\r\n+1', `"a\r\n'+1"`],
    ['plain', 'plain'],
  ])('%j -> %j', (value, expected) => {
    expect(csvField(value)).toBe(expected);
  });

  it('a record has the columns in order, empty for nulls', () => {
    const row = presentAuditEvent({
      id: 'aud_x', organizationId: 'org_x', actorType: 'system', actorId: null, actorLabel: 'system', action: 'api_key.revoked',
      targetType: 'api_key', targetId: 'key_x', ip: null, userAgent: null, metadata: { reason: 'inactivity' },
      createdAt: new Date('2026-01-02T03:04:05.000Z'),
    });
    expect(AUDIT_CSV_COLUMNS).toHaveLength(11);
    expect(auditCsvRecord(row)).toBe('aud_x,2026-01-02T03:04:05.000Z,api_key.revoked,system,,system,api_key,key_x,,,"{""reason"":""inactivity""}"\r\n');
  });

  it('the action catalogue is the one the issues list (report shares, source: issue 23; erasure, integrations: issue 24)', () => {
    expect([...AUDIT_ACTIONS].sort()).toEqual([
      'api_key.created', 'api_key.revoked', 'api_key_policy.updated', 'auth.2fa_disabled', 'auth.2fa_enabled', 'auth.login',
      'auth.login_failed', 'auth.logout', 'finding.issue_exported', 'issue_export_target.created', 'issue_export_target.revoked',
      'issue_export_target.updated', 'member.removed', 'member.role_changed', 'notification_target.created',
      'notification_target.revoked', 'notification_target.updated', 'organization.ownership_transferred',
      'report.published', 'report.share_downloaded', 'report.share_granted', 'report.share_revoked', 'report.share_viewed',
      'report.unpublished',
      'erasure.cancelled', 'erasure.completed', 'erasure.confirmed', 'erasure.failed', 'erasure.requested', 'erasure.retried',
      'integration.connected', 'integration.disconnected', 'integration.team_bound', 'integration.team_unbound',
      'source.personal_connected', 'source.personal_disconnected',
      'webhook.breaker_opened', // delivery isolation (issue 20)
      'webhook.deliveries_recovered', 'webhook.delivery_resent', 'webhook.secret_rotated', 'webhook.subscription_created',
      'webhook.subscription_deleted', 'webhook.subscription_disabled', 'webhook.subscription_failing', 'webhook.subscription_reenabled',
      'webhook.subscription_updated',
      'auth.password_changed', // POST /auth/password
      'auth.password_reset', // POST /auth/password-reset/confirm
      'auth.password_reset_requested', // POST /auth/password-reset, a known account
      // Source (issue 23).
      'project.source_changed', 'project.source_removed', 'source.archive_downloaded', 'source.uploaded',
      // Access grants and teams.
      'access_grant.created', 'access_grant.deleted', 'access_grant.updated', 'team.created', 'team.deleted',
      'team.member_added', 'team.member_removed', 'team.updated',
      // Invitations and organization settings.
      'governance.sla_updated', 'invitation.accepted', 'invitation.created', 'invitation.revoked', 'organization.renamed',
    ].sort());
  });
});
