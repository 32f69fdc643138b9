// Events reach only those allowed to read them (issue 34, DESIGN.md trust boundaries): whoever decides where events
// go can only route events of projects they can read, and organization-wide routing needs an organization-wide role.
// Driven through the public API with the real in-process worker, a real HTTPS receiver and the mail outbox:
// - a manager with a read grant on P1 only (P2 answers 404) cannot configure any route (notification target, webhook
//   at every level, issue tracker, integration binding), nor export a P2 finding, with a session or with a key
//   minted under the earlier bundle; a new P2 finding then reaches nothing of theirs;
// - an admin's routes stop when the admin is demoted or removed (disabled in the same transaction, audited), and an
//   admin who re-enables one answers for it from then on; the fan-out skips them whatever path lowered the role;
// - the migration disables routes whose recorded configurer has no organization-wide role (the measured case: a
//   manager's e-mail target made under the earlier bundle).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { newId, Prisma } from '@svc/db';
import { displayPrefix, generateApiKeyValue, hashApiKey } from '../../api/src/auth/api-key-material';
import { CONFIGURER_LOST_ROLE_REASON } from '../../api/src/modules/access/event-routing';
import { createKey } from '../../api/test/support/domain';
import { bearer, createUserInOrg, insertGrant, type TestUser } from '../../api/test/support/fixtures';
import { createWorld, poll, type World } from './support/world';

let w: World;
let engine: string;
let P1: string;
let P2: string;
let A1: string;
let A2: string;
/** The control: an owner's organization-wide webhook that must receive every finding.created. */
const CONTROL = '/control';
const OUTSIDE = 'someone@outside.example';

async function post(p: string, token: string, body: Record<string, unknown> = {}, expected = 200) {
  const res = await w.api().post(`/api/v1${p}`).set(bearer(token)).send(body);
  if (res.status !== expected) throw new Error(`POST ${p} answered ${res.status} (expected ${expected}): ${JSON.stringify(res.body)}`);
  return res.body;
}

/** Records a finding on the assessment as the engine, and waits until the control webhook has it. */
async function newFinding(assessmentId: string, title: string): Promise<string> {
  const id = (await post(`/assessments/${assessmentId}/findings`, engine, { title, severity: 'high', fingerprint: title, location: `src/${title}.ts:1` }, 201)).id;
  await poll(
    async () => w.receiver.requests(CONTROL).filter((r) => r.body.toString('utf8').includes(id)),
    (found) => found.length > 0,
    20_000,
    `the control delivery of ${title}`,
  );
  return id;
}

/**
 * The mail outbox, read again when it caught a message the in-process worker is still writing (the harness parses
 * every file; the retry waits so the worker can finish).
 */
/** Who a message went to: its visible recipient, or its Bcc list (e-mail targets address recipients in Bcc). */
const recipientsOf = (m: { to?: string; bcc?: string[] }): string => m.to ?? (m.bcc ?? []).join(', ');

async function mail(): Promise<ReturnType<World['h']['mail']>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return w.h.mail();
    } catch (err) {
      if (attempt >= 50) throw err;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/**
 * What left the service so far that mentions the text: receiver requests (on paths starting with the label, or on
 * any path but the control's) and mail (to the label's address, or to anyone).
 */
async function everythingMentioning(text: string, label?: string) {
  const requests = w.receiver.requests()
    .filter((r) => (label ? r.path.startsWith(`/${label}`) : r.path !== CONTROL) && r.body.toString('utf8').includes(text));
  const mails = (await mail())
    .filter((m) => (label ? recipientsOf(m).includes(`${label}@`) : true) && `${recipientsOf(m)}\n${m.subject}\n${m.text}`.includes(text));
  return { requests, mails };
}

/**
 * The routes a finding's events were handed to: deliveries are created in the transaction that records the finding
 * (the outbox), so once the engine's POST has answered this is final, whatever the worker has sent yet.
 */
async function routesGiven(findingId: string): Promise<string[]> {
  const rows = await w.h.deps.prisma.$queryRaw<Array<{ name: string }>>(Prisma.sql`
    SELECT s.name FROM webhook_deliveries d
    JOIN events e ON e.id = d.event_id
    JOIN webhook_subscriptions s ON s.id = d.subscription_id
    WHERE d.organization_id = ${w.org.id} AND e.data->>'finding_id' = ${findingId}
    ORDER BY s.name`);
  return rows.map((r) => r.name);
}

/** A key of this user stored with the given scopes, as if minted under an earlier bundle. */
async function storedKey(user: TestUser, scopes: string[]): Promise<string> {
  const key = generateApiKeyValue();
  await w.h.deps.prisma.apiKey.create({
    data: { id: newId('key'), organizationId: w.org.id, userId: user.id, name: 'earlier bundle', displayPrefix: displayPrefix(key), keyHash: hashApiKey(key, w.h.config.apiKeyPepper), scopes },
  });
  return key;
}

beforeAll(async () => {
  w = await createWorld();
  engine = await createKey(w.h, w.org.owner.token, ['assessments:update']);
  const admin = w.org.admin.token;
  P1 = (await post('/projects', admin, { name: 'Granted' }, 201)).id;
  P2 = (await post('/projects', admin, { name: 'Not granted' }, 201)).id;
  A1 = (await post(`/projects/${P1}/assessments`, admin, { name: 'P1 pentest' }, 201)).id;
  A2 = (await post(`/projects/${P2}/assessments`, admin, { name: 'P2 pentest' }, 201)).id;
  for (const a of [A1, A2]) {
    await post(`/assessments/${a}/launch`, admin);
    await post(`/assessments/${a}/start`, engine);
  }
  await insertGrant(w.h, w.org.id, { projectId: P1 }, { userId: w.org.manager.id }, 'read');
  await w.subscribe({ name: 'control', url: w.receiver.url(CONTROL), events: ['finding.created'] });
});
afterAll(() => w?.close());

describe('a manager with a read grant on P1 only', () => {
  it('reads P1, gets 404 for P2, configures no route by session or by a key of the earlier bundle, and gets nothing of a P2 finding', async () => {
    const manager = w.org.manager;
    expect((await w.api().get(`/api/v1/projects/${P1}`).set(bearer(manager.token))).status).toBe(200);
    expect((await w.api().get(`/api/v1/projects/${P2}`).set(bearer(manager.token))).status).toBe(404);

    const tracker = await post('/issue-export-targets', w.org.admin.token, { kind: 'github', name: 'acme/web', base_url: w.receiver.url('/ghe/api/v3'), repository: 'acme/web', token: 'ghp_routingTest' }, 201);
    const team = await post('/teams', w.org.admin.token, { name: `Routing ${Date.now()}` }, 201);
    const integration = await post('/integrations', w.org.admin.token, { kind: 'slack', name: 'Workspace', bot_token: 'xoxb-routing-test', workspace_id: 'T0ROUTE' }, 201);
    const p2Before = await newFinding(A2, 'p2-before');
    const earlierKey = await storedKey(manager, ['notification_targets:read', 'notification_targets:configure', 'notification_targets:test', 'issue_exports:configure', 'findings:read', 'findings:export_issue']);

    const email = { kind: 'email', name: 'Outside', recipients: [OUTSIDE], events: ['finding.created'] };
    const hook = (p: string) => ({ name: 'Outside', url: w.receiver.url(p), events: ['finding.created'] });
    for (const credential of [manager.token, earlierKey]) {
      const as = bearer(credential);
      const attempts: Array<[string, Promise<{ status: number; body: { detail?: string } }>, number]> = [
        ['notification target', w.api().post('/api/v1/notification-targets').set(as).send(email), 403],
        ['chat target', w.api().post('/api/v1/notification-targets').set(as).send({ kind: 'slack', name: 'Outside', url: w.receiver.url('/outside-slack'), events: ['finding.created'] }), 403],
        ['org webhook', w.api().post('/api/v1/webhooks/subscriptions').set(as).send(hook('/outside-org')), 403],
        ['P2 webhook', w.api().post(`/api/v1/projects/${P2}/webhooks/subscriptions`).set(as).send(hook('/outside-p2')), 403],
        ['P1 webhook', w.api().post(`/api/v1/projects/${P1}/webhooks/subscriptions`).set(as).send(hook('/outside-p1')), 403],
        ['A2 webhook', w.api().post(`/api/v1/assessments/${A2}/webhooks/subscriptions`).set(as).send(hook('/outside-a2')), 403],
        ['issue tracker', w.api().post('/api/v1/issue-export-targets').set(as).send({ kind: 'github', name: 'x', base_url: w.receiver.url('/outside-ghe'), repository: 'a/b', token: 't' }), 403],
        ['tracker moved', w.api().patch(`/api/v1/issue-export-targets/${tracker.id}`).set(as).send({ base_url: w.receiver.url('/outside-ghe') }), 403],
        ['team binding', w.api().put(`/api/v1/integrations/${integration.id}/teams/${team.id}`).set(as), 403],
        ['P2 finding export', w.api().post(`/api/v1/findings/${p2Before}/issue-exports`).set(as).send({ target_id: tracker.id }), 404],
      ];
      for (const [what, pending, status] of attempts) {
        const res = await pending;
        expect({ what, status: res.status }).toEqual({ what, status });
        expect(res.body.detail).toEqual(expect.any(String));
      }
    }
    expect(await w.h.deps.prisma.webhookSubscription.count({ where: { organizationId: w.org.id, configuredByUserId: manager.id } })).toBe(0);

    const p2After = await newFinding(A2, 'p2-after');
    await newFinding(A1, 'p1-after');
    for (const id of [p2Before, p2After]) {
      expect(await routesGiven(id)).toEqual(['control']);
      expect(await everythingMentioning(id)).toEqual({ requests: [], mails: [] });
    }
    expect((await mail()).filter((m) => recipientsOf(m).includes(OUTSIDE))).toEqual([]);
    expect(w.receiver.requests().filter((r) => r.path.startsWith('/outside') || r.path.startsWith('/ghe'))).toEqual([]);
  });
});

describe('routes of someone who loses the organization-wide role', () => {
  async function routesOf(admin: TestUser, label: string) {
    const target = await post('/notification-targets', admin.token, { kind: 'email', name: `${label} mail`, recipients: [`${label}@outside.example`], events: ['finding.created'] }, 201);
    const hook = await post('/webhooks/subscriptions', admin.token, { name: `${label} hook`, url: w.receiver.url(`/${label}`), events: ['finding.created'] }, 201);
    const projectHook = await post(`/projects/${P2}/webhooks/subscriptions`, admin.token, { name: `${label} P2`, url: w.receiver.url(`/${label}-p2`), events: ['finding.created'] }, 201);
    return { target: target.id as string, hooks: [hook.id as string, projectHook.id as string] };
  }

  async function expectDisabled(ids: string[]) {
    for (const id of ids) {
      const row = await w.subscription(id);
      expect({ id, status: row.status, reason: row.disabledReason }).toEqual({ id, status: 'disabled', reason: CONFIGURER_LOST_ROLE_REASON });
    }
  }

  it('demoting an admin to manager disables their target and webhooks at once: a new P2 finding reaches none of them; an admin re-enables one and answers for it', async () => {
    const router = await createUserInOrg(w.h, w.org.id, 'admin', 'router');
    const routes = await routesOf(router, 'demoted');
    const first = await newFinding(A2, 'before-demotion');
    // While an admin, each of their routes has it.
    await poll(() => everythingMentioning(first, 'demoted'), (r) => r.requests.length === 2 && r.mails.length === 1, 20_000, 'the admin routes\' deliveries');

    const demoted = await w.api().patch(`/api/v1/members/${router.id}`).set(bearer(w.org.owner.token)).send({ role: 'manager' });
    expect(demoted.status).toBe(200);
    await expectDisabled([routes.target, ...routes.hooks]);
    const shown = await w.api().get(`/api/v1/notification-targets/${routes.target}`).set(bearer(w.org.admin.token));
    expect(shown.body).toMatchObject({ status: 'disabled', active: false, disabled_reason: CONFIGURER_LOST_ROLE_REASON });
    const audit = await w.h.deps.prisma.auditEvent.findMany({ where: { organizationId: w.org.id, action: 'webhook.subscription_disabled', actorId: w.org.owner.id } });
    expect(audit.map((a) => a.targetId).sort()).toEqual([routes.target, ...routes.hooks].sort());
    expect(audit.find((a) => a.targetId === routes.target)).toMatchObject({ targetType: 'notification_target' });

    expect(await routesGiven(first)).toEqual(['control', 'demoted P2', 'demoted hook', 'demoted mail']);
    const after = await newFinding(A2, 'after-demotion');
    expect(await routesGiven(after)).toEqual(['control']);
    expect(await everythingMentioning(after, 'demoted')).toEqual({ requests: [], mails: [] });

    // The demoted manager cannot switch it back on; an admin can, and the target is then the admin's.
    expect((await w.api().patch(`/api/v1/notification-targets/${routes.target}`).set(bearer(router.token)).send({ active: true })).status).toBe(403);
    const reenabled = await w.api().patch(`/api/v1/notification-targets/${routes.target}`).set(bearer(w.org.admin.token)).send({ active: true });
    expect(reenabled.body).toMatchObject({ status: 'active' });
    expect((await w.subscription(routes.target)).configuredByUserId).toBe(w.org.admin.id);
    const resumed = await newFinding(A2, 'after-reenable');
    await poll(async () => (await mail()).filter((m) => m.text.includes(resumed)), (m) => m.length === 1, 20_000, 'the re-enabled target\'s mail');
  });

  it("removing an admin disables their routes; another member's role change leaves an admin's routes alone", async () => {
    const leaver = await createUserInOrg(w.h, w.org.id, 'admin', 'leaver');
    const routes = await routesOf(leaver, 'removed');
    expect((await w.api().delete(`/api/v1/members/${leaver.id}`).set(bearer(w.org.owner.token))).status).toBe(204);
    await expectDisabled([routes.target, ...routes.hooks]);
    const after = await newFinding(A2, 'after-removal');
    expect((await routesGiven(after)).filter((name) => name.startsWith('removed'))).toEqual([]);
    expect(await everythingMentioning(after, 'removed')).toEqual({ requests: [], mails: [] });

    const kept = await routesOf(w.org.admin, 'kept');
    const promoted = await createUserInOrg(w.h, w.org.id, 'member', 'promoted');
    expect((await w.api().patch(`/api/v1/members/${promoted.id}`).set(bearer(w.org.admin.token)).send({ role: 'manager' })).status).toBe(200);
    for (const id of [kept.target, ...kept.hooks]) expect((await w.subscription(id)).status).toBe('active');
  });

  it('a membership lowered by another path than the API (directly in the database): the fan-out skips the routes', async () => {
    const bypassed = await createUserInOrg(w.h, w.org.id, 'admin', 'bypassed');
    const routes = await routesOf(bypassed, 'bypassed');
    await w.h.deps.prisma.membership.updateMany({ where: { organizationId: w.org.id, userId: bypassed.id }, data: { role: 'member' } });
    for (const id of [routes.target, ...routes.hooks]) expect((await w.subscription(id)).status).toBe('active');
    const after = await newFinding(A2, 'after-bypass');
    expect((await routesGiven(after)).filter((name) => name.startsWith('bypassed'))).toEqual([]);
    expect(await everythingMentioning(after, 'bypassed')).toEqual({ requests: [], mails: [] });
    await w.h.deps.prisma.membership.deleteMany({ where: { organizationId: w.org.id, userId: bypassed.id } });
    const gone = await newFinding(A2, 'after-bypass-removal');
    expect((await routesGiven(gone)).filter((name) => name.startsWith('bypassed'))).toEqual([]);
  });

  it('a manager whose role is raised to admin, then lowered again, loses only what they configured as admin', async () => {
    const climber = await createUserInOrg(w.h, w.org.id, 'manager', 'climber');
    expect((await w.api().post('/api/v1/notification-targets').set(bearer(climber.token)).send({ kind: 'email', name: 'x', recipients: [OUTSIDE], events: ['finding.created'] })).status).toBe(403);
    expect((await w.api().patch(`/api/v1/members/${climber.id}`).set(bearer(w.org.owner.token)).send({ role: 'admin' })).status).toBe(200);
    const routes = await routesOf(climber, 'climber');
    const others = await w.h.deps.prisma.webhookSubscription.findMany({ where: { organizationId: w.org.id, deletedAt: null, status: { not: 'disabled' }, NOT: { configuredByUserId: climber.id } }, select: { id: true } });
    expect((await w.api().patch(`/api/v1/members/${climber.id}`).set(bearer(w.org.owner.token)).send({ role: 'member' })).status).toBe(200);
    await expectDisabled([routes.target, ...routes.hooks]);
    for (const { id } of others) expect((await w.subscription(id)).status).not.toBe('disabled');
  });
});

describe('a change racing a demotion', () => {
  /** Waits until some statement of this database waits for a lock (the request blocked behind the held transaction). */
  async function someoneWaitsForALock() {
    await poll(
      () => w.h.deps.prisma.$queryRaw<Array<{ n: number }>>`
        SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      (rows) => rows[0].n > 0,
      10_000,
      'a statement waiting for a lock',
    );
  }

  it('cannot leave a live route behind: a PATCH authenticated as admin just before the demotion commits is refused', async () => {
    const racer = await createUserInOrg(w.h, w.org.id, 'admin', 'racer');
    const target = await post('/notification-targets', racer.token, { kind: 'email', name: 'racer mail', recipients: ['racer@outside.example'], events: ['finding.created'] }, 201);
    await w.h.deps.prisma.webhookSubscription.update({ where: { id: target.id }, data: { status: 'disabled', disabledReason: 'disabled by a user' } });
    // The demotion's transaction held open after its writes (role lowered, the racer's routes disabled).
    let release!: () => void;
    let written!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const writes = new Promise<void>((resolve) => (written = resolve));
    const demotion = w.h.deps.prisma.$transaction(async (tx) => {
      await tx.membership.updateMany({ where: { organizationId: w.org.id, userId: racer.id }, data: { role: 'manager' } });
      await tx.webhookSubscription.updateMany({ where: { id: target.id }, data: { status: 'disabled', disabledReason: CONFIGURER_LOST_ROLE_REASON } });
      written();
      await held;
    }, { timeout: 30_000 });
    await writes;
    // Authenticated against the committed role (admin), then it reaches the route's transaction and waits.
    const patching = w.api().patch(`/api/v1/notification-targets/${target.id}`).set(bearer(racer.token)).send({ name: 'raced', active: true }).then((r) => r);
    await someoneWaitsForALock();
    release();
    await demotion;
    const res = await patching;
    expect(res.status).toBe(403);
    expect(res.body.detail).toBe('Routing events requires the admin or owner role, which you no longer hold.');
    expect(await w.subscription(target.id)).toMatchObject({ status: 'disabled', name: 'racer mail', disabledReason: CONFIGURER_LOST_ROLE_REASON });
  });
});

describe('the migration that records who configured each route', () => {
  it("disables a target configured by a manager under the earlier bundle (the measured case), keeps an admin's, and can run again", async () => {
    const sql = readFileSync(path.join(__dirname, '../../../prisma/migrations/20261126120000_route_configured_by/migration.sql'), 'utf8');
    const prisma = w.h.deps.prisma;
    const arrange = async (label: string, actor: { type: 'user' | 'api_key'; id: string }, recipient = OUTSIDE) => {
      const id = newId('ntgt');
      await prisma.webhookSubscription.create({
        data: { id, organizationId: w.org.id, level: 'organization', kind: 'email', payloadFormat: 'email', secretEnc: 'x', name: label, url: '', events: ['finding.created'], severityFilter: [], statusFilter: [], emailRecipients: [recipient] },
      });
      await prisma.auditEvent.create({ data: { id: newId('aud'), organizationId: w.org.id, actorType: actor.type, actorId: actor.id, action: 'notification_target.created', targetType: 'notification_target', targetId: id } });
      return id;
    };
    const managerKey = await prisma.apiKey.create({
      data: { id: newId('key'), organizationId: w.org.id, userId: w.org.manager.id, name: 'k', displayPrefix: 'sk-svc-abcd', keyHash: `h${Date.now()}`, scopes: [] },
    });
    const byManager = await arrange('by manager', { type: 'user', id: w.org.manager.id });
    const byManagerKey = await arrange('by manager key', { type: 'api_key', id: managerKey.id });
    const byAdmin = await arrange('by admin', { type: 'user', id: w.org.admin.id }, 'admin-list@example.com');
    for (let run = 0; run < 2; run++) {
      const statements = sql.split(/;\s*\n/).map((s) => s.replace(/^\s*--.*$/gm, '').trim()).filter(Boolean);
      for (const statement of statements) await prisma.$executeRaw(Prisma.raw(statement));
    }
    for (const id of [byManager, byManagerKey]) {
      expect(await w.subscription(id)).toMatchObject({ status: 'disabled', disabledReason: CONFIGURER_LOST_ROLE_REASON, configuredByUserId: w.org.manager.id });
    }
    expect(await w.subscription(byAdmin)).toMatchObject({ status: 'active', configuredByUserId: w.org.admin.id });
    const p2 = await newFinding(A2, 'after-migration');
    await poll(async () => (await mail()).filter((m) => recipientsOf(m).includes('admin-list@example.com') && m.text.includes(p2)), (m) => m.length === 1, 20_000, "the admin's target's mail");
    expect((await mail()).filter((m) => recipientsOf(m).includes(OUTSIDE))).toEqual([]);
  });
});
