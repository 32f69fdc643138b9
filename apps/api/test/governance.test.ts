// The remediation SLA policy: GET/PUT /governance/sla, its defaults, validation, scopes and per-organization
// isolation, and its effect on the findings' sla_due_at.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, insertFinding } from './support/domain';
import { auditLog } from './support/audit-log';

let h: Harness;
let org: TestOrg;
let other: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
});
afterAll(() => h.close());

const get = (token: string) => request(h.app).get('/api/v1/governance/sla').set(bearer(token));
const put = (token: string, body: unknown) => request(h.app).put('/api/v1/governance/sla').set(bearer(token)).send(body as object);
const POLICY = { critical: 3, high: 14, medium: 60, low: null, info: 365 };

describe('GET /governance/sla', () => {
  it('starts from the defaults: critical 7, high 30, medium 90, low 180, info none', async () => {
    const res = await get(org.admin.token);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ critical: 7, high: 30, medium: 90, low: 180, info: null });
  });

  it('needs governance:read: managers and members get 403 naming it', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await get(user.token);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('governance:read');
    }
    const key = await createKey(h, org.admin.token, ['governance:read']);
    expect((await get(key)).status).toBe(200);
  });
});

describe('PUT /governance/sla', () => {
  it('replaces the policy of the caller\'s organization only', async () => {
    const res = await put(org.owner.token, POLICY);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(POLICY);
    expect((await get(org.admin.token)).body).toEqual(POLICY);
    expect((await get(other.admin.token)).body).toEqual({ critical: 7, high: 30, medium: 90, low: 180, info: null });
  });

  it('needs governance:manage: managers, members and a read-only key get 403 naming it', async () => {
    const key = await createKey(h, org.admin.token, ['governance:read']);
    for (const token of [org.manager.token, org.member.token, key]) {
      const res = await put(token, POLICY);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('governance:manage');
    }
  });

  it.each([
    ['a missing severity', { critical: 1, high: 2, medium: 3, low: 4 }],
    ['zero days', { ...POLICY, critical: 0 }],
    ['over ten years', { ...POLICY, high: 3651 }],
    ['a fraction', { ...POLICY, medium: 1.5 }],
    ['a string', { ...POLICY, low: '7' }],
    ['an unknown key', { ...POLICY, urgent: 1 }],
    ['an array', [1, 2, 3]],
  ])('refuses %s with 400 and changes nothing', async (_label, body) => {
    const before = (await get(org.admin.token)).body;
    const res = await put(org.admin.token, body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ detail: expect.any(String) });
    expect((await get(org.admin.token)).body).toEqual(before);
  });
});

describe('governance.sla_updated in the audit log', () => {
  const DEFAULTS = { critical: 7, high: 30, medium: 90, low: 180, info: null };
  const updates = (t: TestOrg) => auditLog(h, t.owner.token, { action: 'governance.sla_updated' });

  it('records who changed the policy, before and after; the same policy again records nothing', async () => {
    const t = await createOrg(h);
    await put(t.admin.token, POLICY).expect(200);
    await put(t.owner.token, POLICY).expect(200);
    expect(await updates(t)).toEqual([
      expect.objectContaining({
        actor_type: 'user', actor_id: t.admin.id, actor_label: t.admin.email, target_type: 'organization', target_id: t.id,
        metadata: { before: DEFAULTS, after: POLICY },
      }),
    ]);
    const next = { ...POLICY, info: null };
    await put(t.owner.token, next).expect(200);
    expect((await updates(t)).map((e) => e.metadata)).toEqual([{ before: POLICY, after: next }, { before: DEFAULTS, after: POLICY }]);
    // The defaults sent as such change nothing on a fresh organization either.
    const fresh = await createOrg(h);
    await put(fresh.admin.token, DEFAULTS).expect(200);
    expect(await updates(fresh)).toEqual([]);
  });

  it('an API key with governance:manage is the actor of its change', async () => {
    const t = await createOrg(h);
    const key = await createKey(h, t.admin.token, ['governance:manage']);
    await put(key, POLICY).expect(200);
    const [entry] = await updates(t);
    expect(entry).toMatchObject({ actor_type: 'api_key', actor_id: expect.any(String), metadata: { before: DEFAULTS, after: POLICY } });
    expect(JSON.stringify(await auditLog(h, t.owner.token))).not.toContain(key);
  });

  it('records nothing for a refused change (403, 400), and nothing in another organization', async () => {
    const t = await createOrg(h);
    const them = await createOrg(h);
    const readOnly = await createKey(h, t.admin.token, ['governance:read']);
    const before = await auditLog(h, t.owner.token);
    for (const token of [t.manager.token, t.member.token, readOnly]) expect((await put(token, POLICY)).status).toBe(403);
    expect((await put(t.admin.token, { ...POLICY, critical: 0 })).status).toBe(400);
    expect(await auditLog(h, t.owner.token)).toEqual(before);
    await put(t.admin.token, POLICY).expect(200);
    expect(await updates(t)).toHaveLength(1);
    expect(await auditLog(h, them.owner.token)).toEqual([]);
  });
});

describe('the policy drives sla_due_at on findings', () => {
  it('due = opened_at + days of the severity; none without a window or once closed', async () => {
    const fresh = await createOrg(h);
    const p = await insertProject(h, fresh.id);
    const a = await insertAssessmentIn(h, fresh.id, p.id, 'running');
    const openedAt = new Date('2026-01-01T00:00:00.000Z');
    const crit = await insertFinding(h, a, { severity: 'critical', openedAt });
    const info = await insertFinding(h, a, { severity: 'info', openedAt });
    const closed = await insertFinding(h, a, { severity: 'critical', status: 'dismissed', openedAt });
    const due = async (id: string) => (await request(h.app).get(`/api/v1/findings/${id}`).set(bearer(fresh.admin.token))).body.sla_due_at;
    expect(await due(crit.id)).toBe('2026-01-08T00:00:00.000Z');
    expect(await due(info.id)).toBeNull();
    expect(await due(closed.id)).toBeNull();
    await put(fresh.admin.token, { critical: 1, high: 30, medium: 90, low: 180, info: 2 }).expect(200);
    expect(await due(crit.id)).toBe('2026-01-02T00:00:00.000Z');
    expect(await due(info.id)).toBe('2026-01-03T00:00:00.000Z');
  });
});
