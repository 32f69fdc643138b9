// What sends to a receiver again (a test delivery, a delivery's resend, a subscription's recovery) while the
// subscription is deleted or disabled meanwhile: the request is held on its caller's membership (the re-check its
// transaction starts with, own-role.ts) while the test deletes or disables the subscription; the request then
// answers as it would have had it started after the change (404, 409), and nothing is queued for the receiver.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, createUserInOrg, insertGrant, insertProject, type TestOrg, type TestUser } from './support/fixtures';
import { eventsOf, insertAssessmentIn, subscribe } from './support/domain';
import { whileRowsHeld, type HoldingTx } from './support/row-locks';

let h: Harness;
let org: TestOrg;
let admin: TestUser;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
  admin = await createUserInOrg(h, org.id, 'admin', 'resending-admin');
});
afterAll(() => h.close());

/** `send` held on `user`'s membership until it waits there; `meanwhile` then commits with the holder. */
function heldOnMembership<T>(user: TestUser, send: () => Promise<T>, meanwhile: (tx: HoldingTx) => Promise<unknown>): Promise<T> {
  return whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${user.id} FOR NO KEY UPDATE`,
    send,
    1,
    meanwhile,
  );
}

/** A subscription of the organization with one failed delivery (its test delivery, marked failed). */
async function subscriptionWithFailedDelivery() {
  const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
  const sent = await request(h.app).post(`/api/v1/webhooks/subscriptions/${id}/test`).set(bearer(org.owner.token));
  expect(sent.status).toBe(202);
  await h.deps.prisma.webhookDelivery.update({ where: { id: sent.body.delivery_id }, data: { status: 'failed' } });
  return { id, deliveryId: sent.body.delivery_id as string };
}

const deliveriesOf = (subscriptionId: string) =>
  h.deps.prisma.webhookDelivery.findMany({ where: { subscriptionId }, select: { id: true, recoveredAt: true }, orderBy: { id: 'asc' } });

const deleteSubscription = (id: string) => (tx: HoldingTx) => tx.webhookSubscription.update({ where: { id }, data: { deletedAt: new Date() } });
const disableSubscription = (id: string) => (tx: HoldingTx) =>
  tx.webhookSubscription.update({ where: { id }, data: { status: 'disabled', disabledReason: 'configurer_lost_role' } });

it('a test delivery to a subscription deleted meanwhile: 404, no event and no delivery written', async () => {
  const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
  const res = await heldOnMembership(admin,
    () => request(h.app).post(`/api/v1/webhooks/subscriptions/${id}/test`).set(bearer(admin.token)).then((r) => r),
    deleteSubscription(id),
  );
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ detail: 'Webhook subscription not found.' });
  expect(await deliveriesOf(id)).toEqual([]);
  expect(await eventsOf(h, org.id, 'webhook.test', { subscription_id: id })).toEqual([]);
});

it('a test delivery to a subscription disabled meanwhile: 409, as for one disabled before, no delivery written', async () => {
  const id = await subscribe(h, org.owner.token, { org: true }, ['finding.created']);
  const res = await heldOnMembership(admin,
    () => request(h.app).post(`/api/v1/webhooks/subscriptions/${id}/test`).set(bearer(admin.token)).then((r) => r),
    disableSubscription(id),
  );
  expect(res.status).toBe(409);
  expect(res.body).toEqual({ detail: 'The subscription is disabled: re-activate it (PATCH with active: true) before sending a test event.' });
  expect(await deliveriesOf(id)).toEqual([]);
});

it("a project-level subscription's test delivery while the project is deleted: 404, no event written", async () => {
  const project = await insertProject(h, org.id);
  const id = await subscribe(h, org.owner.token, { projectId: project.id }, ['finding.created']);
  const res = await heldOnMembership(admin,
    () => request(h.app).post(`/api/v1/projects/${project.id}/webhooks/subscriptions/${id}/test`).set(bearer(admin.token)).then((r) => r),
    (tx) => tx.project.delete({ where: { id: project.id } }),
  );
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ detail: 'Webhook subscription not found.' });
  expect(await eventsOf(h, org.id, 'webhook.test', { subscription_id: id })).toEqual([]);
});

it.each([
  ['deleted', deleteSubscription, 'The subscription is deleted.'],
  ['disabled', disableSubscription, 'The subscription is not active; re-enable it first.'],
] as const)("a failed delivery resent while its subscription is %s meanwhile: 409, nothing queued", async (_what, change, detail) => {
  const { id, deliveryId } = await subscriptionWithFailedDelivery();
  const before = await deliveriesOf(id);
  const res = await heldOnMembership(admin,
    () => request(h.app).post(`/api/v1/webhooks/deliveries/${deliveryId}/resend`).set(bearer(admin.token)).then((r) => r),
    change(id),
  );
  expect(res.status).toBe(409);
  expect(res.body).toEqual({ detail });
  expect(await deliveriesOf(id)).toEqual(before);
});

it.each([
  ['deleted', deleteSubscription, 'The subscription is deleted.'],
  ['disabled', disableSubscription, 'The subscription is not active; re-enable it first.'],
] as const)("a subscription's failed deliveries recovered while it is %s meanwhile: 409, none marked recovered or queued", async (_what, change, detail) => {
  const { id } = await subscriptionWithFailedDelivery();
  const before = await deliveriesOf(id);
  const res = await heldOnMembership(admin,
    () => request(h.app).post(`/api/v1/webhooks/subscriptions/${id}/recover`).set(bearer(admin.token))
      .send({ since: new Date(Date.now() - 60_000).toISOString() }).then((r) => r),
    change(id),
  );
  expect(res.status).toBe(409);
  expect(res.body).toEqual({ detail });
  expect(await deliveriesOf(id)).toEqual(before);
});

it('an unarchive by a manager demoted to member meanwhile: 403 naming the unarchiving, the assessment stays archived', async () => {
  const manager = await createUserInOrg(h, org.id, 'manager', 'unarchiving-manager');
  const project = await insertProject(h, org.id);
  await insertGrant(h, org.id, { projectId: project.id }, { userId: manager.id }, 'write');
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed', { archivedAt: new Date() });
  const res = await heldOnMembership(manager,
    () => request(h.app).post(`/api/v1/assessments/${assessment.id}/unarchive`).set(bearer(manager.token)).then((r) => r),
    (tx) => tx.membership.updateMany({ where: { organizationId: org.id, userId: manager.id }, data: { role: 'member' } }),
  );
  expect(res.status).toBe(403);
  expect(res.body).toEqual({ detail: 'Unarchiving assessments needs a role you no longer hold (yours is now member).' });
  expect((await h.deps.prisma.assessment.findUniqueOrThrow({ where: { id: assessment.id } })).archivedAt).not.toBeNull();
});
