// Deleting an organization or a project with a large history: its deliveries, their attempts and its events go in
// bounded batches (more rows here than one batch holds), then the row; the request answers 204 once they are gone,
// and nothing of another organization or project is touched.
import request from 'supertest';
import { ERASE_BATCH } from '../src/modules/history-deletion/history-deletion.service';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, insertAssessment, insertProject, type TestOrg } from './support/fixtures';
import { subscribe } from './support/domain';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(() => h.close());

const api = () => request(h.app);
// Each seeded event has one delivery per subscription: more deliveries than one batch, so several batches run.
const EVENTS = Math.ceil(ERASE_BATCH / 2) + 100;

/** `EVENTS` events of the organization (of `projectId` when given), each delivered to every subscription with one attempt. */
async function seedHistory(organizationId: string, subscriptionIds: string[], projectId: string | null = null): Promise<string> {
  const tag = `s${uniqueSuffix().replace(/\W/g, '')}`;
  await h.deps.prisma.$executeRawUnsafe(
    `INSERT INTO events (id, organization_id, type, project_id, data, created_at)
     SELECT 'event_${tag}_' || g, $1, 'finding.created', $2, '{}', now() - interval '1 day' FROM generate_series(1, ${EVENTS}) g`,
    organizationId,
    projectId,
  );
  await h.deps.prisma.$executeRawUnsafe(
    `INSERT INTO webhook_deliveries (id, organization_id, subscription_id, event_id, event_type, payload, payload_format,
                                     status, attempt_count, completed_at, updated_at)
     SELECT 'whdel_${tag}_' || g || '_' || s.n, $1, s.id, 'event_${tag}_' || g, 'finding.created', '{}', 'service',
            'succeeded', 1, now(), now()
     FROM generate_series(1, ${EVENTS}) g, unnest($2::text[]) WITH ORDINALITY s(id, n)`,
    organizationId,
    subscriptionIds,
  );
  await h.deps.prisma.$executeRawUnsafe(
    `INSERT INTO webhook_attempts (id, delivery_id, number, started_at, duration_ms, outcome, response_status)
     SELECT 'whatt_' || substr(id, 7), id, 1, now(), 5, 'success', 200 FROM webhook_deliveries WHERE id LIKE 'whdel_${tag}_%'`,
  );
  return tag;
}

async function historyOf(tag: string) {
  const [row] = await h.deps.prisma.$queryRawUnsafe<Array<{ events: number; deliveries: number; attempts: number }>>(
    `SELECT (SELECT count(*) FROM events WHERE id LIKE 'event_${tag}_%')::int AS events,
            (SELECT count(*) FROM webhook_deliveries WHERE id LIKE 'whdel_${tag}_%')::int AS deliveries,
            (SELECT count(*) FROM webhook_attempts WHERE id LIKE 'whatt_${tag}_%')::int AS attempts`,
  );
  return row;
}

async function orgWithSubscriptions(): Promise<{ org: TestOrg; projectId: string; orgSub: string; projectSub: string; assessmentSub: string }> {
  const org = await createOrg(h);
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessment(h, org.id, project.id);
  return {
    org,
    projectId: project.id,
    orgSub: await subscribe(h, org.admin.token, { org: true }, ['finding.created']),
    projectSub: await subscribe(h, org.admin.token, { projectId: project.id }, ['finding.created']),
    assessmentSub: await subscribe(h, org.admin.token, { assessmentId: assessment.id }, ['finding.created']),
  };
}

describe('DELETE /organization with a large history', () => {
  it('answers 204 with its deliveries, attempts and events gone, and leaves other organizations alone', async () => {
    const doomed = await orgWithSubscriptions();
    const other = await orgWithSubscriptions();
    const doomedTag = await seedHistory(doomed.org.id, [doomed.orgSub, doomed.projectSub]);
    const otherTag = await seedHistory(other.org.id, [other.orgSub, other.projectSub]);
    expect(await historyOf(doomedTag)).toEqual({ events: EVENTS, deliveries: 2 * EVENTS, attempts: 2 * EVENTS });

    const res = await api().delete('/api/v1/organization').set(bearer(doomed.org.owner.token)).send({ confirm: doomed.org.name });
    expect(res.status).toBe(204);

    expect(await historyOf(doomedTag)).toEqual({ events: 0, deliveries: 0, attempts: 0 });
    const prisma = h.deps.prisma;
    expect(await prisma.organization.count({ where: { id: doomed.org.id } })).toBe(0);
    expect(await prisma.project.count({ where: { id: doomed.projectId } })).toBe(0);
    expect(await prisma.webhookSubscription.count({ where: { organizationId: doomed.org.id } })).toBe(0);
    expect(await prisma.event.count({ where: { organizationId: doomed.org.id } })).toBe(0);
    expect(await historyOf(otherTag)).toEqual({ events: EVENTS, deliveries: 2 * EVENTS, attempts: 2 * EVENTS });
  });

  it('changes nothing when the confirmation is wrong', async () => {
    const kept = await orgWithSubscriptions();
    const tag = await seedHistory(kept.org.id, [kept.orgSub]);
    const res = await api().delete('/api/v1/organization').set(bearer(kept.org.owner.token)).send({ confirm: `${kept.org.name} ` });
    expect(res.status).toBe(400);
    expect(await historyOf(tag)).toEqual({ events: EVENTS, deliveries: EVENTS, attempts: EVENTS });
  });
});

describe('DELETE /projects/{id} with a large history', () => {
  it("answers 204 with its subscriptions' deliveries and attempts gone; the organization's own deliveries and the events stay", async () => {
    const t = await orgWithSubscriptions();
    const sibling = await insertProject(h, t.org.id);
    const siblingSub = await subscribe(h, t.org.admin.token, { projectId: sibling.id }, ['finding.created']);
    const projectTag = await seedHistory(t.org.id, [t.projectSub, t.assessmentSub], t.projectId);
    const orgTag = await seedHistory(t.org.id, [t.orgSub], t.projectId);
    const siblingTag = await seedHistory(t.org.id, [siblingSub], sibling.id);

    const res = await api().delete(`/api/v1/projects/${t.projectId}`).set(bearer(t.org.admin.token));
    expect(res.status).toBe(204);

    // The project's subscriptions (project and assessment level) and everything they received are gone.
    expect(await historyOf(projectTag)).toEqual({ events: EVENTS, deliveries: 0, attempts: 0 });
    expect(await h.deps.prisma.webhookSubscription.count({ where: { id: { in: [t.projectSub, t.assessmentSub] } } })).toBe(0);
    // What the organization-level subscription received is the organization's history: it stays, as do other projects'.
    expect(await historyOf(orgTag)).toEqual({ events: EVENTS, deliveries: EVENTS, attempts: EVENTS });
    expect(await historyOf(siblingTag)).toEqual({ events: EVENTS, deliveries: EVENTS, attempts: EVENTS });
  });

  it("another organization's project answers 404 and loses nothing", async () => {
    const owner = await orgWithSubscriptions();
    const stranger = await createOrg(h);
    const tag = await seedHistory(owner.org.id, [owner.projectSub], owner.projectId);
    const res = await api().delete(`/api/v1/projects/${owner.projectId}`).set(bearer(stranger.admin.token));
    expect(res.status).toBe(404);
    expect(await historyOf(tag)).toEqual({ events: EVENTS, deliveries: EVENTS, attempts: EVENTS });
  });
});
