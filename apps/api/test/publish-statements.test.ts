// Statements per request on the publish path (issue 8: the API's CPU goes to Prisma per statement, not to
// PostgreSQL). Counts what reaches PostgreSQL through the pg driver the Prisma adapter uses, for the engine route
// POST /assessments/{id}/findings with the API key's principal cached, and keeps the count from creeping back up.
// Concurrent publishes share the same two statements (one per batch): a batch mixing organizations answers each alone.
import path from 'node:path';
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { createKey, deliveriesOf, eventsOf, insertAssessmentIn, subscribe } from './support/domain';
import type { Role } from '@svc/scopes';
import type { Principal } from '../src/auth/principal';
import { recordFinding } from '../src/modules/findings/findings.service';

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

describe('concurrent publishes share the two statements, each with its own answer', () => {
  const principalOf = (organizationId: string, user: { id: string; role: Role }): Principal => ({
    kind: 'api_key',
    userId: user.id,
    organizationId,
    role: user.role,
    scopes: new Set(['assessments:update']),
  });
  const input = (fingerprint: string, title = 'XSS') => ({ title, severity: 'high', fingerprint });
  const outcome = (p: Promise<{ created: boolean }>) =>
    p.then(
      (r) => (r.created ? 'created' : 'updated'),
      (err: { status?: number }) => err.status ?? 'error',
    );

  it('a batch mixing two organizations reads and writes each request in its own organization only', async () => {
    const other = await createOrg(h);
    const projectA = await insertProject(h, org.id);
    const projectB = await insertProject(h, other.id);
    const runningA = await insertAssessmentIn(h, org.id, projectA.id, 'running');
    const completedA = await insertAssessmentIn(h, org.id, projectA.id, 'completed');
    const runningB = await insertAssessmentIn(h, other.id, projectB.id, 'running');
    const subA = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);
    const subB = await subscribe(h, other.admin.token, { org: true }, ['finding.created']);
    const adminA = principalOf(org.id, org.admin);
    const adminB = principalOf(other.id, other.admin);

    seen.length = 0;
    // Started in one tick: they go to the access statement together, and those that pass to the insert together.
    const answers = await Promise.all([
      outcome(recordFinding(h.deps, adminA, runningA.id, input('mixed-a'))),
      outcome(recordFinding(h.deps, adminB, runningA.id, input('mixed-b-on-a'))), // another organization's assessment
      outcome(recordFinding(h.deps, adminB, runningB.id, input('mixed-b'))),
      outcome(recordFinding(h.deps, adminA, completedA.id, input('mixed-done'))), // not running
      outcome(recordFinding(h.deps, principalOf(org.id, org.member), runningA.id, input('mixed-member'))), // no grant
      outcome(recordFinding(h.deps, adminA, runningB.id, input('mixed-a-on-b'))),
    ]);
    expect(answers).toEqual(['created', 404, 'created', 409, 404, 404]);
    expect(seen.filter((s) => !/last_used_at/.test(s))).toHaveLength(2);

    const findings = await h.deps.prisma.finding.findMany({ where: { fingerprint: { startsWith: 'mixed-' } } });
    expect(findings.map((f) => [f.fingerprint, f.organizationId, f.assessmentId]).sort()).toEqual(
      [
        ['mixed-a', org.id, runningA.id],
        ['mixed-b', other.id, runningB.id],
      ].sort(),
    );
    for (const [owner, subscription, foreign] of [
      [org.id, subA, subB],
      [other.id, subB, subA],
    ]) {
      const events = await eventsOf(h, owner, 'finding.created', { fingerprint: owner === org.id ? 'mixed-a' : 'mixed-b' });
      expect(events).toHaveLength(1);
      const deliveries = await deliveriesOf(h, events[0].id);
      expect(deliveries.has(subscription)).toBe(true);
      expect(deliveries.has(foreign)).toBe(false);
      expect([...deliveries.values()].every((d) => d.organizationId === owner)).toBe(true);
    }
  });

  it("one request's unusable assessment id answers 404 alone: another organization's publish in the same tick is created", async () => {
    const other = await createOrg(h);
    const projectB = await insertProject(h, other.id);
    const runningB = await insertAssessmentIn(h, other.id, projectB.id, 'running');
    const answers = await Promise.all([
      outcome(recordFinding(h.deps, principalOf(org.id, org.admin), 'asm_\u0000', input('nul-id'))),
      outcome(recordFinding(h.deps, principalOf(other.id, other.admin), runningB.id, input('beside-nul-id'))),
    ]);
    expect(answers).toEqual([404, 'created']);
  });

  it("a lock another organization's transaction holds delays only that organization's publish, not its batch-mates'", async () => {
    const other = await createOrg(h);
    const projectA = await insertProject(h, org.id);
    const projectB = await insertProject(h, other.id);
    const runningA = await insertAssessmentIn(h, org.id, projectA.id, 'running');
    const runningB = await insertAssessmentIn(h, other.id, projectB.id, 'running');
    const subscriptionA = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);
    const sleep = (ms: number) => new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), ms));
    // Organization A's own transactions: one updating its assessment, one serialising on its organization row (a
    // source upload, a subscription's creation), one on its subscription (a recovery of failed deliveries, the
    // worker recording an attempt). Each holds its lock until released.
    for (const lock of [
      (tx: typeof h.deps.prisma) => tx.$queryRaw`SELECT id FROM assessments WHERE id = ${runningA.id} FOR UPDATE`,
      (tx: typeof h.deps.prisma) => tx.$queryRaw`SELECT id FROM organizations WHERE id = ${org.id} FOR UPDATE`,
      (tx: typeof h.deps.prisma) => tx.$queryRaw`SELECT id FROM webhook_subscriptions WHERE id = ${subscriptionA} FOR UPDATE`,
    ]) {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let locked!: () => void;
      const taken = new Promise<void>((resolve) => (locked = resolve));
      const holder = h.deps.prisma.$transaction(
        async (tx) => {
          await lock(tx as unknown as typeof h.deps.prisma);
          locked();
          await held;
        },
        { timeout: 20_000 },
      );
      await taken;
      const fingerprint = `locked-${seen.length}-${Math.random()}`;
      const a = outcome(recordFinding(h.deps, principalOf(org.id, org.admin), runningA.id, input(`${fingerprint}-a`)));
      const b = outcome(recordFinding(h.deps, principalOf(other.id, other.admin), runningB.id, input(`${fingerprint}-b`)));
      const later = outcome(recordFinding(h.deps, principalOf(other.id, other.admin), runningB.id, input(`${fingerprint}-later`)));
      const first = await Promise.race([Promise.all([b, later]), sleep(2_000)]);
      release();
      await holder;
      expect(first).toEqual(['created', 'created']);
      expect(await a).toBe('created');
    }
  });

  it('of two reports of one fingerprint in a batch exactly one creates; a finding that fails the batch fails alone', async () => {
    const project = await insertProject(h, org.id);
    const running = await insertAssessmentIn(h, org.id, project.id, 'running');
    const admin = principalOf(org.id, org.admin);
    const answers = await Promise.all([
      outcome(recordFinding(h.deps, admin, running.id, input('twice'))),
      outcome(recordFinding(h.deps, admin, running.id, input('twice'))),
      // PostgreSQL refuses a NUL in text: the batch's statement fails, and each finding is written again alone.
      outcome(recordFinding(h.deps, admin, running.id, input('nul', 'bad\u0000title'))),
      outcome(recordFinding(h.deps, admin, running.id, input('fine'))),
    ]);
    expect(answers.slice(0, 2).sort()).toEqual(['created', 'updated']);
    expect(answers[2]).toBe('error');
    expect(answers[3]).toBe('created');
    const rows = await h.deps.prisma.finding.findMany({ where: { assessmentId: running.id }, orderBy: { fingerprint: 'asc' } });
    expect(rows.map((f) => f.fingerprint)).toEqual(['fine', 'twice']);
    expect(await eventsOf(h, org.id, 'finding.created', { fingerprint: 'twice' })).toHaveLength(1);
    expect(await eventsOf(h, org.id, 'finding.created', { fingerprint: 'nul' })).toHaveLength(0);
  });
});
