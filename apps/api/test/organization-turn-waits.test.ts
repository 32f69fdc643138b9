// How a write leaves the line for its organization's turn (http/organization-turns.ts) without running: it waited
// WRITE_TURN_TIMEOUT_MS (503 with Retry-After, rather than an answer given minutes later that its client may no longer
// wait for), or its client went away.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import type { OrganizationTurns } from '../src/http/organization-turns';

// ORGANIZATION_WRITES_IN_FLIGHT 2 (half the pool of 4).
const POOL_OF_4 = { DATABASE_POOL_SIZE: '4' };

/** Holds the project's row (as its deletion would) until `meanwhile` ends, the organization's two turns waiting behind it. */
async function withBothTurnsWaiting<T>(h: Harness, org: TestOrg, meanwhile: (turns: OrganizationTurns) => Promise<T>): Promise<{ meanwhile: T; edits: number[] }> {
  const project = await insertProject(h, org.id);
  const turns = h.app.locals.organizationTurns as OrganizationTurns;
  const holder = new Client({ connectionString: h.config.databaseUrl });
  await holder.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM projects WHERE id = $1 FOR UPDATE', [project.id]);
    const edits = [0, 1].map((i) => request(h.app).patch(`/api/v1/projects/${project.id}`).set(bearer(org.owner.token)).send({ name: `edit ${i}` }).then((r) => r.status));
    await until(() => turns.load(org.id).running === 2, () => `the edits never took both turns: ${JSON.stringify(turns.load(org.id))}`);
    const result = await meanwhile(turns);
    await holder.query('ROLLBACK');
    return { meanwhile: result, edits: await Promise.all(edits) };
  } finally {
    await holder.end();
  }
}

/** The API's metrics of write turns, as a Prometheus scrape shows them. */
async function turnMetrics(h: Harness): Promise<Record<string, number>> {
  const text = (await request(h.app).get('/metrics')).text;
  const lines = text.split('\n').filter((l) => /^svc_write_turns(_left_total)?\{/.test(l));
  return Object.fromEntries(lines.map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]));
}

async function until(done: () => boolean, failure: () => string): Promise<void> {
  for (let waited = 0; !done(); waited += 20) {
    if (waited > 15_000) throw new Error(failure());
    await new Promise((r) => setTimeout(r, 20));
  }
}

it("answers 503 with Retry-After to a write whose turn did not come within WRITE_TURN_TIMEOUT_MS: nothing is created, and the same Idempotency-Key goes through later", async () => {
  const h = await createHarness({ ...POOL_OF_4, WRITE_TURN_TIMEOUT_MS: '2000' });
  try {
    await refusedAfterTwoSeconds(h, await createOrg(h));
  } finally {
    await h.close();
  }
}, 40_000);

async function refusedAfterTwoSeconds(h: Harness, org: TestOrg) {
  const name = `waited too long ${Date.now()}`;
  const create = () => request(h.app).post('/api/v1/projects').set({ ...bearer(org.owner.token), 'Idempotency-Key': `turn-${name}` }).send({ name });
  const result = await withBothTurnsWaiting(h, org, async (turns) => {
    const refusing = create().then((r) => r);
    await until(() => turns.load(org.id).waiting === 1, () => `the creation never waited for a turn: ${JSON.stringify(turns.load(org.id))}`);
    const whileWaiting = await turnMetrics(h);
    const refused = await refusing;
    return { status: refused.status, retryAfter: refused.headers['retry-after'], body: refused.body, load: turns.load(org.id), whileWaiting };
  });
  expect(result).toEqual({
    meanwhile: {
      status: 503, retryAfter: '5', body: { detail: expect.stringMatching(/nothing was changed/) }, load: { running: 2, waiting: 0 },
      // What an operator sees meanwhile: two writes in their turns, one waiting for its own.
      whileWaiting: { 'svc_write_turns{state="running"}': 2, 'svc_write_turns{state="waiting"}': 1 },
    },
    edits: [200, 200],
  });
  expect(await turnMetrics(h)).toEqual({
    'svc_write_turns{state="running"}': 0,
    'svc_write_turns{state="waiting"}': 0,
    'svc_write_turns_left_total{reason="timeout"}': 1,
  });
  expect(await h.deps.prisma.project.count({ where: { organizationId: org.id, name } })).toBe(0);
  // The 503 was not kept as the key's answer: the retry creates the project, once.
  expect((await create()).status).toBe(201);
  expect((await create()).status).toBe(201);
  expect(await h.deps.prisma.project.count({ where: { organizationId: org.id, name } })).toBe(1);
}

it('drops a write whose client went away while it waited for its turn: it never runs, even once turns free, and its Idempotency-Key stays free for the retry', async () => {
  // WRITE_TURN_TIMEOUT_MS as by default (30 s): the write leaves the line because its client went, not for the wait.
  const h = await createHarness(POOL_OF_4);
  const org = await createOrg(h);
  const server = h.app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const name = `abandoned ${Date.now()}`;
  try {
    const result = await withBothTurnsWaiting(h, org, async (turns) => {
      const body = JSON.stringify({ name });
      const sent = http.request({
        host: '127.0.0.1',
        port: (server.address() as AddressInfo).port,
        method: 'POST',
        path: '/api/v1/projects',
        headers: { ...bearer(org.owner.token), 'Idempotency-Key': `turn-${name}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      });
      sent.on('error', () => undefined);
      sent.end(body);
      await until(() => turns.load(org.id).waiting === 1, () => `the creation never waited for a turn: ${JSON.stringify(turns.load(org.id))}`);
      sent.destroy();
      await until(() => turns.load(org.id).waiting === 0, () => `the abandoned creation still waits: ${JSON.stringify(turns.load(org.id))}`);
      return turns.load(org.id);
    });
    expect(result).toEqual({ meanwhile: { running: 2, waiting: 0 }, edits: [200, 200] });
    expect((await turnMetrics(h))['svc_write_turns_left_total{reason="client_gone"}']).toBe(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(await h.deps.prisma.project.count({ where: { organizationId: org.id, name } })).toBe(0);
    // Its Idempotency-Key was not kept with an answer nobody read: the client's retry creates the project.
    const retry = await request(h.app).post('/api/v1/projects').set({ ...bearer(org.owner.token), 'Idempotency-Key': `turn-${name}` }).send({ name });
    expect(retry.status).toBe(201);
    expect(await h.deps.prisma.project.count({ where: { organizationId: org.id, name } })).toBe(1);
  } finally {
    await new Promise((r) => server.close(r));
    await h.close();
  }
}, 40_000);
