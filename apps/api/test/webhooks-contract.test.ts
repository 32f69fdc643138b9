// The small contract points of the webhook routes: a malformed cursor is a 400, the test route refuses a disabled
// subscription with 409, the previous secret's expiry disappears once its grace period ended, and project
// subscriptions receive the project-level events (pr_review.completed, a project's spend.*), as DESIGN.md decides.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { createKey, deliveriesOf, eventsOf, subscribe } from './support/domain';

let h: Harness;
let org: TestOrg;

// A grace period of 1.5 seconds instead of 72 hours, so its end can be observed.
const GRACE_SECONDS = 1.5;

beforeAll(async () => {
  h = await createHarness({ WEBHOOK_SECRET_GRACE_HOURS: String(GRACE_SECONDS / 3600) });
  org = await createOrg(h);
});
afterAll(() => h.close());

const api = () => request(h.app);

describe('cursor', () => {
  it.each(['/api/v1/webhooks/subscriptions', '/api/v1/webhooks/deliveries'])('%s answers 400 for cursor zzz', async (path) => {
    const res = await api().get(`${path}?cursor=zzz`).set(bearer(org.admin.token));
    expect(res.status).toBe(400);
    expect(res.body.detail).toMatch(/cursor/);
  });

  it('still pages with the next_cursor it returned', async () => {
    const fresh = await createOrg(h);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await subscribe(h, fresh.admin.token, { org: true }, ['finding.created']));
    const first = await api().get('/api/v1/webhooks/subscriptions?limit=2').set(bearer(fresh.admin.token));
    expect(first.status).toBe(200);
    const second = await api().get(`/api/v1/webhooks/subscriptions?limit=2&cursor=${first.body.next_cursor}`).set(bearer(fresh.admin.token));
    expect(second.status).toBe(200);
    expect([...first.body.data, ...second.body.data].map((s: { id: string }) => s.id).sort()).toEqual(ids.sort());
  });
});

describe('test route on a disabled subscription', () => {
  it('answers 409 naming the state and creates no delivery; re-activated, it sends', async () => {
    const id = await subscribe(h, org.admin.token, { org: true }, ['finding.created']);
    const url = `/api/v1/webhooks/subscriptions/${id}`;
    await api().patch(url).set(bearer(org.admin.token)).send({ active: false }).expect(200);
    const refused = await api().post(`${url}/test`).set(bearer(org.admin.token));
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/disabled/);
    expect(await h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: id } })).toBe(0);
    await api().patch(url).set(bearer(org.admin.token)).send({ active: true }).expect(200);
    expect((await api().post(`${url}/test`).set(bearer(org.admin.token))).status).toBe(202);
    expect(await h.deps.prisma.webhookDelivery.count({ where: { subscriptionId: id } })).toBe(1);
  });
});

describe('previous_secret_expires_at', () => {
  it('shows the end of the grace period while it runs and null once it passed, in GET and in the list', async () => {
    const fresh = await createOrg(h);
    const id = await subscribe(h, fresh.admin.token, { org: true }, ['finding.created']);
    const url = `/api/v1/webhooks/subscriptions/${id}`;
    const rotated = await api().post(`${url}/rotate-secret`).set(bearer(fresh.admin.token));
    expect(rotated.status).toBe(200);
    const during = await api().get(url).set(bearer(fresh.admin.token));
    expect(during.body.previous_secret_expires_at).toBe(rotated.body.previous_secret_expires_at);
    const waitMs = Date.parse(rotated.body.previous_secret_expires_at) - Date.now() + 100;
    await new Promise((resolve) => setTimeout(resolve, Math.max(waitMs, 0)));
    const after = await api().get(url).set(bearer(fresh.admin.token));
    expect(after.status).toBe(200);
    expect(after.body.previous_secret_expires_at).toBeNull();
    const list = await api().get('/api/v1/webhooks/subscriptions').set(bearer(fresh.admin.token));
    expect(list.body.data.find((s: { id: string }) => s.id === id).previous_secret_expires_at).toBeNull();
  });
});

describe('project-level events', () => {
  it('pr_review.completed reaches the project subscription and the organization one, not another project', async () => {
    const fresh = await createOrg(h);
    const [p, q] = [await insertProject(h, fresh.id), await insertProject(h, fresh.id)];
    const projectSub = await subscribe(h, fresh.admin.token, { projectId: p.id }, ['pr_review.completed']);
    const otherProjectSub = await subscribe(h, fresh.admin.token, { projectId: q.id }, ['pr_review.completed']);
    const orgSub = await subscribe(h, fresh.admin.token, { org: true }, ['pr_review.completed']);
    const engine = await createKey(h, fresh.admin.token, ['assessments:update', 'projects:read']);
    const review = await api()
      .post(`/api/v1/projects/${p.id}/pr-reviews`)
      .set(bearer(engine))
      .send({ repository: 'acme/shop', pr_number: 7, verdict: 'approved', findings_count: 0 });
    expect(review.status).toBe(201);
    const [event] = await eventsOf(h, fresh.id, 'pr_review.completed', { pr_review_id: review.body.id });
    const deliveries = await deliveriesOf(h, event.id);
    expect(deliveries.has(projectSub)).toBe(true);
    expect(deliveries.has(orgSub)).toBe(true);
    expect(deliveries.has(otherProjectSub)).toBe(false);
  });
});
