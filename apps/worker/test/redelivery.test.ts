// Resend and recover end to end, at the three levels: the API creates new deliveries, the real worker sends them
// to an HTTPS receiver on loopback, signed, with the new delivery id; a recovered window is not recovered twice;
// another organization's delivery is not found; both are audited.
import { verifySignature } from '@svc/webhooks';
import { bearer, createOrg, insertAssessment, insertProject } from '../../api/test/support/fixtures';
import { createWorld, levelBase, poll, type CreatedSubscription, type Level, type World } from './support/world';

let w: World;
let levels: Level[];
beforeAll(async () => {
  w = await createWorld();
  const projectId = (await insertProject(w.h, w.org.id)).id;
  const assessmentId = (await insertAssessment(w.h, w.org.id, projectId)).id;
  levels = [{ level: 'organization' }, { level: 'project', projectId }, { level: 'assessment', assessmentId }];
});
afterAll(() => w?.close());

const reply = (code: number) => ({ status: code, headers: { 'content-type': 'text/plain' }, body: `status ${code}` });
const admin = () => bearer(w.org.admin.token);

function publishFor(level: Level): Parameters<World['publish']>[0] {
  const anchor = level.level === 'project' ? { projectId: level.projectId } : level.level === 'assessment' ? { assessmentId: level.assessmentId } : {};
  return { type: 'report.ready', ...anchor, data: { report_id: 'rep_1' } };
}

async function subscribeAt(path: string, level: Level): Promise<CreatedSubscription> {
  return w.subscribe({ name: path.slice(1), url: w.receiver.url(path), events: ['report.ready'] }, level);
}

describe.each([0, 1, 2])('at level %i', (index) => {
  it('resends a delivery as a new, signed delivery of the same event and shows redelivery_of', async () => {
    const level = levels[index];
    const path = `/resend-${index}`;
    w.receiver.script(path, () => reply(200));
    const sub = await subscribeAt(path, level);
    const original = await w.publishTo(sub.id, publishFor(level));
    expect(original.status).toBe('succeeded');

    const res = await w.api().post(`${levelBase(level)}/deliveries/${original.id}/resend`).set(admin());
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ event_id: original.eventId, redelivery_of: original.id, status: 'pending' });
    expect(res.body.id).not.toBe(original.id);
    const again = await w.waitForDelivery(res.body.id);
    expect(again.status).toBe('succeeded');

    const requests = await w.receiver.waitForRequests(path, 2);
    const second = requests[1];
    expect(second.headers['x-service-delivery']).toBe(res.body.id);
    expect(verifySignature(second.body, second.headers['x-service-signature'] as string, sub.secret).ok).toBe(true);
    const body = JSON.parse(second.body.toString());
    expect(body).toMatchObject({ id: res.body.id, event_id: original.eventId, data: JSON.parse(requests[0].body.toString()).data });

    const read = await w.api().get(`${levelBase(level)}/deliveries/${res.body.id}`).set(admin());
    expect(read.status).toBe(200);
    expect(read.body.redelivery_of).toBe(original.id);
    const list = await w.api().get(`${levelBase(level)}/deliveries`).query({ subscription_id: sub.id }).set(admin());
    expect(list.body.data.map((d: { redelivery_of: string | null }) => d.redelivery_of).sort()).toEqual([original.id, null].sort());

    const audit = await w.h.deps.prisma.auditEvent.findMany({ where: { organizationId: w.org.id, action: 'webhook.delivery_resent', targetId: original.id } });
    expect(audit).toHaveLength(1);
  });
});

describe('recover', () => {
  it('re-queues the failed deliveries of a window once, and a second recover re-queues nothing', async () => {
    let healthy = false;
    w.receiver.script('/outage', () => reply(healthy ? 200 : 500));
    const sub = await subscribeAt('/outage', { level: 'organization' });
    const since = new Date(Date.now() - 60_000).toISOString();
    const failed = [await w.publishTo(sub.id, publishFor(levels[0])), await w.publishTo(sub.id, publishFor(levels[0]))];
    expect(failed.map((d) => d.status)).toEqual(['failed', 'failed']);
    healthy = true;

    const res = await w.api().post(`${levelBase()}/subscriptions/${sub.id}/recover`).set(admin()).send({ since });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ subscription_id: sub.id, requeued: 2, more: false });

    const redeliveries = await poll(
      () => w.deliveriesOf(sub.id),
      (all) => all.filter((d) => d.redeliveryOf && d.status === 'succeeded').length === 2,
      20_000,
      'recovered deliveries to succeed',
    );
    expect(redeliveries.filter((d) => d.redeliveryOf).map((d) => d.redeliveryOf).sort()).toEqual(failed.map((d) => d.id).sort());
    const delivered = w.receiver.requests('/outage').filter((r) => r.headers['x-service-delivery'] !== failed[0].id && r.headers['x-service-delivery'] !== failed[1].id);
    expect(delivered).toHaveLength(2);
    for (const r of delivered) expect(verifySignature(r.body, r.headers['x-service-signature'] as string, sub.secret).ok).toBe(true);

    const second = await w.api().post(`${levelBase()}/subscriptions/${sub.id}/recover`).set(admin()).send({ since });
    expect(second.status).toBe(202);
    expect(second.body.requeued).toBe(0);
    expect(await w.deliveriesOf(sub.id)).toHaveLength(4);

    const audit = await w.h.deps.prisma.auditEvent.findMany({ where: { organizationId: w.org.id, action: 'webhook.deliveries_recovered', targetId: sub.id } });
    expect(audit).toHaveLength(2);
  }, 60_000);

  it('refuses a window over 30 days or reversed with 400, changing nothing', async () => {
    const sub = await subscribeAt('/bounds', { level: 'organization' });
    const old = new Date(Date.now() - 31 * 24 * 3600_000).toISOString();
    const tooOld = await w.api().post(`${levelBase()}/subscriptions/${sub.id}/recover`).set(admin()).send({ since: old });
    expect(tooOld.status).toBe(400);
    expect(tooOld.body.detail).toMatch(/30 days/);
    const reversed = await w.api().post(`${levelBase()}/subscriptions/${sub.id}/recover`).set(admin()).send({ since: new Date().toISOString(), until: old });
    expect(reversed.status).toBe(400);
    const missing = await w.api().post(`${levelBase()}/subscriptions/${sub.id}/recover`).set(admin()).send({});
    expect(missing.status).toBe(400);
    expect(await w.h.deps.prisma.auditEvent.count({ where: { action: 'webhook.deliveries_recovered', targetId: sub.id } })).toBe(0);
  });

  it("answers 404 for another organization's delivery and subscription, and 409 for a pending delivery", async () => {
    w.receiver.script('/theirs', () => reply(200));
    const sub = await subscribeAt('/theirs', { level: 'organization' });
    const delivery = await w.publishTo(sub.id, publishFor(levels[0]));
    const other = await createOrg(w.h);
    const resend = await w.api().post(`${levelBase()}/deliveries/${delivery.id}/resend`).set(bearer(other.admin.token));
    expect(resend.status).toBe(404);
    const recover = await w.api().post(`${levelBase()}/subscriptions/${sub.id}/recover`).set(bearer(other.admin.token)).send({ since: new Date(Date.now() - 60_000).toISOString() });
    expect(recover.status).toBe(404);
    expect(await w.deliveriesOf(sub.id)).toHaveLength(1);

    const member = await w.api().post(`${levelBase()}/deliveries/${delivery.id}/resend`).set(bearer(w.org.member.token));
    expect(member.status).toBe(403);

    const pending = await w.h.deps.prisma.webhookDelivery.update({ where: { id: delivery.id }, data: { status: 'pending' } });
    const refused = await w.api().post(`${levelBase()}/deliveries/${pending.id}/resend`).set(admin());
    expect(refused.status).toBe(409);
  });
});
