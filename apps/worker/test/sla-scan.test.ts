// The worker's SLA breach scan (apps/worker/src/sla-scan.ts) against the pure rule of @svc/domain: exact event
// data and deliveries, agreement of the scan's SQL with the pure
// rule on a grid of cases, exactly-once publication with several scanners racing, and re-arming on reopen.
//
// The scan covers the whole database, which other test files share; so every finding here is opened in the 1990s
// and every scan runs at a 1990s `now`: findings of other tests (opened now) are never in breach at those times.
import { createPgPool, createPrismaClient, newId, scopedTo, type Finding } from '@svc/db';
import { outboxDeps, withOutbox } from '@svc/outbox';
import { scanSlaBreaches } from '../src/sla-scan';
import { FINDING_STATUSES, SEVERITIES } from '@svc/domain';
import request from 'supertest';
import { changeFindingStatus } from '../../api/src/modules/findings/findings.service';
import { DEFAULT_SLA_POLICY, findingSlaDueAt, type SlaPolicy } from '@svc/domain';
import { createHarness, type Harness } from '../../api/test/support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from '../../api/test/support/fixtures';
import { deliveriesOf, eventsOf, expectDelivered, insertAssessmentIn, insertFinding, subscribe } from '../../api/test/support/domain';

const DAY = 86400_000;
const at = (iso: string) => new Date(iso);

/** The pure rule's verdict, which the scan's SQL must match. */
const isInBreach = (f: { status: string; severity: string; openedAt: Date }, policy: SlaPolicy, now: Date) => {
  const due = findingSlaDueAt(f, policy);
  return due !== null && due.getTime() < now.getTime();
};

let h: Harness;
let org: TestOrg;
const scanDeps = () => ({ prisma: h.deps.prisma, deliveryQueue: h.deps.deliveryQueue, logger: h.deps.logger, maxAttempts: 8 });

// Deliveries published at a 1990s `now` look long overdue to any outbox relay (tests of the worker relay the whole
// database): they are removed after each test, once checked, so they never reach another test's worker.
const orgIds: string[] = [];
async function newOrg(): Promise<TestOrg> {
  const created = await createOrg(h);
  orgIds.push(created.id);
  return created;
}

beforeAll(async () => {
  h = await createHarness();
  org = await newOrg();
});
afterEach(async () => {
  await h.deps.prisma.webhookDelivery.deleteMany({ where: { organizationId: { in: orgIds } } });
});
afterAll(() => h.close());

async function setup(target: TestOrg = org) {
  const project = await insertProject(h, target.id);
  const assessment = await insertAssessmentIn(h, target.id, project.id, 'completed');
  return { project, assessment };
}

describe('scanSlaBreaches', () => {
  it('publishes finding.sla_breached once per breach, with the finding fields, sla_days and due_at', async () => {
    const { project, assessment } = await setup();
    const elsewhere = await insertProject(h, org.id);
    const orgSub = await subscribe(h, org.admin.token, { org: true }, ['finding.sla_breached']);
    const assessmentSub = await subscribe(h, org.admin.token, { assessmentId: assessment.id }, ['finding.sla_breached']);
    const otherProjectSub = await subscribe(h, org.admin.token, { projectId: elsewhere.id }, ['finding.sla_breached']);
    const createdOnly = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);

    const opened = at('1995-01-01T00:00:00.000Z');
    const crit = await insertFinding(h, assessment, { severity: 'critical', openedAt: opened, location: 'src/x.ts:9', status: 'confirmed' });
    const high = await insertFinding(h, assessment, { severity: 'high', openedAt: opened });
    const info = await insertFinding(h, assessment, { severity: 'info', openedAt: at('1990-01-01') });
    const dismissed = await insertFinding(h, assessment, { severity: 'critical', status: 'dismissed', openedAt: at('1990-01-01') });
    const reported = await insertFinding(h, assessment, { severity: 'critical', openedAt: at('1990-01-01'), slaBreachedAt: at('1990-01-09') });
    const mine = [crit, high, info, dismissed, reported];
    const eventsFor = async (f: Finding) => eventsOf(h, org.id, 'finding.sla_breached', { finding_id: f.id });

    // Exactly at the due instant nothing is late yet.
    await scanSlaBreaches(scanDeps(), at('1995-01-08T00:00:00.000Z'));
    expect(await eventsFor(crit)).toHaveLength(0);

    const now = at('1995-01-10T00:00:00.000Z');
    expect(await scanSlaBreaches(scanDeps(), now)).toBeGreaterThanOrEqual(1);
    const [event, ...more] = await eventsFor(crit);
    expect(more).toHaveLength(0);
    const data = {
      finding_id: crit.id,
      assessment_id: assessment.id,
      project_id: project.id,
      title: crit.title,
      severity: 'critical',
      status: 'confirmed',
      location: 'src/x.ts:9',
      fingerprint: crit.fingerprint,
      sla_days: 7,
      due_at: '1995-01-08T00:00:00.000Z',
    };
    expect(event.data).toEqual(data);
    for (const sub of [orgSub, assessmentSub]) await expectDelivered(h, org.id, event.id, sub, 'finding.sla_breached', data);
    const deliveries = await deliveriesOf(h, event.id);
    expect(deliveries.size).toBe(2);
    expect(deliveries.has(otherProjectSub)).toBe(false);
    expect(deliveries.has(createdOnly)).toBe(false);
    expect((deliveries.get(orgSub)!.payload as { created_at: string }).created_at).toBe(now.toISOString());
    for (const f of [high, info, dismissed, reported]) expect(await eventsFor(f)).toHaveLength(0);
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: crit.id } })).slaBreachedAt).toEqual(now);

    // Again at the same time, and later: nothing new for crit; high breaches after its 30 days.
    await scanSlaBreaches(scanDeps(), now);
    await scanSlaBreaches(scanDeps(), at('1995-02-01T00:00:00.000Z'));
    expect(await eventsFor(crit)).toHaveLength(1);
    expect((await eventsFor(high)).map((e) => e.data.due_at)).toEqual(['1995-01-31T00:00:00.000Z']);
    for (const f of [info, dismissed, reported]) expect(await eventsFor(f)).toHaveLength(0);
    expect(mine).toHaveLength(5);
  });

  it('publishes no breach in an organization while an erasure is under way there (erasing, or failed amid its free-text passes), and publishes it once the erasure completed', async () => {
    // The erasure's passes walk each table forward once: an event written behind its events pass kept the person's
    // name from the finding's title for good (review of the worker's jobs).
    const erased = await newOrg();
    const other = await newOrg();
    const opened = at('1995-01-01T00:00:00.000Z');
    const held = await insertFinding(h, (await setup(erased)).assessment, { severity: 'critical', openedAt: opened, title: 'Dana Doe (dana@example.test) left a key in the repo' });
    const free = await insertFinding(h, (await setup(other)).assessment, { severity: 'critical', openedAt: opened });
    const request = await h.deps.prisma.erasureRequest.create({
      data: {
        id: newId('era'), organizationId: erased.id, subjectEmailKey: 'a-key-of-dana', status: 'erasing',
        pseudonymName: 'Erased 1', pseudonymEmail: 'erased-1@erased.invalid', confirmedAt: opened,
      },
    });
    const now = at('1995-01-10T00:00:00.000Z');
    await scanSlaBreaches(scanDeps(), now);
    expect(await eventsOf(h, erased.id, 'finding.sla_breached', { finding_id: held.id })).toHaveLength(0);
    expect(await eventsOf(h, other.id, 'finding.sla_breached', { finding_id: free.id })).toHaveLength(1);

    const stoppedAt = (step: string) => ({ step, cursor: null, counts: {}, receipt: {} });
    await h.deps.prisma.erasureRequest.update({ where: { id: request.id }, data: { status: 'failed', progress: stoppedAt('free_text:events') } });
    await scanSlaBreaches(scanDeps(), now);
    expect(await eventsOf(h, erased.id, 'finding.sla_breached', { finding_id: held.id })).toHaveLength(0);
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: held.id } })).slaBreachedAt).toBeNull();

    await h.deps.prisma.erasureRequest.update({ where: { id: request.id }, data: { status: 'completed', completedAt: now } });
    await scanSlaBreaches(scanDeps(), now);
    expect(await eventsOf(h, erased.id, 'finding.sla_breached', { finding_id: held.id })).toHaveLength(1);
  });

  it('an erasure that failed before its free-text passes (the person owns the organization, say) holds nothing back', async () => {
    // Nothing can land behind a pass that has not run; holding would stop the organization's SLA events until a
    // retry that may not succeed for as long as the refusal stands.
    const target = await newOrg();
    const finding = await insertFinding(h, (await setup(target)).assessment, { severity: 'critical', openedAt: at('1994-01-01T00:00:00.000Z') });
    await h.deps.prisma.erasureRequest.create({
      data: {
        id: newId('era'), organizationId: target.id, subjectEmailKey: 'an-owner', status: 'failed', confirmedAt: at('1994-01-01'),
        pseudonymName: 'Erased 2', pseudonymEmail: 'erased-2@erased.invalid', progress: { step: 'membership', cursor: null, counts: {}, receipt: {} },
      },
    });
    await scanSlaBreaches(scanDeps(), at('1994-02-01T00:00:00.000Z'));
    expect(await eventsOf(h, target.id, 'finding.sla_breached', { finding_id: finding.id })).toHaveLength(1);
  });

  it('a scan out of budget leaves the breaches it did not reach to the next scan, which publishes each once', async () => {
    const target = await newOrg();
    const { assessment } = await setup(target);
    const opened = at('1993-03-01T00:00:00.000Z');
    const findings = [];
    for (let i = 0; i < 3; i += 1) findings.push(await insertFinding(h, assessment, { severity: 'critical', openedAt: opened }));
    const now = at('1993-04-01T00:00:00.000Z');
    expect(await scanSlaBreaches(scanDeps(), now, 0)).toBe(0);
    await scanSlaBreaches(scanDeps(), now);
    for (const f of findings) expect(await eventsOf(h, target.id, 'finding.sla_breached', { finding_id: f.id })).toHaveLength(1);
  });

  it('skips a finding another transaction holds locked instead of waiting for it, and publishes it once free', async () => {
    // Waiting up to the transaction timeout on each of a few locked rows at the front of the queue spent the scan's
    // budget run after run, and newer breaches everywhere waited.
    const target = await newOrg();
    const { assessment } = await setup(target);
    const locked = await insertFinding(h, assessment, { severity: 'critical', openedAt: at('1992-01-01T00:00:00.000Z') });
    const newer = await insertFinding(h, assessment, { severity: 'critical', openedAt: at('1992-01-02T00:00:00.000Z') });
    const holder = createPgPool(h.config.databaseUrl, { max: 1 });
    const client = await holder.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT id FROM findings WHERE id = $1 FOR UPDATE', [locked.id]);
      const started = Date.now();
      await scanSlaBreaches(scanDeps(), at('1992-03-01T00:00:00.000Z'));
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(await eventsOf(h, target.id, 'finding.sla_breached', { finding_id: newer.id })).toHaveLength(1);
      expect(await eventsOf(h, target.id, 'finding.sla_breached', { finding_id: locked.id })).toHaveLength(0);
    } finally {
      await client.query('ROLLBACK');
      client.release();
      await holder.end();
    }
    await scanSlaBreaches(scanDeps(), at('1992-03-01T00:00:00.000Z'));
    expect(await eventsOf(h, target.id, 'finding.sla_breached', { finding_id: locked.id })).toHaveLength(1);
  });

  it('agrees with the pure rule on every severity, status and policy around the due instant', async () => {
    const custom: SlaPolicy = { critical: 1, high: 2, medium: null, low: 5, info: 3 };
    const orgs: Array<[TestOrg, SlaPolicy]> = [[await newOrg(), custom], [await newOrg(), DEFAULT_SLA_POLICY]];
    await request(h.app).put('/api/v1/governance/sla').set(bearer(orgs[0][0].admin.token)).send(custom).expect(200);
    const now = at('1996-06-01T00:00:00.000Z');
    const rows: Array<{ id: string; status: string; severity: string; openedAt: Date; policy: SlaPolicy }> = [];
    for (const [o, policy] of orgs) {
      const { assessment } = await setup(o);
      const data = [];
      for (const severity of SEVERITIES) {
        const days = policy[severity] ?? 4;
        const offsets = [-1, 0, 1, -10 * DAY, 10 * DAY]; // due - now
        for (const status of FINDING_STATUSES) {
          for (const offset of offsets) {
            const openedAt = new Date(now.getTime() + offset - days * DAY);
            const id = newId('fnd');
            rows.push({ id, status, severity, openedAt, policy });
            data.push({
              id, organizationId: o.id, projectId: assessment.projectId, assessmentId: assessment.id,
              fingerprint: id, title: 'grid', severity, originalSeverity: severity, status, openedAt,
            });
          }
        }
      }
      await h.deps.prisma.finding.createMany({ data });
    }
    await scanSlaBreaches(scanDeps(), now);
    const marked = await h.deps.prisma.finding.findMany({ where: { id: { in: rows.map((r) => r.id) } }, select: { id: true, slaBreachedAt: true } });
    const breachedByScan = new Set(marked.filter((m) => m.slaBreachedAt !== null).map((m) => m.id));
    const breachedByRule = new Set(rows.filter((r) => isInBreach(r, r.policy, now)).map((r) => r.id));
    expect(breachedByRule.size).toBeGreaterThan(20);
    expect([...breachedByScan].sort()).toEqual([...breachedByRule].sort());
  });

  it('publishes exactly once when several workers scan at the same time', async () => {
    const { assessment } = await setup();
    const sub = await subscribe(h, org.admin.token, { assessmentId: assessment.id }, ['finding.sla_breached']);
    const findings = await Promise.all(
      Array.from({ length: 40 }, (_, i) => insertFinding(h, assessment, { severity: SEVERITIES[i % 4], openedAt: at('1990-01-01') })),
    );
    // Separate connection pools, as separate worker processes would have.
    const clients = [createPrismaClient(h.config.databaseUrl, { max: 4 }), createPrismaClient(h.config.databaseUrl, { max: 4 }), h.deps.prisma];
    try {
      const now = at('1997-01-01T00:00:00.000Z');
      const counts = await Promise.all(clients.map((prisma) => scanSlaBreaches({ ...scanDeps(), prisma }, now)));
      // Every claim marks its finding with this `now`: the scanners' counts add up to exactly the marked findings
      // (earlier tests' findings still open in 1997 are claimed too, so more than these 40 may be marked).
      const marked = await h.deps.prisma.finding.count({ where: { slaBreachedAt: now } });
      expect(counts.reduce((a, b) => a + b, 0)).toBe(marked);
      expect(marked).toBeGreaterThanOrEqual(40);
      expect(counts.filter((c) => c > 0).length).toBeGreaterThanOrEqual(1);
      for (const f of findings) {
        const events = await eventsOf(h, org.id, 'finding.sla_breached', { finding_id: f.id });
        expect(events).toHaveLength(1);
        expect((await deliveriesOf(h, events[0].id)).has(sub)).toBe(true);
      }
      // A second round finds nothing left to publish.
      expect(await Promise.all(clients.map((prisma) => scanSlaBreaches({ ...scanDeps(), prisma }, now)))).toEqual([0, 0, 0]);
    } finally {
      await Promise.all(clients.slice(0, 2).map((c) => c.$disconnect()));
    }
  });

  it('reopening (regression) clears the breach mark and restarts the window, so a new breach is published', async () => {
    const { assessment } = await setup();
    const f = await insertFinding(h, assessment, { severity: 'critical', openedAt: at('1998-01-01T00:00:00.000Z') });
    await scanSlaBreaches(scanDeps(), at('1998-01-20T00:00:00.000Z'));
    expect(await eventsOf(h, org.id, 'finding.sla_breached', { finding_id: f.id })).toHaveLength(1);

    const fixedAt = at('1998-02-01T00:00:00.000Z');
    const reopenedAt = at('1998-03-01T00:00:00.000Z');
    let row = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: f.id } });
    row = await withOutbox(outboxDeps(h.deps, h.deps.deliveryQueue), (tx, publish) => changeFindingStatus(scopedTo(tx, row), publish, row, 'fixed', fixedAt));
    await scanSlaBreaches(scanDeps(), at('1998-02-20T00:00:00.000Z'));
    row = await withOutbox(outboxDeps(h.deps, h.deps.deliveryQueue), (tx, publish) => changeFindingStatus(scopedTo(tx, row), publish, row, 'regressed', reopenedAt));
    expect(row).toMatchObject({ status: 'regressed', slaBreachedAt: null, openedAt: reopenedAt });

    await scanSlaBreaches(scanDeps(), at('1998-03-08T00:00:00.000Z')); // exactly due: not yet
    expect(await eventsOf(h, org.id, 'finding.sla_breached', { finding_id: f.id })).toHaveLength(1);
    await scanSlaBreaches(scanDeps(), at('1998-03-09T00:00:00.000Z'));
    const events = await eventsOf(h, org.id, 'finding.sla_breached', { finding_id: f.id });
    expect(events.map((e) => [e.data.status, e.data.due_at])).toEqual([
      ['open', '1998-01-08T00:00:00.000Z'],
      ['regressed', '1998-03-08T00:00:00.000Z'],
    ]);
  });

  it('follows the policy: no window, no breach; a subscription status_filter applies', async () => {
    const fresh = await newOrg();
    const { assessment } = await setup(fresh);
    const confirmedOnly = await subscribe(h, fresh.admin.token, { org: true }, ['finding.sla_breached'], { status_filter: ['confirmed'] });
    const info = await insertFinding(h, assessment, { severity: 'info', openedAt: at('1999-01-01') });
    const open = await insertFinding(h, assessment, { severity: 'low', openedAt: at('1999-01-01') });
    const confirmed = await insertFinding(h, assessment, { severity: 'low', status: 'confirmed', openedAt: at('1999-01-01') });
    await scanSlaBreaches(scanDeps(), at('1999-12-31T00:00:00.000Z'));
    expect(await eventsOf(h, fresh.id, 'finding.sla_breached', { finding_id: info.id })).toHaveLength(0);
    const [openEvent] = await eventsOf(h, fresh.id, 'finding.sla_breached', { finding_id: open.id });
    const [confirmedEvent] = await eventsOf(h, fresh.id, 'finding.sla_breached', { finding_id: confirmed.id });
    expect((await deliveriesOf(h, openEvent.id)).has(confirmedOnly)).toBe(false);
    expect((await deliveriesOf(h, confirmedEvent.id)).has(confirmedOnly)).toBe(true);

    await request(h.app).put('/api/v1/governance/sla').set(bearer(fresh.admin.token))
      .send({ critical: 7, high: 30, medium: 90, low: 180, info: 30 }).expect(200);
    await scanSlaBreaches(scanDeps(), at('1999-12-31T00:00:00.000Z'));
    expect((await eventsOf(h, fresh.id, 'finding.sla_breached', { finding_id: info.id })).map((e) => e.data.sla_days)).toEqual([30]);
  });
});
