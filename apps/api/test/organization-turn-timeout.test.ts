// A write that waits WRITE_TURN_TIMEOUT_MS for its organization's turn (http/organization-turns.ts) answers 503 with
// Retry-After and changes nothing, rather than an answer given minutes later that its client may no longer wait for.
import { Client } from 'pg';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import type { OrganizationTurns } from '../src/http/organization-turns';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  // ORGANIZATION_WRITES_IN_FLIGHT 2 (half the pool of 4); a turn is waited for 1 s at most.
  h = await createHarness({ DATABASE_POOL_SIZE: '4', WRITE_TURN_TIMEOUT_MS: '1000' });
  org = await createOrg(h);
});
afterAll(() => h.close());

it("answers 503 with Retry-After to a write whose turn did not come within WRITE_TURN_TIMEOUT_MS: nothing is created, and the same Idempotency-Key goes through later", async () => {
  const project = await insertProject(h, org.id);
  const turns = h.app.locals.organizationTurns as OrganizationTurns;
  const holder = new Client({ connectionString: h.config.databaseUrl });
  await holder.connect();
  const name = `waited too long ${Date.now()}`;
  const create = () => request(h.app).post('/api/v1/projects').set({ ...bearer(org.owner.token), 'Idempotency-Key': `turn-${name}` }).send({ name });
  try {
    // As the project's deletion holds it: the organization's two turns wait behind it, in their transactions.
    await holder.query('BEGIN');
    await holder.query('SELECT id FROM projects WHERE id = $1 FOR UPDATE', [project.id]);
    const edits = [0, 1].map((i) => request(h.app).patch(`/api/v1/projects/${project.id}`).set(bearer(org.owner.token)).send({ name: `edit ${i}` }).then((r) => r.status));
    for (let waited = 0; turns.load(org.id).running < 2; waited += 20) {
      if (waited > 15_000) throw new Error(`the edits never took both turns: ${JSON.stringify(turns.load(org.id))}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const refused = await create();
    const whileHeld = { status: refused.status, retryAfter: refused.headers['retry-after'], body: Object.keys(refused.body), load: turns.load(org.id) };
    await holder.query('ROLLBACK');
    expect({ whileHeld, edits: await Promise.all(edits) }).toEqual({
      whileHeld: { status: 503, retryAfter: '5', body: ['detail'], load: { running: 2, waiting: 0 } },
      edits: [200, 200],
    });
    expect(refused.body.detail).toMatch(/nothing was changed/);
    expect(await h.deps.prisma.project.count({ where: { organizationId: org.id, name } })).toBe(0);
    // The 503 was not kept as the key's answer: the retry creates the project, once.
    expect((await create()).status).toBe(201);
    expect((await create()).status).toBe(201);
    expect(await h.deps.prisma.project.count({ where: { organizationId: org.id, name } })).toBe(1);
  } finally {
    await holder.end();
  }
}, 40_000);
