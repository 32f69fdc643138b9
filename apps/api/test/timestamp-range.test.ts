// Timestamps that JavaScript parses but PostgreSQL cannot hold (Joi's iso() takes expanded years, ±YYYYYY) are a 400
// with the error envelope on every route that takes one, and change nothing. Before, each of these reached a query
// and answered 500 (the audit log and usage routes are covered in audit.test and spend.test).
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { insertAssessmentIn, insertReadyReport } from './support/domain';

let h: Harness;
let org: TestOrg;
let reportId: string;

const TOO_EARLY = '-271821-04-20T00:00:00.000Z';
const TOO_LATE = '+275760-09-13T00:00:00.000Z';

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  reportId = (await insertReadyReport(h, org.id, assessment.id)).id;
});
afterAll(() => h.close());

const api = () => request(h.app);
const expectRefused = (res: request.Response, field: string) => {
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ detail: expect.stringContaining(field) });
};

describe('a timestamp outside years 0001-9999', () => {
  it('POST /api-keys expires_at: 400 naming the field, no key made', async () => {
    const res = await api().post('/api/v1/api-keys').set(bearer(org.admin.token)).send({ name: 'far', scopes: ['projects:read'], expires_at: TOO_LATE });
    expectRefused(res, 'expires_at');
    const listed = await api().get('/api/v1/api-keys').set(bearer(org.admin.token));
    expect(listed.body.data.map((k: { name: string }) => k.name)).not.toContain('far');
  });

  it('GET /webhooks/deliveries since and until: 400 naming the field', async () => {
    expectRefused(await api().get(`/api/v1/webhooks/deliveries?since=${TOO_EARLY}`).set(bearer(org.admin.token)), 'since');
    expectRefused(await api().get(`/api/v1/webhooks/deliveries?until=${encodeURIComponent(TOO_LATE)}`).set(bearer(org.admin.token)), 'until');
    expect((await api().get('/api/v1/webhooks/deliveries?since=2026-01-01T00:00:00Z').set(bearer(org.admin.token))).status).toBe(200);
  });

  it('POST /subscriptions/{id}/recover since and until: 400 naming the field', async () => {
    const sub = await api()
      .post('/api/v1/webhooks/subscriptions')
      .set(bearer(org.admin.token))
      .send({ name: 'SIEM', url: 'https://203.0.114.10/hooks', events: ['finding.created'] });
    expect(sub.status).toBe(201);
    const recover = (body: Record<string, unknown>) =>
      api().post(`/api/v1/webhooks/subscriptions/${sub.body.id}/recover`).set(bearer(org.admin.token)).send(body);
    expectRefused(await recover({ since: TOO_EARLY }), 'since');
    expectRefused(await recover({ since: new Date(Date.now() - 3600_000).toISOString(), until: TOO_LATE }), 'until');
  });

  it('report publication and share expires_at: 400 naming the field, nothing published or shared', async () => {
    expectRefused(await api().post(`/api/v1/reports/${reportId}/publication`).set(bearer(org.admin.token)).send({ expires_at: TOO_LATE }), 'expires_at');
    const shared = await api()
      .post(`/api/v1/reports/${reportId}/shares`)
      .set(bearer(org.admin.token))
      .send({ email: 'reader@example.test', expires_at: TOO_LATE });
    expectRefused(shared, 'expires_at');
    const listed = await api().get(`/api/v1/reports/${reportId}/shares`).set(bearer(org.admin.token));
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([]);
  });
});
