// Fan-out end to end: an event reaches one delivery per matching subscription across the three levels, filters
// apply to finding events only, the test route reaches one subscription, and the management API shows what the
// worker recorded.
import { bearer, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { createWorld, levelBase, type CreatedSubscription, type Level, type World } from './support/world';

let w: World;
let projectP: string;
let projectQ: string;
let assessmentA: string;
let assessmentB: string;

beforeAll(async () => {
  w = await createWorld();
  projectP = (await insertProject(w.h, w.org.id)).id;
  projectQ = (await insertProject(w.h, w.org.id)).id;
  assessmentA = (await insertAssessment(w.h, w.org.id, projectP)).id;
  assessmentB = (await insertAssessment(w.h, w.org.id, projectP)).id;
});
afterAll(() => w?.close());

const ALL_EVENTS = ['assessment.completed', 'finding.created', 'report.ready'];

async function subscribeAt(name: string, level: Level, extra: Record<string, unknown> = {}): Promise<CreatedSubscription> {
  return w.subscribe({ name, url: w.receiver.url(`/${name}`), events: ALL_EVENTS, ...extra }, level);
}

async function deliveredSubscriptions(deliveryIds: string[]): Promise<string[]> {
  const deliveries = await Promise.all(deliveryIds.map((id) => w.waitForDelivery(id)));
  expect(deliveries.map((d) => d.status)).toEqual(deliveryIds.map(() => 'succeeded'));
  return deliveries.map((d) => d.subscriptionId).sort();
}

describe('subscription levels', () => {
  let subs: Record<'org' | 'p' | 'q' | 'a' | 'b', CreatedSubscription>;

  beforeAll(async () => {
    subs = {
      org: await subscribeAt('lvl-org', { level: 'organization' }),
      p: await subscribeAt('lvl-p', { level: 'project', projectId: projectP }),
      q: await subscribeAt('lvl-q', { level: 'project', projectId: projectQ }),
      a: await subscribeAt('lvl-a', { level: 'assessment', assessmentId: assessmentA }),
      b: await subscribeAt('lvl-b', { level: 'assessment', assessmentId: assessmentB }),
    };
  });

  it("delivers an event on assessment A of project P to the org-wide, P's and A's subscriptions only, once each", async () => {
    const published = await w.publish({
      type: 'assessment.completed',
      projectId: projectP,
      assessmentId: assessmentA,
      data: { assessment_id: assessmentA, project_id: projectP },
    });
    expect(published.deliveryIds).toHaveLength(3);
    expect(await deliveredSubscriptions(published.deliveryIds)).toEqual([subs.org.id, subs.p.id, subs.a.id].sort());

    for (const name of ['lvl-org', 'lvl-p', 'lvl-a']) {
      const [request] = await w.receiver.waitForRequests(`/${name}`, 1);
      expect(w.receiver.requests(`/${name}`)).toHaveLength(1);
      expect(JSON.parse(request.body.toString()).event_id).toBe(published.eventId);
    }
    const deliveryHeaders = ['lvl-org', 'lvl-p', 'lvl-a'].map((n) => w.receiver.requests(`/${n}`)[0].headers['x-service-delivery']);
    expect(new Set(deliveryHeaders).size).toBe(3);
    expect(w.receiver.requests('/lvl-q')).toHaveLength(0);
    expect(w.receiver.requests('/lvl-b')).toHaveLength(0);
    expect(await w.deliveriesOf(subs.q.id)).toHaveLength(0);
    expect(await w.deliveriesOf(subs.b.id)).toHaveLength(0);
  });

  it("delivers a project-only event to the org-wide and that project's subscriptions, and an org event to the org-wide one", async () => {
    const forQ = await w.publish({ type: 'report.ready', projectId: projectQ, data: { report_id: 'rep_q' } });
    expect(await deliveredSubscriptions(forQ.deliveryIds)).toEqual([subs.org.id, subs.q.id].sort());
    const orgOnly = await w.publish({ type: 'report.ready', data: { report_id: 'rep_org' } });
    expect(await deliveredSubscriptions(orgOnly.deliveryIds)).toEqual([subs.org.id]);
  });
});

describe('filters', () => {
  let filtered: CreatedSubscription;
  let unfiltered: CreatedSubscription;

  beforeAll(async () => {
    filtered = await subscribeAt('filtered', { level: 'organization' }, { severity_filter: ['critical', 'high'], status_filter: ['open'] });
    unfiltered = await subscribeAt('unfiltered', { level: 'organization' });
  });

  async function reached(type: string, data: Record<string, unknown>): Promise<string[]> {
    const published = await w.publish({ type: type as never, data });
    return deliveredSubscriptions(published.deliveryIds);
  }

  it('honours severity_filter and status_filter for finding events', async () => {
    const finding = { finding_id: 'fnd_1' };
    expect(await reached('finding.created', { ...finding, severity: 'high', status: 'open' })).toContain(filtered.id);
    expect(await reached('finding.created', { ...finding, severity: 'low', status: 'open' })).not.toContain(filtered.id);
    expect(await reached('finding.created', { ...finding, severity: 'critical', status: 'dismissed' })).not.toContain(filtered.id);
    expect(await reached('finding.created', { ...finding, severity: 'low', status: 'dismissed' })).toContain(unfiltered.id);
  });

  it('ignores both filters for other events', async () => {
    const reachedIds = await reached('assessment.completed', { assessment_id: 'asm_x', severity: 'low', status: 'dismissed' });
    expect(reachedIds).toEqual(expect.arrayContaining([filtered.id, unfiltered.id]));
  });
});

describe('the test route and the delivery log', () => {
  it('sends webhook.test to that subscription only, and the API shows the delivery and its attempt', async () => {
    const level: Level = { level: 'project', projectId: projectP };
    const target = await subscribeAt('test-route', level, { events: ['report.ready'] });
    const bystander = await subscribeAt('bystander', level);
    const auth = bearer(w.org.admin.token);

    const res = await w.api().post(`${levelBase(level)}/subscriptions/${target.id}/test`).set(auth);
    expect(res.status).toBe(202);
    const delivery = await w.waitForDelivery(res.body.delivery_id);
    expect(delivery).toMatchObject({ status: 'succeeded', subscriptionId: target.id, eventType: 'webhook.test', attemptCount: 1 });
    const [request] = await w.receiver.waitForRequests('/test-route', 1);
    expect(request.headers['x-service-event']).toBe('webhook.test');
    expect(JSON.parse(request.body.toString())).toMatchObject({ type: 'webhook.test', data: { kind: 'webhook.test' } });
    expect(await w.deliveriesOf(bystander.id)).toHaveLength(0);
    expect(await w.h.deps.prisma.webhookDelivery.count({ where: { eventId: res.body.event_id } })).toBe(1);

    const list = await w.api().get(`${levelBase(level)}/deliveries`).query({ subscription_id: target.id }).set(auth);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([
      expect.objectContaining({ id: delivery.id, status: 'succeeded', attempt_count: 1, next_attempt_at: null, event_type: 'webhook.test' }),
    ]);
    const attempts = await w.api().get(`${levelBase(level)}/deliveries/${delivery.id}/attempts`).set(auth);
    expect(attempts.status).toBe(200);
    expect(attempts.body.data).toEqual([
      expect.objectContaining({
        number: 1,
        outcome: 'success',
        response_status: 200,
        response_body: 'ok',
        response_headers: expect.objectContaining({ 'content-length': '2', 'content-type': 'text/plain' }),
        error: null,
      }),
    ]);
    expect(attempts.body.data[0].duration_ms).toBeGreaterThanOrEqual(0);
  });
});
