// The assessment lifecycle through the HTTP API: people launch, edit, cancel, emergency-stop, archive and delete;
// the engine (an API key with assessments:update) starts, records findings, completes or fails.
// Checks per route: the happy path, 403 naming the scope, cross-organization 404, 409 naming the current state,
// 400 for bad bodies, and the assessment.completed event with its deliveries.
import pg from 'pg';
import request from 'supertest';
import { organizationOf, pgFields } from '@svc/db';
import * as spendGuard from '../src/modules/spend/spend-guard';
import { badRequest } from '../src/http/errors';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey, eventsOf, expectDelivered, deliveriesOf, insertAssessmentIn, insertFinding, subscribe } from './support/domain';
import { untilBlockedBy } from './support/row-locks';

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let engine: string; // API key value with assessments:update (+ read)

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  engine = await createKey(h, org.admin.token, ['assessments:update', 'assessments:read']);
});
afterAll(() => h.close());

const api = () => request(h.app);
const post = (path: string, token: string, body?: object) => {
  const r = api().post(`/api/v1${path}`).set(bearer(token));
  return body === undefined ? r : r.send(body);
};

async function draft(projectId?: string) {
  const p = projectId ?? (await insertProject(h, org.id)).id;
  const res = await post(`/projects/${p}/assessments`, org.admin.token, { name: 'Pentest', settings: { depth: 2 } });
  expect(res.status).toBe(201);
  return res.body as { id: string; project_id: string };
}

async function inState(status: string, extra: Record<string, unknown> = {}) {
  const p = await insertProject(h, org.id);
  return insertAssessmentIn(h, org.id, p.id, status, extra);
}

describe('the whole lifecycle', () => {
  it('draft -> queued -> running -> completed, publishing assessment.completed to the matching subscriptions only', async () => {
    const project = await insertProject(h, org.id);
    const elsewhere = await insertProject(h, org.id);
    const a = await draft(project.id);
    const orgSub = await subscribe(h, org.admin.token, { org: true }, ['assessment.completed']);
    const projectSub = await subscribe(h, org.admin.token, { projectId: project.id }, ['assessment.completed']);
    const assessmentSub = await subscribe(h, org.admin.token, { assessmentId: a.id }, ['assessment.completed']);
    const otherProjectSub = await subscribe(h, org.admin.token, { projectId: elsewhere.id }, ['assessment.completed']);
    const notListening = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);

    const patched = await api().patch(`/api/v1/assessments/${a.id}`).set(bearer(org.admin.token))
      .send({ name: 'Pentest Q3', description: 'external scope', notes: 'kick-off done', settings: { depth: 3 } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Pentest Q3', description: 'external scope', notes: 'kick-off done', settings: { depth: 3 } });

    const launched = await post(`/assessments/${a.id}/launch`, org.admin.token);
    expect(launched.status).toBe(200);
    expect(launched.body).toMatchObject({ status: 'queued', queued_at: expect.any(String), started_at: null });

    const started = await post(`/assessments/${a.id}/start`, engine);
    expect(started.status).toBe(200);
    expect(started.body).toMatchObject({ status: 'running', started_at: expect.any(String) });

    for (const [fingerprint, severity] of [['fp-1', 'critical'], ['fp-2', 'high'], ['fp-3', 'high'], ['fp-4', 'info']]) {
      const res = await post(`/assessments/${a.id}/findings`, engine, { title: `Issue ${fingerprint}`, severity, fingerprint, location: 'src/a.ts:1' });
      expect(res.status).toBe(201);
    }

    const completed = await post(`/assessments/${a.id}/complete`, engine, { summary: { text: 'Done', coverage: 0.9 } });
    expect(completed.status).toBe(200);
    expect(completed.body).toMatchObject({
      status: 'completed', summary: { text: 'Done', coverage: 0.9 }, failure_reason: null, finished_at: expect.any(String), archived: false,
    });

    const [event, ...more] = await eventsOf(h, org.id, 'assessment.completed', { assessment_id: a.id });
    expect(more).toHaveLength(0);
    const data = {
      assessment_id: a.id,
      project_id: project.id,
      name: 'Pentest Q3',
      status: 'completed',
      findings_count: 4,
      findings_by_severity: { critical: 1, high: 2, medium: 0, low: 0, info: 1 },
      started_at: started.body.started_at,
      completed_at: completed.body.finished_at,
    };
    expect(event.data).toEqual(data);
    for (const sub of [orgSub, projectSub, assessmentSub]) await expectDelivered(h, org.id, event.id, sub, 'assessment.completed', data);
    const deliveries = await deliveriesOf(h, event.id);
    expect(deliveries.size).toBe(3);
    expect(deliveries.has(otherProjectSub)).toBe(false);
    expect(deliveries.has(notListening)).toBe(false);
    // One BullMQ job per delivery, enqueued after commit.
    for (const id of [...deliveries.values()].map((d) => d.id)) expect((await h.deps.deliveryQueue.getJob(id))?.data).toEqual({ deliveryId: id });
    // The summary stays out of the event.
    expect(JSON.stringify(event.data)).not.toContain('coverage');
  });

  it('fail: running -> failed with its reason, and no event', async () => {
    const a = await inState('running');
    const res = await post(`/assessments/${a.id}/fail`, engine, { reason: 'target unreachable' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', failure_reason: 'target unreachable', summary: null, finished_at: expect.any(String) });
    expect(await eventsOf(h, org.id, 'assessment.completed', { assessment_id: a.id })).toHaveLength(0);
  });

  it.each([
    ['cancel', 'queued', 'cancelled'],
    ['cancel', 'running', 'cancelled'],
    ['emergency-stop', 'queued', 'emergency_stopped'],
    ['emergency-stop', 'running', 'emergency_stopped'],
  ])('%s: %s -> %s', async (action, from, to) => {
    const a = await inState(from);
    const res = await post(`/assessments/${a.id}/${action}`, org.manager.token);
    // The manager has the scope but no grant: the assessment is invisible to them.
    expect(res.status).toBe(404);
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.manager.id }, 'write');
    const ok = await post(`/assessments/${a.id}/${action}`, org.manager.token);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ status: to, finished_at: expect.any(String) });
  });
});

describe('impossible transitions answer 409 naming the current state', () => {
  const cases: Array<[string, string, object | undefined]> = [
    ['launch', 'queued', undefined],
    ['launch', 'completed', undefined],
    ['start', 'draft', undefined],
    ['start', 'running', undefined],
    ['complete', 'queued', { summary: 'x' }],
    ['complete', 'completed', { summary: 'x' }],
    ['fail', 'draft', { reason: 'x' }],
    ['fail', 'cancelled', { reason: 'x' }],
    ['cancel', 'draft', undefined],
    ['cancel', 'completed', undefined],
    ['emergency-stop', 'failed', undefined],
    ['emergency-stop', 'emergency_stopped', undefined],
    ['archive', 'running', undefined],
    ['archive', 'draft', undefined],
    ['unarchive', 'completed', undefined],
  ];
  it.each(cases)('%s from %s', async (action, status, body) => {
    const a = await inState(status);
    const res = await post(`/assessments/${a.id}/${action}`, org.admin.token, body);
    expect(res.status).toBe(409);
    expect(res.body.detail).toContain(status);
    expect((await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: a.id } })).status).toBe(status);
  });

  it('two concurrent launches: one wins, the other gets 409', async () => {
    const a = await draft();
    const results = await Promise.all([1, 2, 3].map(() => post(`/assessments/${a.id}/launch`, org.admin.token)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409]);
  });

  it('recording a finding outside running is 409', async () => {
    for (const status of ['draft', 'queued', 'completed', 'cancelled']) {
      const a = await inState(status);
      const res = await post(`/assessments/${a.id}/findings`, engine, { title: 't', severity: 'low', fingerprint: 'f' });
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain(status);
    }
  });
});

describe('PATCH /assessments/{id}', () => {
  it('changes name, description and settings only on a draft; notes at any time', async () => {
    const a = await inState('running');
    const url = `/api/v1/assessments/${a.id}`;
    for (const body of [{ name: 'x' }, { settings: { depth: 1 } }, { description: 'y' }, { notes: 'n', name: 'x' }]) {
      const res = await api().patch(url).set(bearer(org.admin.token)).send(body);
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain('running');
    }
    const notes = await api().patch(url).set(bearer(org.admin.token)).send({ notes: 'engine slow today' });
    expect(notes.status).toBe(200);
    expect(notes.body.notes).toBe('engine slow today');
    const cleared = await api().patch(url).set(bearer(org.admin.token)).send({ notes: null });
    expect(cleared.body.notes).toBeNull();
  });

  it('clears settings with null and validates the body (400)', async () => {
    const a = await draft();
    const url = `/api/v1/assessments/${a.id}`;
    expect((await api().patch(url).set(bearer(org.admin.token)).send({ settings: null })).body.settings).toBeNull();
    for (const body of [{}, { status: 'running' }, { settings: 'deep' }, { settings: [1] }, { name: '' }, { notes: 5 }]) {
      expect((await api().patch(url).set(bearer(org.admin.token)).send(body)).status).toBe(400);
    }
  });

  it('lets the engine key (assessments:update) write notes', async () => {
    const a = await inState('running');
    const res = await api().patch(`/api/v1/assessments/${a.id}`).set(bearer(engine)).send({ notes: 'phase 2' });
    expect(res.status).toBe(200);
  });
});

describe('archive, unarchive, delete', () => {
  it('archives and unarchives finished assessments; lists filter on archived', async () => {
    for (const status of ['completed', 'failed', 'cancelled', 'emergency_stopped']) {
      const a = await inState(status);
      const archived = await post(`/assessments/${a.id}/archive`, org.admin.token);
      expect(archived.status).toBe(200);
      expect(archived.body).toMatchObject({ archived: true, archived_at: expect.any(String), status });
      const again = await post(`/assessments/${a.id}/archive`, org.admin.token);
      expect(again.status).toBe(409);
      const listed = await api().get(`/api/v1/assessments?archived=true&project_id=${a.projectId}`).set(bearer(org.admin.token));
      expect(listed.body.data.map((x: { id: string }) => x.id)).toEqual([a.id]);
      const back = await post(`/assessments/${a.id}/unarchive`, org.admin.token);
      expect(back.status).toBe(200);
      expect(back.body).toMatchObject({ archived: false, archived_at: null });
    }
  });

  it('deletes an assessment with its findings (204); refuses while queued or running (409)', async () => {
    const a = await inState('completed');
    const f = await insertFinding(h, a);
    const res = await api().delete(`/api/v1/assessments/${a.id}`).set(bearer(org.admin.token));
    expect(res.status).toBe(204);
    expect(await h.deps.prisma.assessment.findUnique({ where: { id: a.id } })).toBeNull();
    expect(await h.deps.prisma.finding.findUnique({ where: { id: f.id } })).toBeNull();
    expect((await api().get(`/api/v1/assessments/${a.id}`).set(bearer(org.admin.token))).status).toBe(404);

    for (const status of ['queued', 'running']) {
      const busy = await inState(status);
      const refused = await api().delete(`/api/v1/assessments/${busy.id}`).set(bearer(org.admin.token));
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toContain(status);
    }
    const d = await inState('draft');
    expect((await api().delete(`/api/v1/assessments/${d.id}`).set(bearer(org.owner.token))).status).toBe(204);
  });
});

describe('a deletion in progress', () => {
  /**
   * Runs `body` while a second connection holds a finding of the assessment (FOR UPDATE): the deletion's cascade waits
   * for it inside the deleting transaction, as it would behind any transaction touching those rows or a long cascade.
   */
  async function whileFindingLocked(findingId: string, body: (held: { pid: number; release: () => Promise<void> }) => Promise<void>) {
    const holder = new pg.Client(pgFields(h.config.databaseUrl));
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM findings WHERE id = $1 FOR UPDATE', [findingId]);
      const [{ pid }] = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      await body({ pid, release: async () => void (await holder.query('COMMIT')) });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  }
  /** The response, or 'still waiting' after `ms`. */
  const within = <T>(p: PromiseLike<T>, ms: number) =>
    Promise.race([p, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms))]);

  it("does not hold up the organization's other writes (usage recorded, a subscription created elsewhere) while it runs", async () => {
    const billing = await createKey(h, org.admin.token, ['billing:manage']);
    const elsewhere = await insertProject(h, org.id);
    const a = await inState('completed');
    const f = await insertFinding(h, a);
    await whileFindingLocked(f.id, async (held) => {
      const deletion = api().delete(`/api/v1/assessments/${a.id}`).set(bearer(org.admin.token)).then((res) => res);
      await untilBlockedBy(h, held.pid, 1);
      try {
        const usage = await within(post('/usage', billing, { project_id: elsewhere.id, credits: '1' }).then((res) => res.status), 3000);
        expect(usage).toBe(201);
        const subscription = await within(
          post(`/projects/${elsewhere.id}/webhooks/subscriptions`, org.admin.token, { name: 'elsewhere', url: 'https://203.0.114.10/hooks', events: ['finding.created'] }).then((res) => res.status),
          3000,
        );
        expect(subscription).toBe(201);
      } finally {
        await held.release();
        await deletion;
      }
    });
  }, 30_000);

  it('completes when its cascade takes longer than five seconds (204, the assessment gone)', async () => {
    const a = await inState('completed');
    const f = await insertFinding(h, a);
    let status = 0;
    await whileFindingLocked(f.id, async (held) => {
      const deletion = api().delete(`/api/v1/assessments/${a.id}`).set(bearer(org.admin.token)).then((res) => res);
      await untilBlockedBy(h, held.pid, 1);
      await new Promise((r) => setTimeout(r, 6000));
      await held.release();
      status = (await deletion).status;
    });
    expect(status).toBe(204);
    expect(await h.deps.prisma.assessment.findUnique({ where: { id: a.id } })).toBeNull();
  }, 30_000);
});

describe('launch and the spend cap', () => {
  afterEach(() => jest.restoreAllMocks());

  it('asks the spend guard inside the transaction, with the organization and project', async () => {
    const spy = jest.spyOn(spendGuard, 'assertWithinSpendCap');
    const a = await draft();
    expect((await post(`/assessments/${a.id}/launch`, org.admin.token)).status).toBe(200);
    expect(spy).toHaveBeenCalledWith(expect.anything(), a.project_id);
    expect(organizationOf(spy.mock.calls[0][0])).toBe(org.id);
  });

  it('a refusal (400) rolls the launch back: the assessment stays a draft', async () => {
    jest.spyOn(spendGuard, 'assertWithinSpendCap').mockRejectedValue(badRequest('The spend cap is reached.'));
    const a = await draft();
    const res = await post(`/assessments/${a.id}/launch`, org.admin.token);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: 'The spend cap is reached.' });
    const row = await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: a.id } });
    expect(row).toMatchObject({ status: 'draft', queuedAt: null });
  });

  it('refuses to launch in an archived project (409)', async () => {
    const a = await draft();
    await h.deps.prisma.project.update({ where: { id: a.project_id }, data: { archivedAt: new Date() } });
    expect((await post(`/assessments/${a.id}/launch`, org.admin.token)).status).toBe(409);
  });
});

describe('scopes, roles and access', () => {
  const routes: Array<{ method: 'post' | 'patch' | 'delete'; path: string; scope: string; body?: object; state: string }> = [
    { method: 'post', path: 'launch', scope: 'assessments:create', state: 'draft' },
    { method: 'patch', path: '', scope: 'assessments:update', body: { notes: 'x' }, state: 'draft' },
    { method: 'post', path: 'cancel', scope: 'assessments:cancel', state: 'running' },
    { method: 'post', path: 'emergency-stop', scope: 'assessments:emergency_stop', state: 'running' },
    { method: 'post', path: 'archive', scope: 'assessments:archive', state: 'completed' },
    { method: 'post', path: 'unarchive', scope: 'assessments:archive', state: 'completed' },
    { method: 'delete', path: '', scope: 'assessments:delete', state: 'completed' },
    { method: 'post', path: 'start', scope: 'assessments:update', state: 'queued' },
    { method: 'post', path: 'complete', scope: 'assessments:update', body: { summary: 's' }, state: 'running' },
    { method: 'post', path: 'fail', scope: 'assessments:update', body: { reason: 'r' }, state: 'running' },
    { method: 'post', path: 'findings', scope: 'assessments:update', body: { title: 't', severity: 'low', fingerprint: 'f' }, state: 'running' },
  ];
  const call = (r: (typeof routes)[number], id: string, token: string) => {
    const path = `/api/v1/assessments/${id}${r.path ? `/${r.path}` : ''}`;
    const req = api()[r.method](path).set(bearer(token));
    return r.body ? req.send(r.body) : req;
  };

  it.each(routes)('$method /assessments/{id}/$path: members lack $scope (403 naming it)', async (r) => {
    const a = await inState(r.state);
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.member.id }, 'write');
    const res = await call(r, a.id, org.member.token);
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain(r.scope);
  });

  it.each(routes)('$method /assessments/{id}/$path: another organization gets 404', async (r) => {
    const a = await inState(r.state);
    const res = await call(r, a.id, other.owner.token);
    expect(res.status).toBe(404);
    expect(await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: a.id } })).toMatchObject({ status: r.state });
  });

  it('managers lack assessments:delete; a key without assessments:update cannot drive the engine routes', async () => {
    const a = await inState('completed');
    await insertGrant(h, org.id, { assessmentId: a.id }, { userId: org.manager.id }, 'write');
    const del = await api().delete(`/api/v1/assessments/${a.id}`).set(bearer(org.manager.token));
    expect(del.status).toBe(403);
    expect(del.body.detail).toContain('assessments:delete');
    const readOnly = await createKey(h, org.admin.token, ['assessments:read']);
    const q = await inState('queued');
    const start = await post(`/assessments/${q.id}/start`, readOnly);
    expect(start.status).toBe(403);
    expect(start.body.detail).toContain('assessments:update');
  });

  it('a read grant is not enough to change an assessment (403); no grant hides it (404)', async () => {
    const a = await inState('draft');
    expect((await post(`/assessments/${a.id}/launch`, org.manager.token)).status).toBe(404);
    await insertGrant(h, org.id, { projectId: a.projectId }, { userId: org.manager.id }, 'read');
    expect((await post(`/assessments/${a.id}/launch`, org.manager.token)).status).toBe(403);
    expect((await api().get(`/api/v1/assessments/${a.id}`).set(bearer(org.manager.token))).status).toBe(200);
  });

  it('validates engine bodies (400)', async () => {
    const a = await inState('running');
    for (const body of [{}, { summary: '' }, { summary: 5 }]) expect((await post(`/assessments/${a.id}/complete`, engine, body)).status).toBe(400);
    for (const body of [{}, { reason: '' }, { reason: 'x', extra: 1 }]) expect((await post(`/assessments/${a.id}/fail`, engine, body)).status).toBe(400);
    expect((await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: a.id } })).status).toBe('running');
  });
});
