// Statements per request on the publish path (issue 8: the API's CPU goes to Prisma per statement, not to
// PostgreSQL). Counts what reaches PostgreSQL through the pg driver the Prisma adapter uses, for the engine route
// POST /assessments/{id}/findings with the API key's principal cached, and keeps the count from creeping back up.
import path from 'node:path';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, subscribe } from './support/domain';

// The very module instance @prisma/adapter-pg talks through (jest's registry is keyed by resolved path).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const pg = require(require.resolve('pg', { paths: [path.dirname(require.resolve('@prisma/adapter-pg'))] })) as typeof import('pg');

let h: Harness;
let org: TestOrg;
const seen: string[] = [];
const original = pg.Client.prototype.query;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
  pg.Client.prototype.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string };
    seen.push(typeof first === 'string' ? first : (first?.text ?? '?'));
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original;
});
afterAll(async () => {
  pg.Client.prototype.query = original;
  await h.close();
});

async function statementsOf(send: () => Promise<{ status: number }>, expectedStatus: number): Promise<string[]> {
  seen.length = 0;
  const res = await send();
  expect(res.status).toBe(expectedStatus);
  // last_used_at is written after the response, at most every 5 minutes: not part of the request.
  await new Promise((r) => setTimeout(r, 50));
  return seen.filter((s) => !/last_used_at/.test(s));
}

it('records a new finding and publishes it to a matching subscription in at most 2 statements (12 before issue 8)', async () => {
  const engine = await createKey(h, org.admin.token, ['assessments:update']);
  const project = await insertProject(h, org.id);
  const running = await insertAssessmentIn(h, org.id, project.id, 'running');
  await subscribe(h, org.admin.token, { org: true }, ['finding.created']);
  const record = (fingerprint: string) => () =>
    request(h.app)
      .post(`/api/v1/assessments/${running.id}/findings`)
      .set(bearer(engine))
      .send({ title: 'XSS', severity: 'high', fingerprint });
  // Warm: the key's principal is cached from the second use on.
  await record('warm-1')();
  await record('warm-2')();

  const created = await statementsOf(record('counted'), 201);
  if (process.env.SHOW_STATEMENTS) process.stderr.write(`${created.length} statements:\n${created.join('\n---\n')}\n`);
  expect(created.length).toBeLessThanOrEqual(2);

  const again = await statementsOf(record('counted'), 200);
  // A fingerprint already recorded: the same two, then the update in a transaction of its own (BEGIN, lock, read, update, COMMIT).
  expect(again.length).toBeLessThanOrEqual(7);
});
