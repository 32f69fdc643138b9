// The error envelope (SPEC Errors): every error, including the ones the framework and body parser raise, is
// JSON with exactly a string `detail` (plus `code` only for EMAIL_NOT_VERIFIED). And the security headers.
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import request from 'supertest';
import { createPgPool, createPrismaClient, poolOf } from '@svc/db';
import { COLLISION_DETAIL, errorHandler } from '../src/http/errors';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import { signupViaApi } from './support/auth-helpers';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness({ LOGIN_RATE_LIMIT_PER_MINUTE: '1000' });
  org = await createOrg(h);
});
afterAll(() => h.close());

function expectEnvelope(res: request.Response, status: number) {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(Object.keys(res.body)).toEqual(['detail']);
  expect(typeof res.body.detail).toBe('string');
  expect(res.body.detail.length).toBeGreaterThan(0);
}

describe('the error envelope', () => {
  it('answers unknown routes with 404 { detail }, inside and outside /api/v1 and for any method', async () => {
    expectEnvelope(await request(h.app).get('/api/v1/no-such-thing'), 404);
    expectEnvelope(await request(h.app).get('/nothing/here'), 404);
    expectEnvelope(await request(h.app).delete('/api/v1/auth/login'), 404);
    expectEnvelope(await request(h.app).post('/api/v1/auth/nope').send({}), 404);
  });

  it('answers malformed JSON with 400 { detail }', async () => {
    const res = await request(h.app).post('/api/v1/auth/login').set('Content-Type', 'application/json').send('{"email": "a@b.c",');
    expectEnvelope(res, 400);
    expect(res.body.detail).toMatch(/JSON/);
    expectEnvelope(await request(h.app).post('/api/v1/auth/login').set('Content-Type', 'application/json').send('"just a string"'), 400);
  });

  it('answers a body that is not JSON with 415 { detail }', async () => {
    const text = await request(h.app).post('/api/v1/auth/login').set('Content-Type', 'text/plain').send('email=a@b.c&password=x');
    expectEnvelope(text, 415);
    const form = await request(h.app).post('/api/v1/auth/signup').type('form').send({ email: 'a@b.c', password: 'xxxxxxxxxxxx' });
    expectEnvelope(form, 415);
    const charset = await request(h.app)
      .post('/api/v1/auth/login')
      .set('Content-Type', 'application/json; charset=iso-8859-1')
      .send('{"email":"a@b.c","password":"x"}');
    expectEnvelope(charset, 415);
  });

  it('answers a body over 1 MB with 413 { detail }', async () => {
    const big = JSON.stringify({ email: 'a@b.c', password: 'x', padding: 'x'.repeat(1024 * 1024 + 10) });
    expectEnvelope(await request(h.app).post('/api/v1/auth/login').set('Content-Type', 'application/json').send(big), 413);
  });

  it('uses { detail } for schema (400), credential (401), scope (403), CSRF (403), conflict (409) and 422 errors', async () => {
    expectEnvelope(await request(h.app).post('/api/v1/auth/login').send({ email: 'nobody@example.test' }), 400);
    expectEnvelope(await request(h.app).get('/api/v1/auth/me'), 401);
    expectEnvelope(await request(h.app).get('/api/v1/auth/me').set('Authorization', 'Token abc'), 401);
    expectEnvelope(await request(h.app).get('/api/v1/auth/me').set(bearer('eyJhbGciOiJIUzI1NiJ9.e30.x')), 401);
    expectEnvelope(await request(h.app).post('/api/v1/auth/login').send({ email: 'nobody@example.test', password: 'whatever it is' }), 401);

    const scope = await request(h.app).post('/api/v1/api-keys').set(bearer(org.member.token)).send({ name: 'x', scopes: ['org:read'] });
    expectEnvelope(scope, 403);
    expect(scope.body.detail).toContain('api_keys:create');
    const bundle = await request(h.app).post('/api/v1/api-keys').set(bearer(org.manager.token)).send({ name: 'x', scopes: ['webhooks:read'] });
    expectEnvelope(bundle, 403);
    expectEnvelope(await request(h.app).post('/api/v1/auth/logout').set('Cookie', `session=${org.admin.token}`), 403);

    const existing = await signupViaApi(h);
    const dup = await request(h.app)
      .post('/api/v1/auth/signup')
      .send({ email: existing.email, password: 'long enough password', name: 'N', organization_name: 'O' });
    expectEnvelope(dup, 409);
    expectEnvelope(await request(h.app).post('/api/v1/api-keys').set(bearer(org.owner.token)).send({ name: 'x', scopes: ['nope:nope'] }), 422);
  });

  it('adds `code` only where SPEC names one: EMAIL_NOT_VERIFIED', async () => {
    const pending = await signupViaApi(h);
    const res = await request(h.app).post('/api/v1/auth/login').send({ email: pending.email, password: pending.password });
    expect(res.status).toBe(403);
    expect(Object.keys(res.body).sort()).toEqual(['code', 'detail']);
    expect(res.body).toEqual({ detail: expect.any(String), code: 'EMAIL_NOT_VERIFIED' });
  });

  it('answers 429 with { detail } and Retry-After', async () => {
    const limited = await createHarness({ RATE_LIMIT_PER_MINUTE: '1' });
    try {
      await request(limited.app).post('/api/v1/auth/verify-email').send({ token: `t-${uniqueSuffix()}` });
      const res = await request(limited.app).post('/api/v1/auth/verify-email').send({ token: 'x' });
      expectEnvelope(res, 429);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
    } finally {
      await limited.close();
    }
  });
});

describe('headers', () => {
  it('sends no framework banner and sets helmet\'s security headers, on success and on error', async () => {
    for (const res of [
      await request(h.app).get('/api/v1/auth/me').set(bearer(org.member.token)),
      await request(h.app).get('/api/v1/missing'),
    ]) {
      expect(res.headers['x-powered-by']).toBeUndefined();
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toContain("default-src 'self'");
      expect(res.headers['strict-transport-security']).toMatch(/max-age=\d+/);
      expect(res.headers['x-frame-options']).toBe('SAMEORIGIN');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.headers['x-request-id']).toEqual(expect.any(String));
    }
  });
});

describe('an error after the response started (a streamed export failing midway)', () => {
  it('cuts the body short instead of appending an envelope to a 200', async () => {
    const streaming = express();
    streaming.get('/export', async (_req, res) => {
      res.status(200).type('text/csv');
      res.write('id,title\r\n');
      await new Promise((resolve) => setTimeout(resolve, 20));
      throw new Error('database went away after the first batch');
    });
    streaming.use(errorHandler(h.deps.logger));
    const server = streaming.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const outcome = await new Promise<{ status?: number; body: string; completed: boolean }>((resolve) => {
        let body = '';
        let status: number | undefined;
        const req = http.get({ host: '127.0.0.1', port, path: '/export' }, (res) => {
          status = res.statusCode;
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => resolve({ status, body, completed: res.complete }));
          res.on('error', () => resolve({ status, body, completed: false }));
        });
        req.on('error', () => resolve({ status, body, completed: false }));
      });
      expect(outcome.status).toBe(200);
      expect(outcome.body).toBe('id,title\r\n');
      expect(outcome.completed).toBe(false);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('a database too busy for a transaction (every pooled connection taken, or a transaction outrunning its timeout)', () => {
  // Prisma's own P2028 errors, raised for real: a client of one connection that a test holds, and a transaction
  // that runs past its timeout. Nothing was committed in either case; a loaded server is no bug in the request.
  async function answerOf(transaction: (client: ReturnType<typeof createPrismaClient>) => Promise<unknown>, holdTheConnection: boolean) {
    const client = createPrismaClient(h.config.databaseUrl, { max: 1, connectTimeoutMs: 500 });
    const held = holdTheConnection ? await poolOf(client)!.connect() : undefined;
    const app = express();
    app.post('/tx', (_req, res, next) => {
      transaction(client).then(() => res.json({ ok: true }), next);
    });
    app.use(errorHandler(h.deps.logger));
    try {
      return await request(app).post('/tx');
    } finally {
      held?.release();
      await client.$disconnect();
    }
  }

  it('answers 503 with Retry-After when no connection frees up within the wait for one (the pool gives up first)', async () => {
    const res = await answerOf((client) => client.$transaction(async (tx) => tx.$queryRaw`SELECT 1`, { maxWait: 300 }), true);
    expectEnvelope(res, 503);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    expect(res.body.detail).toMatch(/database/i);
  });

  it('answers 503 with Retry-After when the transaction outran its timeout (rolled back)', async () => {
    const res = await answerOf(
      (client) =>
        client.$transaction(
          async (tx) => {
            await tx.$queryRaw`SELECT 1 AS slept FROM pg_sleep(0.6)`;
            return tx.$queryRaw`SELECT 1`;
          },
          { timeout: 200 },
        ),
      false,
    );
    expectEnvelope(res, 503);
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
  });
});

describe('a transaction PostgreSQL rolls back to break a deadlock with another', () => {
  it('answers 409 with Retry-After (send it again), not a 500', async () => {
    // A real deadlock: two transactions each lock one organization's row, then ask for the other's.
    const [first, second] = [await createOrg(h), await createOrg(h)];
    const app = express();
    app.post('/deadlock', (_req, res, next) => {
      let bothLocked!: () => void;
      const barrier = new Promise<void>((r) => (bothLocked = r));
      let locked = 0;
      const crossing = (mine: string, theirs: string) =>
        h.deps.prisma.$transaction(async (tx) => {
          await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${mine} FOR UPDATE`;
          if (++locked === 2) bothLocked();
          await barrier;
          await tx.$queryRaw`SELECT id FROM organizations WHERE id = ${theirs} FOR UPDATE`;
        }, { timeout: 15_000 });
      Promise.allSettled([crossing(first.id, second.id), crossing(second.id, first.id)]).then((outcomes) => {
        const failed = outcomes.find((o) => o.status === 'rejected');
        if (failed) next(failed.reason);
        else res.json({ ok: true });
      });
    });
    app.use(errorHandler(h.deps.logger));
    const res = await request(app).post('/deadlock');
    expectEnvelope(res, 409);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body.detail).toBe(COLLISION_DETAIL);
  });
});

describe('an idle database connection the server ends (a restart, a failover, a database dropped at shutdown)', () => {
  it("does not end the process: the pool drops it and the next query gets a new one", async () => {
    // An 'error' event without a listener throws: here it would fail the test; in the API or worker, end the process.
    const heard: string[] = [];
    const pool = createPgPool(h.config.databaseUrl, { max: 1, onIdleError: (err) => heard.push(err.message) });
    try {
      const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await h.deps.prisma.$queryRaw`SELECT pg_terminate_backend(${rows[0].pid}::int)`;
      // The pool lets go of the ended connection once its 'error' has been emitted (no listener of the test's own).
      for (let i = 0; pool.totalCount > 0 && i < 200; i += 1) await new Promise((r) => setTimeout(r, 10));
      expect(pool.totalCount).toBe(0);
      // Told once, for a log line (the API's and the worker's main pools log it as a warning).
      expect(heard).toEqual([expect.stringMatching(/terminating connection/)]);
      expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });
});

describe('a NUL character in a path id', () => {
  // PostgreSQL text cannot hold U+0000: such an id reached the database and answered 500 on these routes.
  it.each([
    ['get', '/api/v1/projects/%00'],
    ['patch', '/api/v1/projects/%00'],
    ['get', '/api/v1/assessments/%00'],
    ['post', '/api/v1/assessments/%00/cancel'],
    ['get', '/api/v1/teams/%00'],
    ['get', '/api/v1/teams/%00/members'],
    ['get', '/api/v1/projects/%00/access'],
    ['get', '/api/v1/assessments/%00/access'],
    ['patch', '/api/v1/members/%00'],
    ['delete', '/api/v1/members/%00'],
    ['delete', '/api/v1/invitations/%00'],
  ] as const)('%s %s answers 400 with the envelope and changes nothing', async (method, path) => {
    const before = await h.deps.prisma.membership.count({ where: { organizationId: org.id } });
    const body = method === 'patch' ? (path.includes('members') ? { role: 'member' } : { name: 'x' }) : undefined;
    const res = await request(h.app)[method](path).set(bearer(org.owner.token)).send(body);
    expectEnvelope(res, 400);
    expect(res.body.detail).toContain('NUL');
    expect(await h.deps.prisma.membership.count({ where: { organizationId: org.id } })).toBe(before);
  });
});

describe('a name with a line break or another control character', () => {
  // Names are shown in the dashboard, in mails (a key's name in "A new API key was created"), in CSV exports and in
  // the SIEM formats: a line break in one forged a line of its own there. A name is one line of printable text.
  it.each([
    ['post', '/api/v1/projects', 'Web\napp'],
    ['post', '/api/v1/teams', 'Red\rteam'],
    ['patch', '/api/v1/organization', 'Acme\u0007'],
    ['post', '/api/v1/api-keys', 'ci\r\nBcc: someone@example.test'],
    ['post', '/api/v1/projects', 'Tab\tseparated'],
    ['post', '/api/v1/projects', 'Line\u2028separator'],
    ['post', '/api/v1/projects', 'Escape \u001b[31mred'],
  ] as const)('%s %s with %j answers 400 with the envelope and changes nothing', async (method, path, name) => {
    const counts = () =>
      Promise.all([
        h.deps.prisma.project.count({ where: { organizationId: org.id } }),
        h.deps.prisma.team.count({ where: { organizationId: org.id } }),
        h.deps.prisma.apiKey.count({ where: { userId: org.owner.id } }),
        h.deps.prisma.organization.findUniqueOrThrow({ where: { id: org.id } }).then((o) => o.name),
      ]);
    const before = await counts();
    const body = path.endsWith('api-keys') ? { name, scopes: ['projects:read'] } : { name };
    const res = await request(h.app)[method](path).set(bearer(org.owner.token)).send(body);
    expectEnvelope(res, 400);
    expect(res.body.detail).toBe("Invalid body: 'name' must be one line of text, without control characters.");
    expect(await counts()).toEqual(before);
  });

  it('letters of any script, emoji and inner spaces stay welcome', async () => {
    const res = await request(h.app).post('/api/v1/projects').set(bearer(org.owner.token)).send({ name: 'Zürich 東京 — app 🚀' });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe('Zürich 東京 — app 🚀');
  });
});
