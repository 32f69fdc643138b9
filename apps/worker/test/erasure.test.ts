// GDPR erasure (governance:erase): filing, cancelling and retrying requests through the API, and the worker's
// erasure job against a database of this file's own, searched afterwards in every table for the person's name
// and e-mail.
import { QueueEvents } from 'bullmq';
import request from 'supertest';
import { newId } from '@svc/db';
import { createRedis } from '@svc/queue';
import { createHarness, uniqueSuffix, type Harness } from '../../api/test/support/harness';
import { bearer, createOrg, createUserInOrg, insertProject, TEST_PASSWORD, type TestOrg, type TestUser } from '../../api/test/support/fixtures';
import { createKey, insertAssessmentIn, insertFinding } from '../../api/test/support/domain';
import { loginRequest } from '../../api/test/support/auth-helpers';
import type { WorkerDeps } from '../src/deps';
import { runErasures } from '../src/erasure';
import { MAINTENANCE_SCHEDULES } from '../src/maintenance';
import { startWorker } from '../src/worker';
import { createIsolatedDatabase } from '../../../test-support/databases';

let h: Harness;
let deps: WorkerDeps;
let database: { url: string; drop(): Promise<void> };
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  database = await createIsolatedDatabase();
  h = await createHarness({ DATABASE_URL: database.url });
  deps = { config: h.config, logger: h.deps.logger, prisma: h.deps.prisma, redis: () => createRedis(h.config.redisUrl), clock: h.clock };
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(async () => {
  await h.close();
  await database.drop();
});

const api = () => request(h.app);
const BASE = '/api/v1/governance/erasure-requests';
const file = (token: string, body: unknown) => api().post(BASE).set(bearer(token)).send(body as object);

/** A member with a name and e-mail nobody else has. */
async function person(inOrg: TestOrg, role: 'member' | 'admin' | 'manager' = 'member'): Promise<TestUser & { name: string }> {
  const user = await createUserInOrg(h, inOrg.id, role, `erasee${uniqueSuffix()}`);
  const name = `Zelda Quuxley ${uniqueSuffix()}`;
  await h.deps.prisma.user.update({ where: { id: user.id }, data: { name } });
  return { ...user, name };
}

/** Tables (and rows, as text) where a string appears anywhere: every column of every table is searched. */
async function tablesContaining(needle: string): Promise<string[]> {
  const tables = await h.deps.prisma.$queryRaw<Array<{ table_name: string }>>`
    SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`;
  const found: string[] = [];
  for (const { table_name } of tables) {
    const rows = await h.deps.prisma.$queryRawUnsafe<Array<{ n: number }>>(
      `SELECT count(*)::int AS n FROM "${table_name}" t WHERE t::text ILIKE $1`,
      `%${needle}%`,
    );
    if (rows[0].n > 0) found.push(table_name);
  }
  return found.sort();
}

/** Leaves the person's name and e-mail in the places a real organization's records hold them. */
async function leaveTraces(p: TestUser & { name: string }) {
  // The person signs in (auth.login, labelled with the e-mail) and an admin changes their role (metadata e-mail).
  expect((await loginRequest(h, { email: p.email, password: TEST_PASSWORD })).status).toBe(200);
  expect((await api().patch(`/api/v1/members/${p.id}`).set(bearer(org.admin.token)).send({ role: 'manager' })).status).toBe(200);
  // An invitation to their address, a sign-in identity, a finding assigned to them with a comment naming them, an
  // event whose data names them (what webhooks carried), and an audit entry whose metadata quotes them.
  await h.deps.prisma.invitation.create({
    data: { id: newId('inv'), organizationId: org.id, email: p.email, role: 'member', tokenHash: uniqueSuffix(), invitedById: org.admin.id, expiresAt: new Date(Date.now() + 86400_000) },
  });
  await h.deps.prisma.oAuthIdentity.create({ data: { id: newId('oid'), userId: p.id, provider: 'github', subject: uniqueSuffix(), email: p.email } });
  await h.deps.prisma.personalSourceConnection.create({
    data: { id: newId('psc'), userId: p.id, provider: 'github', subject: uniqueSuffix(), login: 'zq-octo', scopes: ['repo'], tokenEnc: 'v1.sealed' },
  });
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'running');
  const finding = await insertFinding(h, assessment, {
    assigneeId: p.id,
    description: `Reported by ${p.name.toUpperCase()} <${p.email}>; see ${p.name}'s notes.`,
  });
  await h.deps.prisma.event.create({
    data: { id: newId('event'), organizationId: org.id, type: 'finding.updated', data: { actor: { name: p.name, email: p.email }, note: `by "${p.name}"` } },
  });
  return { findingId: finding.id };
}

async function erase(token: string, userId: string) {
  const res = await file(token, { user_id: userId });
  expect(res.status).toBe(202);
  return res.body as { id: string; status: string; pseudonym: { name: string; email: string } };
}

const read = async (id: string, token = org.admin.token) => (await api().get(`${BASE}/${id}`).set(bearer(token))).body;

describe('the erasure job', () => {
  it('replaces the name and e-mail everywhere, removes the member, keeps the audit entries, and says what it did', async () => {
    const p = await person(org);
    const { findingId } = await leaveTraces(p);
    const auditBefore = await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id } });
    // The test can fail: the traces are really there before the job.
    expect(await tablesContaining(p.email)).toEqual(expect.arrayContaining(['audit_events', 'events', 'findings', 'invitations', 'oauth_identities', 'users']));
    expect(await tablesContaining(p.name)).toEqual(expect.arrayContaining(['events', 'findings', 'users']));

    const filed = await erase(org.admin.token, p.id);
    expect(filed).toMatchObject({ status: 'pending', user_id: p.id, receipt: null, requested_by_user_id: org.admin.id });
    expect(JSON.stringify(filed)).not.toContain(p.email);

    expect(await runErasures(deps)).toEqual({ completed: 1, failed: 0 });

    expect(await tablesContaining(p.email)).toEqual([]);
    expect(await tablesContaining(p.name)).toEqual([]);
    const done = await read(filed.id);
    expect(done).toMatchObject({ status: 'completed', attempts: 1, error: null, completed_at: expect.any(String) });
    expect(done.receipt).toMatchObject({ membership_removed: true, account_erased: true, sessions_revoked: expect.any(Number) });
    const replaced = done.receipt.replaced.map((r: { table: string; column: string }) => `${r.table}.${r.column}`);
    expect(replaced).toEqual(expect.arrayContaining(['users.email', 'users.name', 'audit_events.actor_label', 'audit_events.metadata', 'invitations.email', 'events.data', 'findings.description']));

    // The pseudonym stands where the person was; the comment still reads.
    const finding = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: findingId } });
    expect(finding.description).toBe(`Reported by ${filed.pseudonym.name} <${filed.pseudonym.email}>; see ${filed.pseudonym.name}'s notes.`);
    expect(finding.assigneeId).toBe(p.id);
    // Entries stay; the erasure itself is audited, by system, without the name or e-mail.
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: { not: { startsWith: 'erasure.' } } } })).toBe(auditBefore);
    const audited = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id, targetId: filed.id }, orderBy: { id: 'asc' } });
    expect(audited.map((a) => [a.action, a.actorType])).toEqual([['erasure.requested', 'user'], ['erasure.completed', 'system']]);
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, actorId: p.id } })).toBeGreaterThan(0);

    // The person is gone from the organization and cannot sign in.
    expect((await api().get('/api/v1/members').set(bearer(org.admin.token))).body.data.map((m: { user_id: string }) => m.user_id)).not.toContain(p.id);
    expect((await api().get('/api/v1/organization').set(bearer(p.token))).status).toBe(401);
    expect((await loginRequest(h, { email: p.email, password: TEST_PASSWORD })).status).toBe(401);
    // No credential of the account is left: sign-in identities and the personal GitHub token are gone.
    expect(await h.deps.prisma.oAuthIdentity.count({ where: { userId: p.id } })).toBe(0);
    expect(await h.deps.prisma.personalSourceConnection.count({ where: { userId: p.id } })).toBe(0);
    // Another run does nothing more.
    expect(await runErasures(deps)).toEqual({ completed: 0, failed: 0 });
  });

  it('erases a former member; a person still in another organization keeps that account and its records', async () => {
    const p = await person(org);
    await h.deps.prisma.membership.create({ data: { id: newId('mem'), organizationId: other.id, userId: p.id, role: 'member' } });
    await h.deps.prisma.invitation.create({
      data: { id: newId('inv'), organizationId: other.id, email: p.email, role: 'member', tokenHash: uniqueSuffix(), invitedById: other.admin.id, expiresAt: new Date(Date.now() + 86400_000) },
    });
    expect((await api().delete(`/api/v1/members/${p.id}`).set(bearer(org.admin.token))).status).toBe(204);
    const filed = await erase(org.admin.token, p.id);
    expect(await runErasures(deps)).toEqual({ completed: 1, failed: 0 });
    expect((await read(filed.id)).receipt).toMatchObject({ membership_removed: false, account_erased: false });
    // This organization's records no longer name them (member.removed quoted the e-mail); the other's still do.
    const inOrg = await h.deps.prisma.auditEvent.findMany({ where: { organizationId: org.id, targetId: p.id } });
    expect(inOrg.length).toBeGreaterThan(0);
    expect(JSON.stringify(inOrg)).not.toContain(p.email);
    expect(JSON.stringify(inOrg)).toContain(filed.pseudonym.email);
    expect(await tablesContaining(p.email)).toEqual(['invitations', 'users']);
    expect((await api().get('/api/v1/organization').set(bearer(p.token))).status).toBe(401);
  });

  it('runs from the maintenance queue on a real worker, on the schedule every worker registers', async () => {
    expect(MAINTENANCE_SCHEDULES.map((s) => s.name)).toContain('erasure');
    const p = await person(org);
    const filed = await erase(org.admin.token, p.id);
    const running = await startWorker(deps, { schedule: false });
    const connection = deps.redis();
    const events = new QueueEvents(running.maintenanceQueue.name, { connection, prefix: running.maintenanceQueue.opts.prefix });
    try {
      await events.waitUntilReady();
      const job = await running.maintenanceQueue.add('erasure', {}, { removeOnComplete: true });
      expect(await job.waitUntilFinished(events, 30_000)).toEqual({ completed: 1, failed: 0 });
      expect((await read(filed.id)).status).toBe('completed');
    } finally {
      await events.close();
      await connection.quit();
      await running.close();
    }
  });
});

describe('filing, cancelling and retrying', () => {
  it('refuses the owner with 409 while they own the organization', async () => {
    const res = await file(org.admin.token, { user_id: org.owner.id });
    expect(res.status).toBe(409);
    expect(res.body.detail).toMatch(/owner/i);
    expect(await h.deps.prisma.erasureRequest.count({ where: { subjectUserId: org.owner.id } })).toBe(0);
  });

  it('fails a request whose person became owner meanwhile, and retries it once ownership moved on', async () => {
    const fresh = await createOrg(h);
    const p = await person(fresh, 'admin');
    const filed = await erase(fresh.owner.token, p.id);
    // Ownership moves to the person after filing.
    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: fresh.owner.id }, data: { role: 'admin' } });
    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: p.id }, data: { role: 'owner' } });
    expect(await runErasures(deps)).toEqual({ completed: 0, failed: 1 });
    const failed = await read(filed.id, fresh.admin.token);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, error: expect.stringMatching(/owns the organization/) });
    expect(await tablesContaining(p.email)).not.toEqual([]);
    // A second request for the person is refused while this one waits for a retry; cancel is for pending ones.
    expect((await file(fresh.admin.token, { user_id: p.id })).status).toBe(409);
    expect((await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(fresh.admin.token))).status).toBe(409);

    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: p.id }, data: { role: 'admin' } });
    await h.deps.prisma.membership.updateMany({ where: { organizationId: fresh.id, userId: fresh.owner.id }, data: { role: 'owner' } });
    const retried = await api().post(`${BASE}/${filed.id}/retry`).set(bearer(fresh.owner.token));
    expect(retried.status).toBe(202);
    expect(retried.body).toMatchObject({ status: 'pending', error: null });
    expect(await runErasures(deps)).toEqual({ completed: 1, failed: 0 });
    expect(await read(filed.id, fresh.admin.token)).toMatchObject({ status: 'completed', attempts: 2 });
    expect(await tablesContaining(p.email)).toEqual([]);
    expect((await api().post(`${BASE}/${filed.id}/retry`).set(bearer(fresh.owner.token))).status).toBe(409);
    expect((await file(fresh.admin.token, { user_id: p.id })).status).toBe(409);
    const actions = await h.deps.prisma.auditEvent.findMany({ where: { targetId: filed.id }, orderBy: { id: 'asc' }, select: { action: true } });
    expect(actions.map((a) => a.action)).toEqual(['erasure.requested', 'erasure.failed', 'erasure.retried', 'erasure.completed']);
  });

  it('cancels a pending request: the job leaves the person alone; a cancelled request is neither cancelled again nor retried', async () => {
    const p = await person(org);
    const filed = await erase(org.admin.token, p.id);
    const cancelled = await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token));
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', cancelled_at: expect.any(String) });
    expect(await runErasures(deps)).toEqual({ completed: 0, failed: 0 });
    expect((await h.deps.prisma.user.findUniqueOrThrow({ where: { id: p.id } })).email).toBe(p.email);
    expect((await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token))).status).toBe(409);
    expect((await api().post(`${BASE}/${filed.id}/retry`).set(bearer(org.admin.token))).status).toBe(409);
    // A new request may be filed after a cancel.
    const again = await erase(org.admin.token, p.id);
    expect((await api().post(`${BASE}/${again.id}/cancel`).set(bearer(org.admin.token))).status).toBe(200);
  });

  it('answers 404 for a person the organization does not know, 400 for a malformed id', async () => {
    expect((await file(org.admin.token, { user_id: other.member.id })).status).toBe(404);
    expect((await file(org.admin.token, { user_id: newId('usr') })).status).toBe(404);
    for (const body of [{}, { user_id: 'nope' }, { user_id: org.member.id, extra: 1 }]) {
      const res = await file(org.admin.token, body);
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.any(String) });
    }
  });

  it('keeps organizations apart: another organization\'s request answers 404 to read, cancel and retry', async () => {
    const p = await person(org);
    const filed = await erase(org.admin.token, p.id);
    for (const req of [
      api().get(`${BASE}/${filed.id}`),
      api().post(`${BASE}/${filed.id}/cancel`),
      api().post(`${BASE}/${filed.id}/retry`),
    ]) {
      expect((await req.set(bearer(other.owner.token))).status).toBe(404);
    }
    expect((await api().get(BASE).set(bearer(other.owner.token))).body.data).toEqual([]);
    const list = await api().get(`${BASE}?status=pending`).set(bearer(org.owner.token));
    expect(list.body.data.map((r: { id: string }) => r.id)).toContain(filed.id);
    await api().post(`${BASE}/${filed.id}/cancel`).set(bearer(org.admin.token));
  });

  it('needs governance:erase to file, cancel and retry, governance:read to list: managers and members get 403', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await file(user.token, { user_id: org.member.id });
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('governance:erase');
      const list = await api().get(BASE).set(bearer(user.token));
      expect(list.status).toBe(403);
      expect(list.body.detail).toContain('governance:read');
    }
    const readOnly = await createKey(h, org.admin.token, ['governance:read']);
    expect((await api().get(BASE).set(bearer(readOnly))).status).toBe(200);
    expect((await file(readOnly, { user_id: org.member.id })).status).toBe(403);
  });
});
