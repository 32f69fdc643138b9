import pg from 'pg';
import request from 'supertest';
import { pgFields } from '@svc/db';
import { EVENT_TYPES, OPERATIONAL_EVENT_TYPES } from '@svc/webhooks';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, type TestOrg } from './support/fixtures';
import { createAssessment, createProject } from './support/resources';

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let projectId: string;
let assessmentId: string;

const PUBLIC_URL = 'https://203.0.114.10/hooks'; // outside the documentation ranges: a public address

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  projectId = (await createProject(h, org.id)).id;
  assessmentId = (await createAssessment(h, org.id, projectId)).id;
});
afterAll(() => h.close());

const base = {
  org: () => '/api/v1/webhooks',
  project: () => `/api/v1/projects/${projectId}/webhooks`,
  assessment: () => `/api/v1/assessments/${assessmentId}/webhooks`,
};

function create(path: string, token: string, body: Record<string, unknown> = {}) {
  return request(h.app)
    .post(`${path}/subscriptions`)
    .set(bearer(token))
    .send({ name: 'SIEM', url: PUBLIC_URL, events: ['finding.created'], ...body });
}

describe('creating subscriptions', () => {
  it('returns the whsec_ secret once; reads and lists never show it', async () => {
    const res = await create(base.org(), org.admin.token, { severity_filter: ['critical', 'high'] });
    expect(res.status).toBe(201);
    // Standard base64 of 32 bytes: the form the Standard Webhooks libraries decode.
    expect(res.body.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(res.body).toMatchObject({
      name: 'SIEM', url: PUBLIC_URL, events: ['finding.created'], active: true, status: 'active',
      severity_filter: ['critical', 'high'], status_filter: null, payload_format: 'service', level: 'organization',
      signature_scheme: 'service',
    });
    const read = await request(h.app).get(`${base.org()}/subscriptions/${res.body.id}`).set(bearer(org.admin.token));
    expect(read.status).toBe(200);
    expect(read.body.secret).toBeUndefined();
    const list = await request(h.app).get(`${base.org()}/subscriptions`).set(bearer(org.admin.token));
    expect(JSON.stringify(list.body)).not.toContain(res.body.secret);
    const row = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.secretEnc).not.toContain(res.body.secret.slice(6));
  });

  it.each([
    ['an http URL', { url: 'http://203.0.114.10/hook' }],
    ['a private address', { url: 'https://10.1.2.3/hook' }],
    ['loopback', { url: 'https://127.0.0.1/hook' }],
    ['localhost', { url: 'https://localhost/hook' }],
    ['cloud metadata', { url: 'https://169.254.169.254/latest' }],
    ['IPv4-mapped loopback', { url: 'https://[::ffff:127.0.0.1]/hook' }],
    ['an unknown event type', { events: ['finding.exploded'] }],
    ['a severity outside the list', { severity_filter: ['urgent'] }],
    ['a status outside the list', { status_filter: ['closed'] }],
    ['an unknown payload format', { payload_format: 'xml' }],
    ['an unknown signature scheme', { signature_scheme: 'svix' }],
  ])('refuses %s with 422 and creates nothing', async (_label, body) => {
    const before = await h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id } });
    const res = await create(base.org(), org.admin.token, body);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ detail: expect.any(String) });
    expect(await h.deps.prisma.webhookSubscription.count({ where: { organizationId: org.id } })).toBe(before);
  });

  it('answers 400 for a body that does not match the schema', async () => {
    expect((await create(base.org(), org.admin.token, { name: undefined, events: 'finding.created' })).status).toBe(400);
    expect((await create(base.org(), org.admin.token, { events: [] })).status).toBe(400);
    expect((await create(base.org(), org.admin.token, { active: 'yes please' })).status).toBe(400);
  });

  it('accepts a loopback receiver only when the operator allow-list names it', async () => {
    const dev = await createHarness({ WEBHOOK_ALLOWED_HOSTS: '127.0.0.1:8443' });
    try {
      const devOrg = await createOrg(dev);
      const ok = await request(dev.app).post('/api/v1/webhooks/subscriptions').set(bearer(devOrg.admin.token))
        .send({ name: 'local', url: 'https://127.0.0.1:8443/hook', events: ['webhook.test'] });
      expect(ok.status).toBe(201);
      const otherPort = await request(dev.app).post('/api/v1/webhooks/subscriptions').set(bearer(devOrg.admin.token))
        .send({ name: 'local', url: 'https://127.0.0.1:9443/hook', events: ['webhook.test'] });
      expect(otherPort.status).toBe(422);
    } finally {
      await dev.close();
    }
  });
});

describe('role rules and scopes', () => {
  it('names the missing scope for roles without webhook access', async () => {
    for (const user of [org.manager, org.member]) {
      const res = await create(base.org(), user.token);
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain('webhooks:create');
      const list = await request(h.app).get(`${base.project()}/subscriptions`).set(bearer(user.token));
      expect(list.status).toBe(403);
      expect(list.body.detail).toContain('webhooks:read');
    }
  });

  it('lets an owner use all three levels', async () => {
    for (const path of Object.values(base)) expect((await create(path(), org.owner.token)).status).toBe(201);
  });
});

describe('levels are kept apart', () => {
  it('never shows or changes another level\'s subscriptions', async () => {
    const atProject = await create(base.project(), org.admin.token, { name: 'project hook' });
    const atAssessment = await create(base.assessment(), org.admin.token, { name: 'assessment hook' });
    expect(atProject.body).toMatchObject({ level: 'project', project_id: projectId, assessment_id: null });
    expect(atAssessment.body).toMatchObject({ level: 'assessment', assessment_id: assessmentId });

    const orgList = await request(h.app).get(`${base.org()}/subscriptions?limit=100`).set(bearer(org.admin.token));
    const orgIds = orgList.body.data.map((s: { id: string }) => s.id);
    expect(orgIds).not.toContain(atProject.body.id);
    expect(orgIds).not.toContain(atAssessment.body.id);
    for (const s of orgList.body.data) expect(s.level).toBe('organization');

    expect((await request(h.app).get(`${base.org()}/subscriptions/${atProject.body.id}`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await request(h.app).delete(`${base.assessment()}/subscriptions/${atProject.body.id}`).set(bearer(org.admin.token))).status).toBe(404);
    expect((await request(h.app).patch(`${base.project()}/subscriptions/${atAssessment.body.id}`).set(bearer(org.admin.token)).send({ name: 'x' })).status).toBe(404);
    const projectList = await request(h.app).get(`${base.project()}/subscriptions?limit=100`).set(bearer(org.admin.token));
    expect(projectList.body.data.map((s: { id: string }) => s.id)).toEqual(
      expect.arrayContaining([atProject.body.id]),
    );
    expect(projectList.body.data.map((s: { id: string }) => s.id)).not.toContain(atAssessment.body.id);
  });
});

describe('an assessment deleted while a subscription is created under it', () => {
  it('answers 409 with the error envelope, not 500, and creates and records nothing', async () => {
    const doomed = (await createAssessment(h, org.id, projectId, 'Doomed')).id;
    // A deletion holds the assessment's row (as DELETE /assessments/:id does) while the subscription's INSERT waits
    // for its foreign key; the deletion then commits.
    const holder = new pg.Client(pgFields(h.config.databaseUrl));
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM assessments WHERE id = $1 FOR UPDATE', [doomed]);
      const creating = create(`/api/v1/assessments/${doomed}/webhooks`, org.admin.token, { name: 'raced' }).then((res) => res);
      await waitFor(async () => {
        const { rows } = await h.deps.prisma.$queryRaw<Array<{ n: number }>>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%webhook_subscriptions%'`.then((r) => ({ rows: r }));
        return rows[0]!.n > 0;
      });
      await holder.query('DELETE FROM assessments WHERE id = $1', [doomed]);
      await holder.query('COMMIT');
      const res = await creating;
      expect(res.status).toBe(409);
      expect(res.body).toEqual({ detail: expect.stringContaining('was deleted while it ran') });
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
    expect(await h.deps.prisma.webhookSubscription.count({ where: { assessmentId: doomed } })).toBe(0);
    expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'webhook.subscription_created', metadata: { path: ['assessment_id'], equals: doomed } } })).toBe(0);
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('updating, rotating, deleting', () => {
  it('PATCH updates fields, re-checks every URL change, and maps active to the status', async () => {
    const { body } = await create(base.org(), org.admin.token);
    const url = `${base.org()}/subscriptions/${body.id}`;
    const renamed = await request(h.app).patch(url).set(bearer(org.admin.token))
      .send({ name: 'renamed', events: ['report.ready', 'finding.created'], status_filter: ['open'], payload_format: 'cef' });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ name: 'renamed', events: ['report.ready', 'finding.created'], status_filter: ['open'], payload_format: 'cef' });
    const unsafe = await request(h.app).patch(url).set(bearer(org.admin.token)).send({ url: 'https://192.168.1.1/x' });
    expect(unsafe.status).toBe(422);
    expect((await request(h.app).get(url).set(bearer(org.admin.token))).body.url).toBe(PUBLIC_URL);
    const off = await request(h.app).patch(url).set(bearer(org.admin.token)).send({ active: false });
    expect(off.body).toMatchObject({ active: false, status: 'disabled' });
    await h.deps.prisma.webhookSubscription.update({ where: { id: body.id }, data: { consecutiveFailures: 4 } });
    const on = await request(h.app).patch(url).set(bearer(org.admin.token)).send({ active: true });
    expect(on.body).toMatchObject({ active: true, status: 'active' });
    const row = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: body.id } });
    expect(row.consecutiveFailures).toBe(0);
    expect((await request(h.app).patch(url).set(bearer(org.admin.token)).send({})).status).toBe(400);
  });

  it('signature_scheme: chosen at creation, changed by PATCH, shown on read; an unknown scheme answers 422 and changes nothing', async () => {
    const created = await create(base.org(), org.admin.token, { signature_scheme: 'standard_webhooks' });
    expect(created.status).toBe(201);
    expect(created.body.signature_scheme).toBe('standard_webhooks');
    const url = `${base.org()}/subscriptions/${created.body.id}`;
    expect((await request(h.app).get(url).set(bearer(org.admin.token))).body.signature_scheme).toBe('standard_webhooks');
    const bad = await request(h.app).patch(url).set(bearer(org.admin.token)).send({ signature_scheme: 'hex' });
    expect(bad.status).toBe(422);
    expect(bad.body.detail).toMatch(/signature_scheme must be one of service, standard_webhooks/);
    expect((await request(h.app).get(url).set(bearer(org.admin.token))).body.signature_scheme).toBe('standard_webhooks');
    const back = await request(h.app).patch(url).set(bearer(org.admin.token)).send({ signature_scheme: 'service' });
    expect(back.status).toBe(200);
    expect(back.body.signature_scheme).toBe('service');
    const listed = await request(h.app).get(`${base.org()}/subscriptions`).set(bearer(org.admin.token));
    expect(listed.body.data.find((s: { id: string }) => s.id === created.body.id).signature_scheme).toBe('service');
    const audit = await h.deps.prisma.auditEvent.findFirstOrThrow({
      where: { targetId: created.body.id, action: 'webhook.subscription_updated' },
      orderBy: { createdAt: 'desc' },
    });
    expect(audit.metadata).toMatchObject({ fields: ['signature_scheme'], signature_scheme: 'service' });
  });

  it('rotate-secret returns a new secret and keeps the previous one for 72 hours', async () => {
    const { body } = await create(base.org(), org.admin.token);
    const rotated = await request(h.app).post(`${base.org()}/subscriptions/${body.id}/rotate-secret`).set(bearer(org.admin.token));
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(body.secret);
    const graceMs = new Date(rotated.body.previous_secret_expires_at).getTime() - Date.now();
    expect(graceMs).toBeGreaterThan(72 * 3600e3 - 60e3);
    expect(graceMs).toBeLessThanOrEqual(72 * 3600e3);
  });

  it('soft-deletes: the subscription disappears but its row stays', async () => {
    const { body } = await create(base.org(), org.admin.token);
    const del = await request(h.app).delete(`${base.org()}/subscriptions/${body.id}`).set(bearer(org.admin.token));
    expect(del.status).toBe(204);
    expect((await request(h.app).get(`${base.org()}/subscriptions/${body.id}`).set(bearer(org.admin.token))).status).toBe(404);
    const row = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: body.id } });
    expect(row.deletedAt).not.toBeNull();
  });
});

describe('the 25-subscription limit', () => {
  it('refuses the 26th live subscription across all levels with 400; soft-deleted ones do not count', async () => {
    const limited = await createOrg(h);
    const p = await createProject(h, limited.id);
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) {
      const path = i % 2 ? '/api/v1/webhooks' : `/api/v1/projects/${p.id}/webhooks`;
      const res = await create(path, limited.admin.token, { name: `hook ${i}` });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    const refused = await create('/api/v1/webhooks', limited.admin.token, { name: 'one too many' });
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/25/);
    await request(h.app).delete(`/api/v1/webhooks/subscriptions/${ids[1]}`).set(bearer(limited.admin.token)).expect(204);
    expect((await create('/api/v1/webhooks', limited.admin.token, { name: 'fits again' })).status).toBe(201);
  });
});

describe('events, test deliveries and delivery logs', () => {
  it("lists SPEC's twelve event types and the six operational events, with a description each", async () => {
    const res = await request(h.app).get(`${base.org()}/events`).set(bearer(org.admin.token));
    expect(res.status).toBe(200);
    expect(res.body.data.map((e: { type: string }) => e.type).sort()).toEqual([...EVENT_TYPES].sort());
    expect(res.body.data).toHaveLength(18);
    for (const e of res.body.data) expect(e.description.length).toBeGreaterThan(10);
  });

  it('offers and accepts the operational events at the organization level only (422 below it, nothing changed)', async () => {
    const projectEvents = await request(h.app).get(`${base.project()}/events`).set(bearer(org.admin.token));
    expect(projectEvents.body.data.map((e: { type: string }) => e.type).sort()).toEqual(
      EVENT_TYPES.filter((t) => !(OPERATIONAL_EVENT_TYPES as readonly string[]).includes(t)).sort(),
    );
    const refused = await create(base.project(), org.admin.token, { events: ['report.ready', 'webhook.subscription_disabled'] });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toMatch(/webhook\.subscription_disabled are organization-level events/);
    const project = await create(base.project(), org.admin.token, { events: ['report.ready'] });
    expect(project.status).toBe(201);
    const patched = await request(h.app)
      .patch(`${base.project()}/subscriptions/${project.body.id}`)
      .set(bearer(org.admin.token))
      .send({ events: ['webhook.breaker_opened'] });
    expect(patched.status).toBe(422);
    const unchanged = await request(h.app).get(`${base.project()}/subscriptions/${project.body.id}`).set(bearer(org.admin.token));
    expect(unchanged.body.events).toEqual(['report.ready']);
    const org_ = await create(base.org(), org.admin.token, { events: [...OPERATIONAL_EVENT_TYPES] });
    expect(org_.status).toBe(201);
  });

  it('the test route creates one webhook.test delivery for that subscription only', async () => {
    const target = await create(base.project(), org.admin.token, { events: ['report.ready'] });
    const bystander = await create(base.project(), org.admin.token, { events: ['webhook.test'] });
    const res = await request(h.app).post(`${base.project()}/subscriptions/${target.body.id}/test`).set(bearer(org.admin.token));
    expect(res.status).toBe(202);
    expect(res.body.delivery_id).toMatch(/^whdel_/);
    expect(res.body.event_id).toMatch(/^event_/);

    const deliveries = await request(h.app)
      .get(`${base.project()}/deliveries?event_type=webhook.test&limit=100`).set(bearer(org.admin.token));
    expect(deliveries.status).toBe(200);
    const mine = deliveries.body.data.filter((d: { event_id: string }) => d.event_id === res.body.event_id);
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({
      id: res.body.delivery_id, subscription_id: target.body.id, status: 'pending', attempt_count: 0,
      payload: {
        id: res.body.delivery_id, event_id: res.body.event_id, type: 'webhook.test', organization_id: org.id,
        data: { kind: 'webhook.test', subscription_id: target.body.id },
      },
    });
    expect(mine[0].next_attempt_at).toEqual(expect.any(String));
    expect(await h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: bystander.body.id } })).toBe(0);

    const job = await h.deps.deliveryQueue.getJob(res.body.delivery_id);
    expect(job?.data).toEqual({ deliveryId: res.body.delivery_id });

    const attempts = await request(h.app)
      .get(`${base.project()}/deliveries/${res.body.delivery_id}/attempts`).set(bearer(org.admin.token));
    expect(attempts.status).toBe(200);
    expect(attempts.body).toEqual({ delivery_id: res.body.delivery_id, data: [] });
    expect((await request(h.app).get(`${base.org()}/deliveries/${res.body.delivery_id}/attempts`).set(bearer(org.admin.token))).status).toBe(404);
  });

  it('filters deliveries by status and subscription, and validates the filters', async () => {
    const { body } = await create(base.org(), org.admin.token, { events: ['webhook.test'] });
    await request(h.app).post(`${base.org()}/subscriptions/${body.id}/test`).set(bearer(org.admin.token)).expect(202);
    const pending = await request(h.app).get(`${base.org()}/deliveries?status=pending&subscription_id=${body.id}`).set(bearer(org.admin.token));
    expect(pending.body.data).toHaveLength(1);
    const succeeded = await request(h.app).get(`${base.org()}/deliveries?status=succeeded&subscription_id=${body.id}`).set(bearer(org.admin.token));
    expect(succeeded.body.data).toHaveLength(0);
    expect((await request(h.app).get(`${base.org()}/deliveries?status=lost`).set(bearer(org.admin.token))).status).toBe(400);
    expect((await request(h.app).get(`${base.org()}/deliveries?since=yesterday`).set(bearer(org.admin.token))).status).toBe(400);
  });
});

describe('cross-organization access', () => {
  it('answers 404 on every webhook route of every level for another organization\'s resources', async () => {
    const sub = await create(base.org(), org.admin.token, { events: ['webhook.test'] });
    const projectSub = await create(base.project(), org.admin.token, { events: ['webhook.test'] });
    const test = await request(h.app).post(`${base.org()}/subscriptions/${sub.body.id}/test`).set(bearer(org.admin.token));
    const webhookRoutes = h.app.locals.routes.filter((r) => r.path.includes('/webhooks/'));
    expect(webhookRoutes).toHaveLength(42);
    let checked = 0;
    for (const route of webhookRoutes) {
      const isOrgLevel = route.path.startsWith('/webhooks');
      if (isOrgLevel && !route.path.includes(':id')) continue; // org-level collections are the caller's own org
      const path = route.path
        .replace(':projectId', projectId)
        .replace(':assessmentId', assessmentId)
        .replace(':id', route.path.includes('/deliveries/') ? test.body.delivery_id : isOrgLevel ? sub.body.id : projectSub.body.id);
      const res = await request(h.app)[route.method](`/api/v1${path}`).set(bearer(other.owner.token))
        .send(route.method === 'post' && route.path.endsWith('/subscriptions') ? { name: 'x', url: PUBLIC_URL, events: ['webhook.test'] } : route.method === 'patch' ? { name: 'stolen' } : route.path.endsWith('/recover') ? { since: new Date(Date.now() - 3600_000).toISOString() } : undefined);
      expect({ route: `${route.method} ${route.path}`, status: res.status }).toEqual({ route: `${route.method} ${route.path}`, status: 404 });
      checked++;
    }
    expect(checked).toBe(38);
    const untouched = await h.deps.prisma.webhookSubscription.findUniqueOrThrow({ where: { id: sub.body.id } });
    expect(untouched).toMatchObject({ name: 'SIEM', deletedAt: null });
  });
});
