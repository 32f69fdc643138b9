// Spend through the HTTP API: usage records (billing:manage, the engine's key), usage and balance (billing:read),
// thresholds and caps per organization and per project; spend.threshold_crossed and spend.cap_reached exactly once
// per crossing (also under concurrent usage), re-armed by raising the limit; a reached cap refuses assessment
// launches in its scope with 400 until raised. Decimal amounts are strings; scopes, cross-organization 404.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { createKey, eventsOf, insertAssessmentIn } from './support/domain';

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const api = () => request(h.app);

interface Tenant {
  org: TestOrg;
  engine: string;
  p1: { id: string };
  p2: { id: string };
}

async function tenant(): Promise<Tenant> {
  const org = await createOrg(h);
  const engine = await createKey(h, org.owner.token, ['billing:manage', 'billing:read']);
  const [p1, p2] = await Promise.all([insertProject(h, org.id), insertProject(h, org.id)]);
  return { org, engine, p1, p2 };
}

const use = (t: Tenant, credits: unknown, projectId?: string, extra: Record<string, unknown> = {}) =>
  api().post('/api/v1/usage').set(bearer(t.engine)).send({ credits, ...(projectId && { project_id: projectId }), ...extra });
const addLimit = (t: Tenant, body: Record<string, unknown>) => api().post('/api/v1/billing/limits').set(bearer(t.org.admin.token)).send(body);
const patchLimit = (t: Tenant, id: string, credits: unknown) =>
  api().patch(`/api/v1/billing/limits/${id}`).set(bearer(t.org.admin.token)).send({ credits });
const launch = async (t: Tenant, projectId: string) => {
  const a = await insertAssessmentIn(h, t.org.id, projectId, 'draft');
  return api().post(`/api/v1/assessments/${a.id}/launch`).set(bearer(t.org.admin.token)).send();
};

describe('POST /usage, GET /billing/usage and /billing/balance', () => {
  it('records usage with string amounts and totals it per organization and per project', async () => {
    const t = await tenant();
    const first = await use(t, '12.50', t.p1.id, { description: 'assessment run' });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      id: expect.stringMatching(/^use_[0-9a-z]{26}$/),
      project_id: t.p1.id,
      credits: '12.50',
      description: 'assessment run',
      created_at: expect.any(String),
    });
    expect((await use(t, 3.5, t.p1.id)).body.credits).toBe('3.50');
    expect((await use(t, '0.1', t.p2.id)).body.credits).toBe('0.10');
    expect((await use(t, '100')).body).toMatchObject({ project_id: null, credits: '100.00' });

    const balance = await api().get('/api/v1/billing/balance').set(bearer(t.org.admin.token));
    expect(balance.status).toBe(200);
    expect(balance.body).toEqual({
      spent_credits: '116.10',
      unassigned_credits: '100.00',
      cap_reached: false,
      projects: [
        { project_id: t.p1.id, spent_credits: '16.00', cap_reached: false },
        { project_id: t.p2.id, spent_credits: '0.10', cap_reached: false },
      ].sort((a, b) => a.project_id.localeCompare(b.project_id)),
    });

    const usage = await api().get('/api/v1/billing/usage').set(bearer(t.org.admin.token));
    expect(usage.status).toBe(200);
    expect(usage.body.data.map((u: { credits: string }) => u.credits)).toEqual(['100.00', '0.10', '3.50', '12.50']);
    const p1 = await api().get(`/api/v1/billing/usage?project_id=${t.p1.id}&limit=1`).set(bearer(t.org.admin.token));
    expect(p1.body.data.map((u: { credits: string }) => u.credits)).toEqual(['3.50']);
    expect(p1.body.next_cursor).toBe(p1.body.data[0].id);
    const future = await api().get('/api/v1/billing/usage?since=2999-01-01T00:00:00Z').set(bearer(t.org.admin.token));
    expect(future.body.data).toEqual([]);
  });

  it('refuses usage since/until outside what PostgreSQL holds with 400 and the envelope, not a 500', async () => {
    const t = await tenant();
    for (const query of ['since=-271821-04-20T00:00:00.000Z', 'until=%2B275760-09-13T00:00:00.000Z']) {
      const res = await api().get(`/api/v1/billing/usage?${query}`).set(bearer(t.org.admin.token));
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ detail: expect.stringMatching(/since|until/) });
    }
  });

  it('validates amounts: malformed 400, zero 422; an unknown or foreign project 404', async () => {
    const t = await tenant();
    for (const credits of ['abc', '1.234', 1.234, '-5', '', null, '1e3', '1234567890123']) expect((await use(t, credits)).status).toBe(400);
    expect((await use(t, '0')).status).toBe(422);
    expect((await use(t, '0.00')).status).toBe(422);
    const foreign = await insertProject(h, (await createOrg(h)).id);
    expect((await use(t, '1', foreign.id)).status).toBe(404);
    expect((await use(t, '1', 'prj_unknown')).status).toBe(404);
    expect(await h.deps.prisma.usageRecord.count({ where: { organizationId: t.org.id } })).toBe(0);
  });

  it('needs billing:manage to record (managers have no billing: 403) and billing:read to view', async () => {
    const t = await tenant();
    const manager = await api().post('/api/v1/usage').set(bearer(t.org.manager.token)).send({ credits: '1' });
    expect(manager.status).toBe(403);
    expect(manager.body.detail).toContain('billing:manage');
    const reader = await createKey(h, t.org.owner.token, ['billing:read']);
    expect((await api().post('/api/v1/usage').set(bearer(reader)).send({ credits: '1' })).status).toBe(403);
    expect((await api().get('/api/v1/billing/balance').set(bearer(reader))).status).toBe(200);
    for (const path of ['/api/v1/billing/usage', '/api/v1/billing/balance', '/api/v1/billing/limits']) {
      const res = await api().get(path).set(bearer(t.org.member.token));
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('billing:read');
    }
  });

  it('never shows another organization’s usage', async () => {
    const [a, b] = await Promise.all([tenant(), tenant()]);
    await use(a, '5', a.p1.id);
    const res = await api().get('/api/v1/billing/usage').set(bearer(b.org.admin.token));
    expect(res.body.data).toEqual([]);
    expect((await api().get('/api/v1/billing/balance').set(bearer(b.org.admin.token))).body.spent_credits).toBe('0.00');
  });
});

describe('thresholds', () => {
  it('publishes spend.threshold_crossed once when organization spend reaches an organization threshold', async () => {
    const t = await tenant();
    const limit = (await addLimit(t, { kind: 'threshold', credits: '100' })).body;
    expect(limit).toEqual({
      id: expect.stringMatching(/^lim_[0-9a-z]{26}$/),
      scope: 'organization',
      project_id: null,
      kind: 'threshold',
      credits: '100.00',
      triggered: false,
      triggered_at: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    await use(t, '60', t.p1.id);
    expect(await eventsOf(h, t.org.id, 'spend.threshold_crossed')).toEqual([]);
    await use(t, '40.00', t.p2.id); // org total 100.00: reached
    await use(t, '10', t.p1.id);
    const events = await eventsOf(h, t.org.id, 'spend.threshold_crossed');
    expect(events).toHaveLength(1);
    expect(events[0].data).toEqual({ limit_id: limit.id, scope: 'organization', project_id: null, threshold_credits: '100.00', spent_credits: '100.00' });
    expect(events[0]).toMatchObject({ projectId: null, assessmentId: null });
    const read = await api().get(`/api/v1/billing/limits/${limit.id}`).set(bearer(t.org.admin.token));
    expect(read.body).toMatchObject({ triggered: true, triggered_at: expect.any(String) });
  });

  it('counts only the project for a project threshold', async () => {
    const t = await tenant();
    const limit = (await addLimit(t, { kind: 'threshold', credits: '10', project_id: t.p1.id })).body;
    expect(limit).toMatchObject({ scope: 'project', project_id: t.p1.id });
    await use(t, '50', t.p2.id);
    await use(t, '50');
    expect(await eventsOf(h, t.org.id, 'spend.threshold_crossed')).toEqual([]);
    await use(t, '10.01', t.p1.id);
    const [event] = await eventsOf(h, t.org.id, 'spend.threshold_crossed');
    expect(event.data).toEqual({ limit_id: limit.id, scope: 'project', project_id: t.p1.id, threshold_credits: '10.00', spent_credits: '10.01' });
    expect(event.projectId).toBe(t.p1.id);
  });

  it('fires once under concurrent usage records', async () => {
    const t = await tenant();
    await addLimit(t, { kind: 'threshold', credits: '5' });
    await addLimit(t, { kind: 'cap', credits: '8' });
    const results = await Promise.all(Array.from({ length: 10 }, () => use(t, '1', t.p1.id)));
    expect(results.every((r) => r.status === 201)).toBe(true);
    const crossed = await eventsOf(h, t.org.id, 'spend.threshold_crossed');
    const capped = await eventsOf(h, t.org.id, 'spend.cap_reached');
    expect(crossed).toHaveLength(1);
    expect(crossed[0].data.spent_credits).toBe('5.00');
    expect(capped).toHaveLength(1);
    expect(capped[0].data.spent_credits).toBe('8.00');
  });

  it('is re-armed by raising it above the spend, and triggers at once when set at or below the spend', async () => {
    const t = await tenant();
    await use(t, '30');
    const limit = (await addLimit(t, { kind: 'threshold', credits: '20' })).body; // already reached
    expect(limit.triggered).toBe(true);
    expect((await eventsOf(h, t.org.id, 'spend.threshold_crossed')).map((e) => e.data.spent_credits)).toEqual(['30.00']);
    const raised = await patchLimit(t, limit.id, '50');
    expect(raised.status).toBe(200);
    expect(raised.body).toMatchObject({ credits: '50.00', triggered: false, triggered_at: null });
    await use(t, '25');
    expect((await eventsOf(h, t.org.id, 'spend.threshold_crossed')).map((e) => e.data.spent_credits)).toEqual(['30.00', '55.00']);
    const lowered = await patchLimit(t, limit.id, '40'); // still reached: stays triggered, no new event
    expect(lowered.body.triggered).toBe(true);
    expect(await eventsOf(h, t.org.id, 'spend.threshold_crossed')).toHaveLength(2);
  });
});

describe('caps', () => {
  it('a project cap: spend.cap_reached once, launches in that project refused with 400 until raised', async () => {
    const t = await tenant();
    const cap = (await addLimit(t, { kind: 'cap', credits: '20', project_id: t.p1.id })).body;
    expect((await launch(t, t.p1.id)).status).toBe(200);
    await use(t, '15', t.p1.id);
    await use(t, '5', t.p1.id);
    await use(t, '1', t.p1.id);
    const events = await eventsOf(h, t.org.id, 'spend.cap_reached');
    expect(events).toHaveLength(1);
    expect(events[0].data).toEqual({ limit_id: cap.id, scope: 'project', project_id: t.p1.id, cap_credits: '20.00', spent_credits: '20.00' });
    const refused = await launch(t, t.p1.id);
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/^Spend cap reached/);
    expect((await launch(t, t.p2.id)).status).toBe(200); // another project is not capped
    const balance = (await api().get('/api/v1/billing/balance').set(bearer(t.org.admin.token))).body;
    expect(balance.cap_reached).toBe(false);
    expect(balance.projects.find((p: { project_id: string }) => p.project_id === t.p1.id).cap_reached).toBe(true);

    expect((await patchLimit(t, cap.id, '21')).body).toMatchObject({ triggered: true }); // spend is 21.00: not above it
    expect((await patchLimit(t, cap.id, '22')).body).toMatchObject({ triggered: false });
    expect((await launch(t, t.p1.id)).status).toBe(200);
    await use(t, '1.00', t.p1.id); // 22.00 >= 22: reached again
    expect(await eventsOf(h, t.org.id, 'spend.cap_reached')).toHaveLength(2);
    expect((await launch(t, t.p1.id)).status).toBe(400);
  });

  it('an organization cap refuses launches in every project; raising it above the spend allows them again', async () => {
    const t = await tenant();
    await use(t, '99', t.p2.id);
    const cap = (await addLimit(t, { kind: 'cap', credits: '100' })).body;
    expect(cap.triggered).toBe(false);
    await use(t, '1');
    const [event] = await eventsOf(h, t.org.id, 'spend.cap_reached');
    expect(event.data).toEqual({ limit_id: cap.id, scope: 'organization', project_id: null, cap_credits: '100.00', spent_credits: '100.00' });
    for (const p of [t.p1, t.p2]) expect((await launch(t, p.id)).status).toBe(400);
    expect((await api().get('/api/v1/billing/balance').set(bearer(t.org.admin.token))).body.cap_reached).toBe(true);
    expect((await patchLimit(t, cap.id, '100.00')).body.triggered).toBe(true); // not above the spend
    expect((await launch(t, t.p1.id)).status).toBe(400);
    expect((await patchLimit(t, cap.id, '100.01')).body.triggered).toBe(false);
    expect((await launch(t, t.p1.id)).status).toBe(200);
  });

  it('deleting a cap allows launches again; one cap per scope (409)', async () => {
    const t = await tenant();
    const cap = (await addLimit(t, { kind: 'cap', credits: '1' })).body;
    const second = await addLimit(t, { kind: 'cap', credits: '2' });
    expect(second.status).toBe(409);
    expect((await addLimit(t, { kind: 'cap', credits: '2', project_id: t.p1.id })).status).toBe(201);
    expect((await addLimit(t, { kind: 'threshold', credits: '1' })).status).toBe(201);
    expect((await addLimit(t, { kind: 'threshold', credits: '1' })).status).toBe(201);
    await use(t, '1', t.p2.id);
    expect((await launch(t, t.p2.id)).status).toBe(400);
    expect((await api().delete(`/api/v1/billing/limits/${cap.id}`).set(bearer(t.org.admin.token))).status).toBe(204);
    expect((await api().delete(`/api/v1/billing/limits/${cap.id}`).set(bearer(t.org.admin.token))).status).toBe(404);
    expect((await launch(t, t.p2.id)).status).toBe(200);
  });
});

describe('/billing/limits routes', () => {
  it('lists and filters limits', async () => {
    const t = await tenant();
    const a = (await addLimit(t, { kind: 'threshold', credits: '10' })).body;
    const b = (await addLimit(t, { kind: 'cap', credits: '20', project_id: t.p1.id })).body;
    const all = await api().get('/api/v1/billing/limits').set(bearer(t.org.admin.token));
    expect(all.body).toEqual({ data: [b, a], next_cursor: null });
    expect((await api().get('/api/v1/billing/limits?kind=cap').set(bearer(t.org.admin.token))).body.data).toEqual([b]);
    expect((await api().get(`/api/v1/billing/limits?project_id=${t.p1.id}`).set(bearer(t.org.admin.token))).body.data).toEqual([b]);
  });

  it('validates: kind outside threshold | cap 422, malformed amounts 400, zero 422, foreign project 404', async () => {
    const t = await tenant();
    expect((await addLimit(t, { kind: 'budget', credits: '10' })).status).toBe(422);
    expect((await addLimit(t, { kind: 'cap' })).status).toBe(400);
    expect((await addLimit(t, { kind: 'cap', credits: 'ten' })).status).toBe(400);
    expect((await addLimit(t, { kind: 'cap', credits: '0' })).status).toBe(422);
    const foreign = await insertProject(h, (await createOrg(h)).id);
    expect((await addLimit(t, { kind: 'cap', credits: '5', project_id: foreign.id })).status).toBe(404);
    const limit = (await addLimit(t, { kind: 'cap', credits: '5' })).body;
    expect((await patchLimit(t, limit.id, 'x')).status).toBe(400);
    expect((await api().patch(`/api/v1/billing/limits/${limit.id}`).set(bearer(t.org.admin.token)).send({ kind: 'threshold' })).status).toBe(400);
  });

  it('needs billing:manage to change limits (manager: 403) and hides other organizations’ limits (404)', async () => {
    const [t, o] = await Promise.all([tenant(), tenant()]);
    const limit = (await addLimit(t, { kind: 'cap', credits: '5' })).body;
    const manager = await api().post('/api/v1/billing/limits').set(bearer(t.org.manager.token)).send({ kind: 'cap', credits: '5' });
    expect(manager.status).toBe(403);
    expect(manager.body.detail).toContain('billing:manage');
    const reader = await createKey(h, t.org.owner.token, ['billing:read']);
    expect((await api().patch(`/api/v1/billing/limits/${limit.id}`).set(bearer(reader)).send({ credits: '9' })).status).toBe(403);
    expect((await api().delete(`/api/v1/billing/limits/${limit.id}`).set(bearer(reader))).status).toBe(403);
    expect((await api().get(`/api/v1/billing/limits/${limit.id}`).set(bearer(reader))).status).toBe(200);
    const memberRead = await api().get(`/api/v1/billing/limits/${limit.id}`).set(bearer(t.org.member.token));
    expect(memberRead.status).toBe(403);
    expect(memberRead.body.detail).toContain('billing:read');
    const admin = o.org.admin.token;
    expect((await api().get(`/api/v1/billing/limits/${limit.id}`).set(bearer(admin))).status).toBe(404);
    expect((await api().patch(`/api/v1/billing/limits/${limit.id}`).set(bearer(admin)).send({ credits: '9' })).status).toBe(404);
    expect((await api().delete(`/api/v1/billing/limits/${limit.id}`).set(bearer(admin))).status).toBe(404);
    expect((await api().get('/api/v1/billing/limits').set(bearer(admin))).body.data).toEqual([]);
    expect((await api().get(`/api/v1/billing/limits/${limit.id}`).set(bearer(t.org.admin.token))).body.credits).toBe('5.00');
  });
});
