// Findings through the HTTP API: recording by the engine (fingerprint = identity), triage along the transition
// table, severity override, reassignment, listing with filters, reading; the finding events with their exact
// data and deliveries; scopes, access and cross-organization 404.
import request from 'supertest';
import { newId, scopedTo } from '@svc/db';
import { outboxDeps, withOutbox } from '@svc/outbox';
import type { FindingStatus } from '@svc/domain';
import { FINDING_TRANSITIONS } from '@svc/domain';
import { changeFindingStatus } from '../src/modules/findings/findings.service';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey, deliveriesOf, eventsOf, expectDelivered, insertAssessmentIn, insertFinding, subscribe } from './support/domain';

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let engine: string;
let project: { id: string };
let running: { id: string; organizationId: string; projectId: string };
let subs: { org: string; project: string; assessment: string; otherProject: string };

const FINDING_EVENTS = ['finding.created', 'finding.confirmed', 'finding.status_changed'];

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  engine = await createKey(h, org.admin.token, ['assessments:update']);
  project = await insertProject(h, org.id);
  const otherProject = await insertProject(h, org.id);
  running = await insertAssessmentIn(h, org.id, project.id, 'running');
  subs = {
    org: await subscribe(h, org.admin.token, { org: true }, FINDING_EVENTS),
    project: await subscribe(h, org.admin.token, { projectId: project.id }, FINDING_EVENTS),
    assessment: await subscribe(h, org.admin.token, { assessmentId: running.id }, FINDING_EVENTS),
    otherProject: await subscribe(h, org.admin.token, { projectId: otherProject.id }, FINDING_EVENTS),
  };
});
afterAll(() => h.close());

const api = () => request(h.app);
const record = (body: Record<string, unknown>, assessmentId = running.id, token = engine) =>
  api().post(`/api/v1/assessments/${assessmentId}/findings`).set(bearer(token)).send(body);
const act = (id: string, action: string, token = org.admin.token, body?: object) => {
  const r = api().post(`/api/v1/findings/${id}/${action}`).set(bearer(token));
  return body ? r.send(body) : r;
};

function eventData(f: { id: string; title: string; severity: string; status: string; location: string | null; fingerprint: string }) {
  return {
    finding_id: f.id,
    assessment_id: running.id,
    project_id: project.id,
    title: f.title,
    severity: f.severity,
    status: f.status,
    location: f.location,
    fingerprint: f.fingerprint,
  };
}

/** The event went to the org, project and assessment subscriptions with exactly `data`, and not elsewhere. */
async function expectFannedOut(eventId: string, type: string, data: Record<string, unknown>) {
  for (const sub of [subs.org, subs.project, subs.assessment]) await expectDelivered(h, org.id, eventId, sub, type, data);
  const deliveries = await deliveriesOf(h, eventId);
  expect(deliveries.size).toBe(3);
  expect(deliveries.has(subs.otherProject)).toBe(false);
}

describe('recording findings', () => {
  it('needs write access to the assessment for a non-admin key (404 none, 403 read, 201 via a team\'s or a direct grant) and answers with the organization\'s own SLA', async () => {
    const t = await createOrg(h);
    await h.deps.prisma.organization.update({ where: { id: t.id }, data: { slaHighDays: 3 } });
    const p = await insertProject(h, t.id);
    const a = await insertAssessmentIn(h, t.id, p.id, 'running');
    const managerEngine = await createKey(h, t.manager.token, ['assessments:update']);
    const post = (fingerprint: string) =>
      api().post(`/api/v1/assessments/${a.id}/findings`).set(bearer(managerEngine)).send({ title: 't', severity: 'high', fingerprint });
    expect((await post('none')).status).toBe(404);
    await insertGrant(h, t.id, { projectId: p.id }, { userId: t.manager.id }, 'read');
    expect((await post('read')).status).toBe(403);
    const team = await h.deps.prisma.team.create({ data: { id: newId('team'), organizationId: t.id, name: 'engines' } });
    await h.deps.prisma.teamMember.create({ data: { teamId: team.id, userId: t.manager.id } });
    await insertGrant(h, t.id, { projectId: p.id }, { teamId: team.id }, 'write');
    const viaTeam = await post('team');
    expect(viaTeam.status).toBe(201);
    expect(viaTeam.body.sla_due_at).toBe(new Date(Date.parse(viaTeam.body.opened_at) + 3 * 86400_000).toISOString());
    // In a project without a grant: one on another assessment does not reach this one; one on this assessment does.
    const q = await insertProject(h, t.id);
    const [c, d] = [await insertAssessmentIn(h, t.id, q.id, 'running'), await insertAssessmentIn(h, t.id, q.id, 'running')];
    const onC = (fingerprint: string) =>
      api().post(`/api/v1/assessments/${c.id}/findings`).set(bearer(managerEngine)).send({ title: 't', severity: 'low', fingerprint });
    await insertGrant(h, t.id, { assessmentId: d.id }, { userId: t.manager.id }, 'write');
    expect((await onC('elsewhere')).status).toBe(404);
    await insertGrant(h, t.id, { assessmentId: c.id }, { userId: t.manager.id }, 'write');
    expect((await onC('direct')).status).toBe(201);
  });

  it('creates an open finding and publishes finding.created', async () => {
    const res = await record({
      title: 'SQL injection in /login', severity: 'critical', fingerprint: 'sqli-login', location: 'src/login.ts:42', description: 'user input reaches the query',
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^fnd_[0-9a-z]{26}$/),
      project_id: project.id,
      assessment_id: running.id,
      fingerprint: 'sqli-login',
      title: 'SQL injection in /login',
      severity: 'critical',
      original_severity: 'critical',
      status: 'open',
      location: 'src/login.ts:42',
      description: 'user input reaches the query',
      assignee_user_id: null,
      opened_at: expect.any(String),
      sla_due_at: new Date(Date.parse(res.body.opened_at) + 7 * 86400_000).toISOString(),
      sla_breached_at: null,
      fixed_at: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const [event, ...more] = await eventsOf(h, org.id, 'finding.created', { finding_id: res.body.id });
    expect(more).toHaveLength(0);
    const data = eventData(res.body);
    expect(event.data).toEqual(data);
    expect(event).toMatchObject({ projectId: project.id, assessmentId: running.id });
    await expectFannedOut(event.id, 'finding.created', data);
  });

  it('delivers text with quotes, backslashes, braces and non-ASCII characters exactly as recorded', async () => {
    const title = 'a "quoted" \\ back\\slash, {braces}, \'single\' — ünïcødé 🔒 NULL';
    const res = await record({ title, severity: 'low', fingerprint: 'odd-text' });
    expect(res.status).toBe(201);
    expect(res.body.title).toBe(title);
    const [event] = await eventsOf(h, org.id, 'finding.created', { finding_id: res.body.id });
    expect(event.data).toMatchObject({ title });
    await expectFannedOut(event.id, 'finding.created', eventData(res.body));
  });

  it('the same fingerprint again updates the same finding and publishes nothing new', async () => {
    const first = await record({ title: 'XSS', severity: 'medium', fingerprint: 'xss-search', location: 'src/search.ts:3' });
    expect(first.status).toBe(201);
    const again = await record({ title: 'Reflected XSS', severity: 'high', fingerprint: 'xss-search', location: 'src/search.ts:4' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.body.id, title: 'Reflected XSS', severity: 'high', original_severity: 'high', location: 'src/search.ts:4', status: 'open' });
    expect(await h.deps.prisma.finding.count({ where: { assessmentId: running.id, fingerprint: 'xss-search' } })).toBe(1);
    expect(await eventsOf(h, org.id, 'finding.created', { finding_id: first.body.id })).toHaveLength(1);
    // Another assessment's identical fingerprint is another finding.
    const second = await insertAssessmentIn(h, org.id, project.id, 'running');
    const elsewhere = await record({ title: 'XSS', severity: 'medium', fingerprint: 'xss-search' }, second.id);
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.id).not.toBe(first.body.id);
  });

  it('a re-report keeps a severity someone overrode, and the triage status', async () => {
    const first = await record({ title: 'Weak TLS', severity: 'low', fingerprint: 'tls' });
    await act(first.body.id, 'severity', org.admin.token, { severity: 'high' }).expect(200);
    await act(first.body.id, 'confirm').expect(200);
    const again = await record({ title: 'Weak TLS', severity: 'medium', fingerprint: 'tls' });
    expect(again.body).toMatchObject({ severity: 'high', original_severity: 'medium', status: 'confirmed' });
  });

  it('concurrent reports of one fingerprint make one finding and one finding.created', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, () => record({ title: 'Race', severity: 'low', fingerprint: 'race-fp' })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(await eventsOf(h, org.id, 'finding.created', { finding_id: results[0].body.id })).toHaveLength(1);
  });

  it('validates the body: 400 for shape, 422 for a severity outside the list', async () => {
    for (const body of [{ severity: 'low', fingerprint: 'f' }, { title: 't', severity: 'low' }, { title: 't', fingerprint: 'f' }, { title: 't', severity: 'low', fingerprint: 'f', status: 'fixed' }]) {
      expect((await record(body)).status).toBe(400);
    }
    const bad = await record({ title: 't', severity: 'urgent', fingerprint: 'f-urgent' });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toContain('critical');
    expect(await h.deps.prisma.finding.count({ where: { fingerprint: 'f-urgent' } })).toBe(0);
  });

  it('refuses text PostgreSQL cannot store (a NUL character) with 400, recording nothing', async () => {
    const res = await record({ title: 'a\u0000b', severity: 'low', fingerprint: 'f-nul' });
    expect(res.status).toBe(400);
    expect(await h.deps.prisma.finding.count({ where: { fingerprint: 'f-nul' } })).toBe(0);
  });
});

describe('triage and the transition table', () => {
  it('confirm publishes finding.confirmed and finding.status_changed (status, previous_status)', async () => {
    const f = await insertFinding(h, running, { severity: 'high', location: 'api/orders' });
    const res = await act(f.id, 'confirm', org.member.token);
    // A member holds findings:triage but needs write access to the assessment.
    expect(res.status).toBe(404);
    await insertGrant(h, org.id, { projectId: project.id }, { userId: org.member.id }, 'read');
    expect((await act(f.id, 'confirm', org.member.token)).status).toBe(403);
    await insertGrant(h, org.id, { assessmentId: running.id }, { userId: org.member.id }, 'write');
    const ok = await act(f.id, 'confirm', org.member.token);
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe('confirmed');

    const data = eventData({ ...f, status: 'confirmed' });
    const [confirmed] = await eventsOf(h, org.id, 'finding.confirmed', { finding_id: f.id });
    expect(confirmed.data).toEqual(data);
    await expectFannedOut(confirmed.id, 'finding.confirmed', data);
    const [changed, ...more] = await eventsOf(h, org.id, 'finding.status_changed', { finding_id: f.id });
    expect(more).toHaveLength(0);
    expect(changed.data).toEqual({ ...data, previous_status: 'open' });
    await expectFannedOut(changed.id, 'finding.status_changed', { ...data, previous_status: 'open' });
  });

  const ACTIONS: Array<[string, FindingStatus]> = [
    ['confirm', 'confirmed'],
    ['dismiss', 'dismissed'],
    ['accept-risk', 'accepted_risk'],
    ['suppress', 'suppressed'],
    ['mark-fixed', 'fixed'],
  ];
  const FROM: FindingStatus[] = ['open', 'confirmed', 'dismissed', 'accepted_risk', 'suppressed', 'fixed', 'regressed'];
  const matrix = FROM.flatMap((from) => ACTIONS.map(([action, to]) => [from, action, to, FINDING_TRANSITIONS[from].includes(to)] as const));

  it.each(matrix)('from %s, %s (-> %s): allowed %s', async (from, action, to, allowed) => {
    const f = await insertFinding(h, running, { status: from });
    const res = await act(f.id, action);
    const row = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: f.id } });
    const changes = await eventsOf(h, org.id, 'finding.status_changed', { finding_id: f.id });
    if (allowed) {
      expect(res.status).toBe(200);
      expect(row.status).toBe(to);
      expect(changes.map((e) => [e.data.previous_status, e.data.status])).toEqual([[from, to]]);
    } else {
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain(from);
      expect(row.status).toBe(from);
      expect(changes).toHaveLength(0);
    }
  });

  it('suppressed is final; fixed sets fixed_at and only a regression reopens it, restarting the SLA window', async () => {
    const f = await insertFinding(h, running, { openedAt: new Date(Date.now() - 30 * 86400_000), slaBreachedAt: new Date() });
    const fixed = await act(f.id, 'mark-fixed');
    expect(fixed.body).toMatchObject({ status: 'fixed', fixed_at: expect.any(String), sla_due_at: null });
    for (const [action] of ACTIONS) expect((await act(f.id, action)).status).toBe(409);

    // The regression path (monitoring, built elsewhere) reuses changeFindingStatus.
    const at = new Date(Date.now() + 1000);
    const row = await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: f.id } });
    const regressed = await withOutbox(outboxDeps(h.deps, h.deps.deliveryQueue), (tx, publish) => changeFindingStatus(scopedTo(tx, row), publish, row, 'regressed', at));
    expect(regressed).toMatchObject({ status: 'regressed', fixedAt: null, slaBreachedAt: null, openedAt: at });
    const changes = await eventsOf(h, org.id, 'finding.status_changed', { finding_id: f.id });
    expect(changes.map((e) => e.data.status)).toEqual(['fixed', 'regressed']);
    expect(changes[1].data.previous_status).toBe('fixed');

    const s = await insertFinding(h, running);
    await act(s.id, 'suppress').expect(200);
    for (const [action] of ACTIONS) expect((await act(s.id, action)).status).toBe(409);
  });

  it('changeFindingStatus refuses a stale read (409) without publishing', async () => {
    const f = await insertFinding(h, running);
    await act(f.id, 'dismiss').expect(200);
    await expect(
      withOutbox(outboxDeps(h.deps, h.deps.deliveryQueue), (tx, publish) => changeFindingStatus(scopedTo(tx, f), publish, f, 'confirmed', new Date())),
    ).rejects.toMatchObject({ status: 409 });
    expect((await eventsOf(h, org.id, 'finding.status_changed', { finding_id: f.id })).map((e) => e.data.status)).toEqual(['dismissed']);
  });

  it('respects subscription filters on severity and status', async () => {
    const a = await insertAssessmentIn(h, org.id, project.id, 'running');
    const criticalOnly = await subscribe(h, org.admin.token, { assessmentId: a.id }, FINDING_EVENTS, { severity_filter: ['critical'] });
    const confirmedOnly = await subscribe(h, org.admin.token, { assessmentId: a.id }, FINDING_EVENTS, { status_filter: ['confirmed'] });
    const low = await record({ title: 'low', severity: 'low', fingerprint: 'filters-low' }, a.id);
    const critical = await record({ title: 'crit', severity: 'critical', fingerprint: 'filters-crit' }, a.id);
    const [lowEvent] = await eventsOf(h, org.id, 'finding.created', { finding_id: low.body.id });
    const [critEvent] = await eventsOf(h, org.id, 'finding.created', { finding_id: critical.body.id });
    expect((await deliveriesOf(h, lowEvent.id)).has(criticalOnly)).toBe(false);
    expect((await deliveriesOf(h, critEvent.id)).has(criticalOnly)).toBe(true);
    expect((await deliveriesOf(h, critEvent.id)).has(confirmedOnly)).toBe(false);
    await act(low.body.id, 'confirm').expect(200);
    const [confirmed] = await eventsOf(h, org.id, 'finding.confirmed', { finding_id: low.body.id });
    expect((await deliveriesOf(h, confirmed.id)).has(confirmedOnly)).toBe(true);
    expect((await deliveriesOf(h, confirmed.id)).has(criticalOnly)).toBe(false);
  });
});

describe('severity and reassignment', () => {
  it('overrides the severity (original kept) without a status event; 422 outside the list; 400 without a body', async () => {
    const f = await insertFinding(h, running, { severity: 'low' });
    const res = await act(f.id, 'severity', org.manager.token, { severity: 'critical' });
    expect(res.status).toBe(404); // the manager has the scope but no access yet
    await insertGrant(h, org.id, { assessmentId: running.id }, { userId: org.manager.id }, 'write');
    const ok = await act(f.id, 'severity', org.manager.token, { severity: 'critical' });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ severity: 'critical', original_severity: 'low', status: 'open' });
    expect((await act(f.id, 'severity', org.admin.token, { severity: 'urgent' })).status).toBe(422);
    expect((await act(f.id, 'severity', org.admin.token, {})).status).toBe(400);
    expect(await eventsOf(h, org.id, 'finding.status_changed', { finding_id: f.id })).toHaveLength(0);
  });

  it('assigns to a member of the organization, refuses outsiders (422), unassigns with null', async () => {
    const f = await insertFinding(h, running);
    const ok = await act(f.id, 'reassign', org.admin.token, { assignee_user_id: org.member.id });
    expect(ok.status).toBe(200);
    expect(ok.body.assignee_user_id).toBe(org.member.id);
    expect((await act(f.id, 'reassign', org.admin.token, { assignee_user_id: other.member.id })).status).toBe(422);
    expect((await act(f.id, 'reassign', org.admin.token, { assignee_user_id: 'usr_00000000000000000000000000' })).status).toBe(422);
    expect((await act(f.id, 'reassign', org.admin.token, {})).status).toBe(400);
    const cleared = await act(f.id, 'reassign', org.admin.token, { assignee_user_id: null });
    expect(cleared.body.assignee_user_id).toBeNull();
  });
});

describe('scopes by role', () => {
  it.each([
    ['severity', 'findings:edit_severity', 'member', { severity: 'low' }],
    ['accept-risk', 'findings:accept_risk', 'member', undefined],
    ['suppress', 'findings:suppress', 'member', undefined],
    ['suppress', 'findings:suppress', 'manager', undefined],
  ] as const)('%s needs %s: a %s gets 403 naming it', async (action, scope, role, body) => {
    const f = await insertFinding(h, running);
    const res = await act(f.id, action, org[role].token, body);
    expect(res.status).toBe(403);
    expect(res.body.detail).toContain(scope);
  });

  it('a key without findings:triage or findings:read gets 403 naming the scope', async () => {
    const f = await insertFinding(h, running);
    const key = await createKey(h, org.admin.token, ['assessments:read']);
    for (const action of ['confirm', 'dismiss', 'mark-fixed', 'reassign']) {
      const res = await act(f.id, action, key, action === 'reassign' ? { assignee_user_id: null } : undefined);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('findings:triage');
    }
    for (const path of ['/api/v1/findings', `/api/v1/findings/${f.id}`]) {
      const res = await api().get(path).set(bearer(key));
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('findings:read');
    }
  });

  it('the owner can do everything', async () => {
    const f = await insertFinding(h, running);
    await act(f.id, 'accept-risk', org.owner.token).expect(200);
    await act(f.id, 'suppress', org.owner.token).expect(200);
  });
});

describe('another organization', () => {
  it('gets 404 on every finding route and never sees the findings in its lists', async () => {
    const f = await insertFinding(h, running);
    const token = other.owner.token;
    expect((await api().get(`/api/v1/findings/${f.id}`).set(bearer(token))).status).toBe(404);
    for (const action of ['confirm', 'dismiss', 'mark-fixed', 'accept-risk', 'suppress']) expect((await act(f.id, action, token)).status).toBe(404);
    expect((await act(f.id, 'reassign', token, { assignee_user_id: null })).status).toBe(404);
    expect((await act(f.id, 'severity', token, { severity: 'low' })).status).toBe(404);
    const otherEngine = await createKey(h, other.admin.token, ['assessments:update']);
    expect((await record({ title: 't', severity: 'low', fingerprint: 'x-org' }, running.id, otherEngine)).status).toBe(404);
    const list = await api().get(`/api/v1/findings?limit=100&assessment_id=${running.id}`).set(bearer(token));
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([]);
    expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: f.id } })).status).toBe('open');
  });
});

describe('GET /findings and /findings/{id}', () => {
  let a: { id: string; organizationId: string; projectId: string };
  let ids: Record<string, string>;

  beforeAll(async () => {
    const p = await insertProject(h, org.id);
    a = await insertAssessmentIn(h, org.id, p.id, 'running');
    const mk = (severity: string, status: string, assigneeId: string | null = null) =>
      insertFinding(h, a, { severity, status, assigneeId }).then((f) => f.id);
    ids = {
      critOpen: await mk('critical', 'open', org.member.id),
      highConfirmed: await mk('high', 'confirmed'),
      lowFixed: await mk('low', 'fixed', org.member.id),
      infoDismissed: await mk('info', 'dismissed'),
    };
  });

  const list = async (query: string, token = org.admin.token) => {
    const res = await api().get(`/api/v1/findings?assessment_id=${a.id}&limit=100${query}`).set(bearer(token));
    expect(res.status).toBe(200);
    return (res.body.data as Array<{ id: string }>).map((f) => f.id).sort();
  };

  it('filters by severity, status (one or a comma-separated list), project, assignee', async () => {
    expect(await list('')).toEqual(Object.values(ids).sort());
    expect(await list('&severity=critical')).toEqual([ids.critOpen]);
    expect(await list('&severity=critical,high')).toEqual([ids.critOpen, ids.highConfirmed].sort());
    expect(await list('&status=fixed,dismissed')).toEqual([ids.lowFixed, ids.infoDismissed].sort());
    expect(await list(`&project_id=${a.projectId}&status=open`)).toEqual([ids.critOpen]);
    expect(await list(`&project_id=${project.id}`)).toEqual([]);
    expect(await list(`&assignee=${org.member.id}`)).toEqual([ids.critOpen, ids.lowFixed].sort());
    expect(await list('&assignee=none')).toEqual([ids.highConfirmed, ids.infoDismissed].sort());
    expect(await list('&assignee=me')).toEqual([]);
  });

  it('refuses filter values outside their lists with 422 and bad query shapes with 400', async () => {
    expect((await api().get('/api/v1/findings?severity=urgent').set(bearer(org.admin.token))).status).toBe(422);
    expect((await api().get('/api/v1/findings?status=closed,open').set(bearer(org.admin.token))).status).toBe(422);
    expect((await api().get('/api/v1/findings?limit=0').set(bearer(org.admin.token))).status).toBe(400);
    expect((await api().get('/api/v1/findings?bogus=1').set(bearer(org.admin.token))).status).toBe(400);
  });

  it('paginates newest first with next_cursor', async () => {
    const res1 = await api().get(`/api/v1/findings?assessment_id=${a.id}&limit=3`).set(bearer(org.admin.token));
    expect(res1.body.data).toHaveLength(3);
    expect(res1.body.next_cursor).toEqual(res1.body.data[2].id);
    const res2 = await api().get(`/api/v1/findings?assessment_id=${a.id}&limit=3&cursor=${res1.body.next_cursor}`).set(bearer(org.admin.token));
    expect(res2.body).toEqual({ data: [expect.objectContaining({ id: ids.critOpen })], next_cursor: null });
  });

  it('shows only findings of assessments the caller can read', async () => {
    expect(await list('', org.manager.token)).toEqual([]);
    expect((await api().get(`/api/v1/findings/${ids.critOpen}`).set(bearer(org.manager.token))).status).toBe(404);
    await insertGrant(h, org.id, { projectId: a.projectId }, { userId: org.manager.id }, 'read');
    expect(await list('', org.manager.token)).toEqual(Object.values(ids).sort());
    const one = await api().get(`/api/v1/findings/${ids.critOpen}`).set(bearer(org.manager.token));
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: ids.critOpen, severity: 'critical', status: 'open', assignee_user_id: org.member.id });
    expect((await api().get('/api/v1/findings/fnd_00000000000000000000000000').set(bearer(org.admin.token))).status).toBe(404);
  });
});
