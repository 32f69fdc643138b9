// Idempotency-Key on the POST routes that create something (issue 37): a retry with the same key and request answers
// the first response again and creates nothing; another request under the key is 422; a retry while the first
// request still runs is 409; keys belong to an organization and a credential; they go 24 h after the first request.
import pg from 'pg';
import request from 'supertest';
import { pgFields } from '@svc/db';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertAssessment, insertProject, type TestOrg } from './support/fixtures';
import { insertReadyReport } from './support/domain';
import { untilBlockedBy, whileRowsHeld } from './support/row-locks';
import { buildOpenApiDocument } from '../src/openapi/document';
import { HeldIdempotencyKeys } from '../src/modules/idempotency/held-keys';
import { takesIdempotencyKey } from '../src/http/idempotency';
import { COLLISION_DETAIL } from '../src/http/errors';
import { runMaintenanceJob } from '../../worker/src/maintenance';
import type { WorkerDeps } from '../../worker/src/deps';

const DAY = 24 * 3600 * 1000;

let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());
afterEach(() => h.clock.reset());

const api = () => request(h.app);
const withKey = (token: string, key: string) => ({ ...bearer(token), 'Idempotency-Key': key });
const newKey = () => `ci-${uniqueSuffix()}`;
const projectsNamed = (organizationId: string, name: string) => h.deps.prisma.project.count({ where: { organizationId, name } });
const keyRows = (organizationId: string, key: string) =>
  h.deps.prisma.idempotencyKey.findMany({ where: { organizationId, key } });

describe('a retry with the same key and request', () => {
  it('answers the first response again, marked as a replay, and creates nothing', async () => {
    const key = newKey();
    const name = `Shop ${key}`;
    const first = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name, description: 'the shop' });
    expect(first.status).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    // The same body with its keys in another order is the same request.
    const again = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ description: 'the shop', name });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['content-type']).toMatch(/^application\/json/);
    expect(again.body).toEqual(first.body);
    expect(await projectsNamed(org.id, name)).toBe(1);
  });

  it('answers the first request in full on a route whose handler writes its own response (a grant: 201 or 200)', async () => {
    const project = await insertProject(h, org.id);
    const key = newKey();
    const body = { user_id: org.member.id, access: 'read' };
    const first = await api().post(`/api/v1/projects/${project.id}/access`).set(withKey(org.admin.token, key)).send(body);
    expect([first.status, first.body.user_id]).toEqual([201, org.member.id]);
    const again = await api().post(`/api/v1/projects/${project.id}/access`).set(withKey(org.admin.token, key)).send(body);
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([201, 'true']);
    expect(again.body).toEqual(first.body);
  });

  it('replays a stored 4xx answer too (the request itself was refused), and a fixed request needs a new key', async () => {
    const key = newKey();
    const missing = 'prj_00000000000000000000000000';
    const first = await api().post(`/api/v1/projects/${missing}/assessments`).set(withKey(org.admin.token, key)).send({ name: 'x' });
    expect(first.status).toBe(404);
    const again = await api().post(`/api/v1/projects/${missing}/assessments`).set(withKey(org.admin.token, key)).send({ name: 'x' });
    expect(again.status).toBe(404);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it('does not keep a 5xx: the key is free again and the same request may be retried with it', async () => {
    const key = newKey();
    const name = `Fails once ${key}`;
    // A real failure inside PostgreSQL while the handler writes (a trigger refusing this one team name).
    await h.deps.prisma.$executeRawUnsafe(`
      CREATE OR REPLACE FUNCTION idem_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.name = '${name}' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`);
    await h.deps.prisma.$executeRawUnsafe('CREATE TRIGGER idem_test_refuse BEFORE INSERT ON teams FOR EACH ROW EXECUTE FUNCTION idem_test_refuse()');
    try {
      const failed = await api().post('/api/v1/teams').set(withKey(org.admin.token, key)).send({ name });
      expect(failed.status).toBe(500);
      expect(await keyRows(org.id, key)).toHaveLength(0);
    } finally {
      await h.deps.prisma.$executeRawUnsafe('DROP TRIGGER idem_test_refuse ON teams');
    }
    const retried = await api().post('/api/v1/teams').set(withKey(org.admin.token, key)).send({ name });
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(await h.deps.prisma.team.count({ where: { organizationId: org.id, name } })).toBe(1);
  });

  it('does not keep a 409 that asks to be sent again (a deadlock lost): the same key runs it again, applied once', async () => {
    const o = await createOrg(h);
    const key = newKey();
    const send = () => api().post('/api/v1/billing/limits').set(withKey(o.owner.token, key)).send({ kind: 'threshold', credits: '50' }).then((r) => r);
    // The request locks the organization's row, then waits for the owner's membership, held here; this transaction
    // then asks for the organization's row. PostgreSQL breaks the deadlock in the backend whose deadlock_timeout runs
    // out first, rolling back its own transaction: the request's, which began to wait a quarter of it earlier.
    const lost = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${o.id} AND user_id = ${o.owner.id} FOR UPDATE`,
      send,
      1,
      async (tx) => {
        const [{ ms }] = await tx.$queryRaw<Array<{ ms: number }>>`SELECT setting::int AS ms FROM pg_settings WHERE name = 'deadlock_timeout'`;
        await new Promise((r) => setTimeout(r, ms / 4));
        await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${o.id} FOR UPDATE`;
      },
    );
    expect(lost.status).toBe(409);
    expect(lost.headers['retry-after']).toBe('1');
    expect(lost.body).toEqual({ detail: COLLISION_DETAIL });

    const again = await send();
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(await h.deps.prisma.spendLimit.count({ where: { organizationId: o.id } })).toBe(1);
    const replayed = await send();
    expect([replayed.status, replayed.headers['idempotent-replayed'], replayed.body.id]).toEqual([201, 'true', again.body.id]);
  });

  it('does not take the key when the body fails validation: the fixed body may be sent with the same key', async () => {
    const key = newKey();
    const invalid = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ description: 'no name' });
    expect(invalid.status).toBe(400);
    expect(await keyRows(org.id, key)).toHaveLength(0);
    const fixed = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name: `Fixed ${key}` });
    expect(fixed.status).toBe(201);
    expect(fixed.headers['idempotent-replayed']).toBeUndefined();
    const again = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name: `Fixed ${key}` });
    expect([again.headers['idempotent-replayed'], again.body.id]).toEqual(['true', fixed.body.id]);
  });

  it.each([
    ['a number past double range (1e400)', '{"name":1e400}'],
    ['a negative one', '{"name":"x","junk":-1e400}'],
    ['nesting 5,000 deep', `{"name":"x","junk":${'['.repeat(5000)}${']'.repeat(5000)}}`],
  ])('answers 400 (not 500) for a body with %s, as without the header, and takes no key', async (_what, body) => {
    const key = newKey();
    const without = await api().post('/api/v1/projects').set(bearer(org.admin.token)).set('Content-Type', 'application/json').send(body);
    expect(without.status).toBe(400);
    const res = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).set('Content-Type', 'application/json').send(body);
    expect(res.status).toBe(400);
    expect(Object.keys(res.body)).toEqual(['detail']);
    expect(await keyRows(org.id, key)).toHaveLength(0);
  });

  it('replays a one-time secret (the API key value) to the same credential, and keeps it sealed at rest', async () => {
    const key = newKey();
    const body = { name: `ci ${key}`, scopes: ['projects:read'] };
    const first = await api().post('/api/v1/api-keys').set(withKey(org.admin.token, key)).send(body);
    expect(first.status).toBe(201);
    expect(first.body.key).toMatch(/^sk-svc-/);
    const again = await api().post('/api/v1/api-keys').set(withKey(org.admin.token, key)).send(body);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.key).toBe(first.body.key);
    expect(await h.deps.prisma.apiKey.count({ where: { organizationId: org.id, name: body.name } })).toBe(1);

    const [row] = await keyRows(org.id, key);
    expect(row!.responseBodyEnc).toMatch(/^v1\./);
    expect(row!.responseBodyEnc).not.toContain(first.body.key);
    expect(row!.responseBodyEnc).not.toContain(first.body.key.slice(7, 30));
  });
});

describe('a retried publication', () => {
  it('answers the same share URL, which stays live (without a key, publishing again replaces the URL)', async () => {
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessment(h, org.id, project.id);
    const report = await insertReadyReport(h, org.id, assessment.id);
    const key = newKey();
    const publish = () => api().post(`/api/v1/reports/${report.id}/publication`).set(withKey(org.admin.token, key)).send({});
    const first = await publish();
    expect(first.status).toBe(201);
    const again = await publish();
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.url).toBe(first.body.url);
    expect(await h.deps.prisma.reportShare.count({ where: { reportId: report.id } })).toBe(1);
    const shared = await api().get(new URL(first.body.url).pathname.replace(/^\/shared/, '/api/v1/shared'));
    expect(shared.status).toBe(200);
    const [row] = await keyRows(org.id, key);
    expect(row!.responseBodyEnc).not.toContain(new URL(first.body.url).pathname.split('/').pop());
  });
});

describe('another request under a used key', () => {
  it('answers 422 for a different body and creates nothing', async () => {
    const key = newKey();
    const first = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name: `A ${key}` });
    expect(first.status).toBe(201);
    const different = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name: `B ${key}` });
    expect(different.status).toBe(422);
    expect(different.body.detail).toMatch(/different request/);
    expect(await projectsNamed(org.id, `B ${key}`)).toBe(0);
  });

  it('answers 422 for another path with the same body', async () => {
    const key = newKey();
    const project = await insertProject(h, org.id);
    expect((await api().post('/api/v1/teams').set(withKey(org.admin.token, key)).send({ name: `T ${key}` })).status).toBe(201);
    const elsewhere = await api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name: `T ${key}` });
    expect(elsewhere.status).toBe(422);
    expect(await h.deps.prisma.assessment.count({ where: { projectId: project.id } })).toBe(0);
  });
});

describe('while the first request runs', () => {
  it('answers 409 with Retry-After, and the first request then completes and is replayed', async () => {
    const project = await insertProject(h, org.id);
    const key = newKey();
    const name = `Held ${key}`;
    // The project row held: the assessment's INSERT (its foreign key takes a share lock on the project) waits for it,
    // so the first request is genuinely in flight inside its handler.
    await whileProjectLocked(project.id, async (held) => {
      const first = api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name });
      const firstDone = first.then((res) => res);
      await waitFor(async () => (await keyRows(org.id, key))[0]?.state === 'in_flight');
      await untilBlockedBy(h, held.pid, 1);

      const during = await api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name });
      expect(during.status).toBe(409);
      expect(during.headers['retry-after']).toBe('1');
      expect(during.body.detail).toMatch(/still being processed/);

      await held.release();
      const created = await firstDone;
      expect(created.status).toBe(201);
      const after = await api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name });
      expect(after.status).toBe(201);
      expect(after.headers['idempotent-replayed']).toBe('true');
      expect(after.body.id).toBe(created.body.id);
      expect(await h.deps.prisma.assessment.count({ where: { projectId: project.id } })).toBe(1);
    });
  });

  it('keeps the key of a first request that runs past the lock timeout: a retry answers 409, never runs it twice', async () => {
    const project = await insertProject(h, org.id);
    const key = newKey();
    const name = `Slow ${key}`;
    await whileProjectLocked(project.id, async (held) => {
      const first = api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name });
      const firstDone = first.then((res) => res);
      await waitFor(async () => (await keyRows(org.id, key))[0]?.state === 'in_flight');
      await untilBlockedBy(h, held.pid, 1);
      const lockedAt = (await keyRows(org.id, key))[0]!.lockedAt!.getTime();

      // The first request is still waiting for the row lock a minute later: its instance renews the key's lock.
      h.clock.advance(61_000);
      await waitFor(async () => ((await keyRows(org.id, key))[0]?.lockedAt?.getTime() ?? 0) > lockedAt, 15_000);
      const retry = await api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name });
      expect(retry.status).toBe(409);

      await held.release();
      const created = await firstDone;
      expect(created.status).toBe(201);
      const after = await api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name });
      expect(after.headers['idempotent-replayed']).toBe('true');
      expect(after.body.id).toBe(created.body.id);
      expect(await h.deps.prisma.assessment.count({ where: { projectId: project.id } })).toBe(1);
      // Answered: the lock is not renewed any more.
      expect((await keyRows(org.id, key))[0]).toMatchObject({ state: 'completed', lockedAt: null, lockToken: null });
    });
  }, 30_000);

  it('logs that its answer was not stored when a retry took its key meanwhile, and leaves the taker\'s key alone', async () => {
    const project = await insertProject(h, org.id);
    const key = newKey();
    await whileProjectLocked(project.id, async (held) => {
      const first = api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name: `Taken ${key}` });
      const firstDone = first.then((res) => res);
      await untilBlockedBy(h, held.pid, 1);
      // As after a lock gone stale: another request holds the key now, under its own lock token.
      await h.deps.prisma.$executeRaw`UPDATE idempotency_keys SET lock_token = 'the-retry' WHERE organization_id = ${org.id} AND key = ${key}`;
      const warn = jest.spyOn(h.deps.logger, 'warn');
      try {
        await held.release();
        expect((await firstDone).status).toBe(201);
        await waitFor(async () => warn.mock.calls.some(([message]) => String(message).includes('was not stored')));
      } finally {
        warn.mockRestore();
      }
      expect((await keyRows(org.id, key))[0]).toMatchObject({ state: 'in_flight', lockToken: 'the-retry', responseStatus: null });
    });
  });

  it('renews the keys of requests holding every connection of the pool: a retry on another instance answers 409', async () => {
    // Instance A's pool (4 connections) is all taken by four keyed creates waiting for a row lock; its renewals go
    // on a connection of their own, so their keys do not go stale and instance B does not run them again.
    // One organization's writes may take the whole pool here (its turns are tested in organization-turns*.test.ts).
    const a = await createHarness({ DATABASE_CONNECT_TIMEOUT_MS: '2000', ORGANIZATION_WRITES_IN_FLIGHT: '4', WRITES_IN_FLIGHT: '4' });
    const project = await insertProject(h, org.id);
    const keys = Array.from({ length: 4 }, () => newKey());
    try {
      await whileProjectLocked(project.id, async (held) => {
        const firsts = keys.map((key) =>
          request(a.app).post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, key)).send({ name: `Pool ${key}` }).then((res) => res),
        );
        await untilBlockedBy(h, held.pid, keys.length);
        const lockedAt = (await keyRows(org.id, keys[0]!))[0]!.lockedAt!.getTime();

        a.clock.advance(61_000);
        h.clock.advance(61_000);
        await waitFor(async () => ((await keyRows(org.id, keys[0]!))[0]?.lockedAt?.getTime() ?? 0) > lockedAt, 15_000);
        const retry = await api().post(`/api/v1/projects/${project.id}/assessments`).set(withKey(org.admin.token, keys[0]!)).send({ name: `Pool ${keys[0]}` });
        expect(retry.status).toBe(409);

        await held.release();
        for (const first of await Promise.all(firsts)) expect(first.status).toBe(201);
        expect(await h.deps.prisma.assessment.count({ where: { projectId: project.id } })).toBe(keys.length);
      });
    } finally {
      await a.close();
    }
  }, 40_000);

  it('keeps the key of a request whose answer could not be stored, and stores it with the next renewal', async () => {
    const key = newKey();
    const name = `Unstored ${key}`;
    // The first attempt to store this key's answer fails (as in a database outage), the next ones go through (a
    // sequence counts the attempts: unlike a row, its value survives the failed statement).
    const trigger = `fail_once_${uniqueSuffix().replace(/[^a-z0-9]/gi, '')}`;
    await h.deps.prisma.$executeRawUnsafe(`CREATE SEQUENCE ${trigger}_seen`);
    await h.deps.prisma.$executeRawUnsafe(`
      CREATE FUNCTION ${trigger}() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.key = '${key}' AND NEW.state = 'completed' AND nextval('${trigger}_seen') = 1 THEN
          RAISE EXCEPTION 'storing the answer failed';
        END IF;
        RETURN NEW;
      END $$`);
    await h.deps.prisma.$executeRawUnsafe(`CREATE TRIGGER ${trigger} BEFORE UPDATE ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION ${trigger}()`);
    try {
      const first = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
      expect(first.status).toBe(201);
      expect((await keyRows(org.id, key))[0]?.state).toBe('in_flight');
      // Past the lock timeout: the key is still this instance's, and its answer is stored with the next renewal.
      h.clock.advance(61_000);
      await waitFor(async () => (await keyRows(org.id, key))[0]?.state === 'completed', 15_000);
      const again = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body.id).toBe(first.body.id);
      expect(await projectsNamed(org.id, name)).toBe(1);
    } finally {
      await h.deps.prisma.$executeRawUnsafe(`DROP TRIGGER IF EXISTS ${trigger} ON idempotency_keys`);
      await h.deps.prisma.$executeRawUnsafe(`DROP FUNCTION IF EXISTS ${trigger}()`);
      await h.deps.prisma.$executeRawUnsafe(`DROP SEQUENCE IF EXISTS ${trigger}_seen`);
    }
  }, 30_000);

  it('renews the other keys while one key row is locked, and waits for no lock', async () => {
    const keys = new HeldIdempotencyKeys(h.deps.idempotencyPool, h.clock, h.deps.logger, 60_000);
    const old = new Date(h.clock.now().getTime() - 30_000);
    const [locked, free] = [newKey(), newKey()];
    for (const [o, key] of [[org, locked], [other, free]] as const) {
      await h.deps.prisma.idempotencyKey.create({
        data: { organizationId: o.id, credential: 'key:k1', key, requestHash: 'h', state: 'in_flight', lockToken: `t-${key}`, lockedAt: old, createdAt: old },
      });
      keys.hold({ organizationId: o.id, credential: 'key:k1', key }, `t-${key}`);
    }
    const holder = new pg.Client(pgFields(h.config.databaseUrl));
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM idempotency_keys WHERE organization_id = $1 AND key = $2 FOR UPDATE', [org.id, locked]);
      const started = Date.now();
      await keys.renew();
      expect(Date.now() - started).toBeLessThan(3000);
      expect((await keyRows(other.id, free))[0]!.lockedAt!.getTime()).toBeGreaterThan(old.getTime());
      expect((await keyRows(org.id, locked))[0]!.lockedAt!.getTime()).toBe(old.getTime());
      expect(keys.size).toBe(2); // skipped this round, still ours
      await holder.query('COMMIT');
      await keys.renew();
      expect((await keyRows(org.id, locked))[0]!.lockedAt!.getTime()).toBeGreaterThan(old.getTime());
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });

  it('survives the server ending its renewal connection, and renews on a new one', async () => {
    const keys = new HeldIdempotencyKeys(h.deps.idempotencyPool, h.clock, h.deps.logger, 60_000);
    const key = newKey();
    const old = new Date(h.clock.now().getTime() - 30_000);
    await h.deps.prisma.idempotencyKey.create({
      data: { organizationId: org.id, credential: 'key:k1', key, requestHash: 'h', state: 'in_flight', lockToken: `t-${key}`, lockedAt: old, createdAt: old },
    });
    keys.hold({ organizationId: org.id, credential: 'key:k1', key }, `t-${key}`);
    const { rows } = await h.deps.idempotencyPool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    await h.deps.prisma.$queryRaw`SELECT pg_terminate_backend(${rows[0]!.pid}::int)`;
    await new Promise((r) => setTimeout(r, 300)); // the idle connection's end reaches the pool as an 'error'
    await keys.renew();
    expect((await keyRows(org.id, key))[0]!.lockedAt!.getTime()).toBeGreaterThan(old.getTime());
  });

  it('lets two concurrent requests with one key create exactly one row', async () => {
    const key = newKey();
    const name = `Race ${key}`;
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name })),
    );
    expect(await projectsNamed(org.id, name)).toBe(1);
    const originals = answers.filter((a) => a.status === 201 && a.headers['idempotent-replayed'] === undefined);
    expect(originals).toHaveLength(1);
    for (const a of answers) {
      expect([201, 409]).toContain(a.status);
      if (a.status === 201) expect(a.body.id).toBe(originals[0]!.body.id);
    }
    expect(await keyRows(org.id, key)).toHaveLength(1);
  });

  it('frees a key whose request died mid-way (no answer stored) after the lock timeout of 60 s', async () => {
    const key = newKey();
    const name = `Crashed ${key}`;
    expect((await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name })).status).toBe(201);
    // As if the instance had died before storing the answer.
    await h.deps.prisma.idempotencyKey.updateMany({
      where: { organizationId: org.id, key },
      data: { state: 'in_flight', lockToken: 'dead', lockedAt: new Date(h.clock.now().getTime()), responseStatus: null, responseBodyEnc: null },
    });
    expect((await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name })).status).toBe(409);
    h.clock.advance(61_000);
    const retried = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    // A different request may not take over a dead request's key.
    await h.deps.prisma.idempotencyKey.updateMany({
      where: { organizationId: org.id, key },
      data: { state: 'in_flight', lockToken: 'dead', lockedAt: new Date(h.clock.now().getTime() - 120_000) },
    });
    expect((await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name: 'other' })).status).toBe(422);
  });
});

describe('whose key it is', () => {
  it('keeps another credential of the organization apart: its same key creates its own', async () => {
    const key = newKey();
    const name = `Shared ${key}`;
    const minted = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: 'robot', scopes: ['projects:create', 'projects:read'] });
    expect(minted.status).toBe(201);
    const bySession = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
    const byApiKey = await api().post('/api/v1/projects').set(withKey(minted.body.key, key)).send({ name });
    const byOtherUser = await api().post('/api/v1/projects').set(withKey(org.owner.token, key)).send({ name });
    for (const res of [bySession, byApiKey, byOtherUser]) {
      expect(res.status).toBe(201);
      expect(res.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(new Set([bySession.body.id, byApiKey.body.id, byOtherUser.body.id]).size).toBe(3);
    expect(await projectsNamed(org.id, name)).toBe(3);
    // Each credential's retry answers its own first response.
    for (const [token, first] of [[org.admin.token, bySession], [minted.body.key, byApiKey], [org.owner.token, byOtherUser]] as const) {
      const again = await api().post('/api/v1/projects').set(withKey(token, key)).send({ name });
      expect([again.headers['idempotent-replayed'], again.body.id]).toEqual(['true', first.body.id]);
    }
    expect(await projectsNamed(org.id, name)).toBe(3);
  });

  it("keeps another organization apart: its same key and body create its own, and never see the first one's answer", async () => {
    const key = newKey();
    const name = `Tenant ${key}`;
    const ours = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
    const theirs = await api().post('/api/v1/projects').set(withKey(other.admin.token, key)).send({ name });
    expect(theirs.status).toBe(201);
    expect(theirs.headers['idempotent-replayed']).toBeUndefined();
    expect(theirs.body.id).not.toBe(ours.body.id);
    expect(await projectsNamed(other.id, name)).toBe(1);
    expect(await projectsNamed(org.id, name)).toBe(1);
    const theirRetry = await api().post('/api/v1/projects').set(withKey(other.admin.token, key)).send({ name });
    expect([theirRetry.headers['idempotent-replayed'], theirRetry.body.id]).toEqual(['true', theirs.body.id]);
  });

  it('answers a replay only to a credential that still holds the scope', async () => {
    const manager = await createUserInOrg(h, org.id, 'manager', 'demoted');
    const key = newKey();
    const name = `Demoted ${key}`;
    expect((await api().post('/api/v1/projects').set(withKey(manager.token, key)).send({ name })).status).toBe(201);
    await h.deps.prisma.membership.updateMany({ where: { organizationId: org.id, userId: manager.id }, data: { role: 'member' } });
    const again = await api().post('/api/v1/projects').set(withKey(manager.token, key)).send({ name });
    expect(again.status).toBe(403);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
  });

  it('is shared by the sessions of one user (a dashboard retry from another tab)', async () => {
    const key = newKey();
    const name = `Tabs ${key}`;
    const login = await api().post('/api/v1/auth/login').send({ email: org.admin.email, password: 'correct horse battery staple' });
    expect(login.status).toBe(200);
    const first = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
    const otherTab = await api().post('/api/v1/projects').set(withKey(login.body.token, key)).send({ name });
    expect(otherTab.headers['idempotent-replayed']).toBe('true');
    expect(otherTab.body.id).toBe(first.body.id);
  });
});

describe('24 hours later', () => {
  it('has forgotten the key: the same request creates again; the retention job sweeps the row', async () => {
    const key = newKey();
    const name = `Daily ${key}`;
    expect((await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name })).status).toBe(201);
    h.clock.advance(DAY - 60_000);
    expect((await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name })).headers['idempotent-replayed']).toBe('true');
    h.clock.advance(61_000);
    const later = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
    expect(later.status).toBe(201);
    expect(later.headers['idempotent-replayed']).toBeUndefined();
    expect(await projectsNamed(org.id, name)).toBe(2);

    const sweptKey = newKey();
    expect((await api().post('/api/v1/teams').set(withKey(org.admin.token, sweptKey)).send({ name: `Old ${sweptKey}` })).status).toBe(201);
    const workerDeps = { config: h.config, logger: h.deps.logger, prisma: h.deps.prisma, clock: h.clock } as unknown as WorkerDeps;
    await runMaintenanceJob(workerDeps, h.deps.deliveryQueue, 'retention-purge');
    expect(await keyRows(org.id, sweptKey)).toHaveLength(1);
    h.clock.advance(DAY + 1000);
    await runMaintenanceJob(workerDeps, h.deps.deliveryQueue, 'retention-purge');
    expect(await keyRows(org.id, sweptKey)).toHaveLength(0);
    expect(await keyRows(org.id, key)).toHaveLength(0);
  });
});

describe('where the header means nothing, or is malformed', () => {
  it('is ignored on a GET (and on the other methods HTTP defines as idempotent)', async () => {
    const key = newKey();
    const list = await api().get('/api/v1/projects').set(withKey(org.admin.token, key));
    expect(list.status).toBe(200);
    expect(list.headers['idempotent-replayed']).toBeUndefined();
    expect(await keyRows(org.id, key)).toHaveLength(0);
  });

  it('answers 400 on a POST that creates nothing and on a PATCH, and changes nothing', async () => {
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessment(h, org.id, project.id);
    const launch = await api().post(`/api/v1/assessments/${assessment.id}/launch`).set(withKey(org.admin.token, newKey()));
    expect(launch.status).toBe(400);
    expect(launch.body.detail).toMatch(/not supported on POST \/api\/v1\/assessments\/asm_\w+\/launch/);
    expect((await h.deps.prisma.assessment.findUnique({ where: { id: assessment.id } }))!.status).toBe('draft');
    const rename = await api().patch(`/api/v1/projects/${project.id}`).set(withKey(org.admin.token, newKey())).send({ name: 'Renamed' });
    expect(rename.status).toBe(400);
    expect((await h.deps.prisma.project.findUnique({ where: { id: project.id } }))!.name).toBe(project.name);
  });

  it('answers 400 on an upload (a streamed body), pointing at its own duplicate detection', async () => {
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessment(h, org.id, project.id);
    const upload = await api().post(`/api/v1/assessments/${assessment.id}/source`).set(withKey(org.admin.token, newKey()))
      .set('Content-Type', 'application/zip').send(Buffer.from('PK\u0005\u0006' + '\u0000'.repeat(18), 'binary'));
    expect(upload.status).toBe(400);
    expect(upload.body.detail).toMatch(/not accepted on uploads.*duplicate: true/);
    expect(await h.deps.prisma.sourceArchive.count({ where: { assessmentId: assessment.id } })).toBe(0);
  });

  it.each([
    ['empty', ''],
    ['longer than 255 characters', 'k'.repeat(256)],
    ['not ASCII', 'clé'],
  ])('answers 400 for a key that is %s, and creates nothing', async (_what, key) => {
    const name = `Bad key ${uniqueSuffix()}`;
    const res = await api().post('/api/v1/projects').set(withKey(org.admin.token, key)).send({ name });
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/1 to 255 printable ASCII/);
    expect(await projectsNamed(org.id, name)).toBe(0);
  });

  it('accepts exactly 255 printable characters', async () => {
    const res = await api().post('/api/v1/projects').set(withKey(org.admin.token, `~ ${uniqueSuffix()}`.padEnd(255, 'x')))
      .send({ name: `Long key ${uniqueSuffix()}` });
    expect(res.status).toBe(201);
  });

  it('answers 400 for two Idempotency-Key headers', async () => {
    const name = `Two keys ${uniqueSuffix()}`;
    const res = await api().post('/api/v1/projects').set(bearer(org.admin.token)).set('Idempotency-Key', ['a', 'b'] as unknown as string).send({ name });
    expect(res.status).toBe(400);
    expect(await projectsNamed(org.id, name)).toBe(0);
  });
});

describe('which routes take it', () => {
  const routes = () => h.app.locals.routes;
  const taking = () => routes().filter(takesIdempotencyKey).map((r) => `${r.method.toUpperCase()} ${r.path}`);

  it('every POST that creates something, and no upload, read or public route', () => {
    const expected = [
      'POST /projects',
      'POST /projects/:id/assessments',
      'POST /assessments/:id/findings',
      'POST /assessments/:id/reports',
      'POST /reports/:id/publication',
      'POST /reports/:id/shares',
      'POST /webhooks/subscriptions',
      'POST /projects/:projectId/webhooks/subscriptions',
      'POST /assessments/:assessmentId/webhooks/subscriptions',
      'POST /notification-targets',
      'POST /issue-export-targets',
      'POST /findings/:id/issue-exports',
      'POST /api-keys',
      'POST /invitations',
      'POST /teams',
      'POST /governance/erasure-requests',
    ];
    expect(expected.filter((route) => !taking().includes(route))).toEqual([]);
    expect(taking()).not.toContain('POST /assessments/:id/source');
    for (const route of routes().filter(takesIdempotencyKey)) {
      expect(route.method).toBe('post');
      expect(route.scope).not.toBe('public');
    }
  });

  it('documents the header on exactly those routes in the OpenAPI document', () => {
    const doc = buildOpenApiDocument(routes(), { version: 'test', serverUrl: 'http://localhost' });
    for (const route of routes()) {
      const path = `/api/v1${route.path.replace(/:([A-Za-z_]+)/g, '{$1}')}`;
      const op = (doc.paths[path] as Record<string, { parameters: Array<{ name: string; in: string }> }>)[route.method]!;
      const documented = op.parameters.some((p) => p.in === 'header' && p.name === 'Idempotency-Key');
      expect([`${route.method} ${route.path}`, documented]).toEqual([`${route.method} ${route.path}`, takesIdempotencyKey(route)]);
    }
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Runs `body` while a second connection holds the project's row (FOR UPDATE): a statement that needs it waits, so a
 * request is genuinely in flight inside its handler. `release` commits; the lock goes at the end either way.
 */
async function whileProjectLocked(projectId: string, body: (held: { pid: number; release: () => Promise<void> }) => Promise<void>) {
  const holder = new pg.Client(pgFields(h.config.databaseUrl));
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM projects WHERE id = $1 FOR UPDATE', [projectId]);
    const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
    await body({ pid, release: async () => void (await holder.query('COMMIT')) });
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
  }
}
