// PR security reviews through the HTTP API: the engine records one on a project (pr_review.completed published
// with it), people list and read them; validation, archived projects (409), scopes, access, cross-org 404.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey, eventsOf } from './support/domain';
import { whileRowsHeld } from './support/row-locks';

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let engine: string;

beforeAll(async () => {
  h = await createHarness();
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  engine = await createKey(h, org.admin.token, ['assessments:update', 'projects:read']);
});
afterAll(() => h.close());

const api = () => request(h.app);
const REVIEW = { repository: 'acme/shop', pr_number: 42, verdict: 'changes_requested', findings_count: 3, url: 'https://git.example.com/acme/shop/pull/42' };
const post = (token: string, projectId: string, body: Record<string, unknown> = REVIEW) =>
  api().post(`/api/v1/projects/${projectId}/pr-reviews`).set(bearer(token)).send(body);

describe('POST /projects/{id}/pr-reviews', () => {
  it('records the review (201) and publishes pr_review.completed with it', async () => {
    const p = await insertProject(h, org.id);
    const res = await post(engine, p.id);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^prr_[0-9a-z]{26}$/),
      project_id: p.id,
      repository: 'acme/shop',
      pr_number: 42,
      verdict: 'changes_requested',
      findings_count: 3,
      url: REVIEW.url,
      created_at: expect.any(String),
    });
    const [event] = await eventsOf(h, org.id, 'pr_review.completed', { pr_review_id: res.body.id });
    expect(event.data).toEqual({
      pr_review_id: res.body.id,
      project_id: p.id,
      repository: 'acme/shop',
      pr_number: 42,
      verdict: 'changes_requested',
      findings_count: 3,
      url: REVIEW.url,
    });
    expect(event).toMatchObject({ projectId: p.id, assessmentId: null });
  });

  it('takes every verdict and an absent url', async () => {
    const p = await insertProject(h, org.id);
    for (const verdict of ['approved', 'changes_requested', 'commented']) {
      const res = await post(engine, p.id, { repository: 'acme/api', pr_number: 7, verdict, findings_count: 0 });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ verdict, url: null, findings_count: 0 });
    }
  });

  it('validates the body: 400 for missing or malformed fields, 422 for a verdict outside the list', async () => {
    const p = await insertProject(h, org.id);
    const bad: Array<Record<string, unknown>> = [
      { ...REVIEW, repository: undefined },
      { ...REVIEW, repository: '' },
      { ...REVIEW, pr_number: 0 },
      { ...REVIEW, pr_number: 1.5 },
      { ...REVIEW, findings_count: -1 },
      { ...REVIEW, url: 'not a url' },
      { ...REVIEW, url: 'ftp://example.com/x' },
      { ...REVIEW, extra: true },
    ];
    for (const body of bad) expect((await post(engine, p.id, body)).status).toBe(400);
    expect((await post(engine, p.id, { ...REVIEW, verdict: 'rejected' })).status).toBe(422);
    expect(await h.deps.prisma.prReview.count({ where: { projectId: p.id } })).toBe(0);
    expect(await eventsOf(h, org.id, 'pr_review.completed', { project_id: p.id })).toEqual([]);
  });

  it('is 409 on an archived project', async () => {
    const p = await insertProject(h, org.id);
    await h.deps.prisma.project.update({ where: { id: p.id }, data: { archivedAt: new Date() } });
    expect((await post(engine, p.id)).status).toBe(409);
  });

  it('is 409 on a project archived while the request ran (its re-check waited): no review, no event', async () => {
    const p = await insertProject(h, org.id);
    const res = await whileRowsHeld(h,
      (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${org.admin.id} FOR NO KEY UPDATE`,
      () => post(engine, p.id).then((r) => r),
      1,
      (tx) => tx.project.update({ where: { id: p.id }, data: { archivedAt: new Date() } }),
    );
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ detail: 'The project is archived: unarchive it to record PR reviews.' });
    expect(await h.deps.prisma.prReview.count({ where: { projectId: p.id } })).toBe(0);
    expect((await eventsOf(h, org.id, 'pr_review.completed')).filter((e) => e.projectId === p.id)).toHaveLength(0);
  });

  it('needs assessments:update (member: 403) and write access to the project (read grant: 403, none: 404)', async () => {
    const p = await insertProject(h, org.id);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'write');
    const member = await post(org.member.token, p.id);
    expect(member.status).toBe(403);
    expect(member.body.detail).toContain('assessments:update');
    expect((await post(org.manager.token, p.id)).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.manager.id }, 'read');
    expect((await post(org.manager.token, p.id)).status).toBe(403);
  });

  it("answers 404 for another organization's project", async () => {
    const p = await insertProject(h, org.id);
    const res = await post(other.owner.token, p.id);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ detail: 'Project not found.' });
  });
});

describe('GET /projects/{id}/pr-reviews and /pr-reviews/{id}', () => {
  it('lists a project’s reviews newest first, filtered by repository and verdict, and reads one', async () => {
    const p = await insertProject(h, org.id);
    const a = (await post(engine, p.id, { ...REVIEW, repository: 'acme/a', verdict: 'approved' })).body;
    const b = (await post(engine, p.id, { ...REVIEW, repository: 'acme/b' })).body;
    const all = await api().get(`/api/v1/projects/${p.id}/pr-reviews`).set(bearer(org.admin.token));
    expect(all.status).toBe(200);
    expect(all.body).toEqual({ data: [b, a], next_cursor: null });
    const byRepo = await api().get(`/api/v1/projects/${p.id}/pr-reviews?repository=acme/a`).set(bearer(org.admin.token));
    expect(byRepo.body.data).toEqual([a]);
    const byVerdict = await api().get(`/api/v1/projects/${p.id}/pr-reviews?verdict=changes_requested`).set(bearer(org.admin.token));
    expect(byVerdict.body.data).toEqual([b]);
    const page = await api().get(`/api/v1/projects/${p.id}/pr-reviews?limit=1`).set(bearer(org.admin.token));
    expect(page.body).toEqual({ data: [b], next_cursor: b.id });
    expect((await api().get(`/api/v1/pr-reviews/${a.id}`).set(bearer(org.admin.token))).body).toEqual(a);
  });

  it('needs projects:read and read access (member with a grant: 200, without: 404); another organization gets 404', async () => {
    const p = await insertProject(h, org.id);
    const review = (await post(engine, p.id)).body;
    expect((await api().get(`/api/v1/projects/${p.id}/pr-reviews`).set(bearer(org.member.token))).status).toBe(404);
    expect((await api().get(`/api/v1/pr-reviews/${review.id}`).set(bearer(org.member.token))).status).toBe(404);
    await insertGrant(h, org.id, { projectId: p.id }, { userId: org.member.id }, 'read');
    expect((await api().get(`/api/v1/projects/${p.id}/pr-reviews`).set(bearer(org.member.token))).body.data).toEqual([review]);
    expect((await api().get(`/api/v1/pr-reviews/${review.id}`).set(bearer(org.member.token))).status).toBe(200);
    expect((await api().get(`/api/v1/projects/${p.id}/pr-reviews`).set(bearer(other.owner.token))).status).toBe(404);
    const foreign = await api().get(`/api/v1/pr-reviews/${review.id}`).set(bearer(other.owner.token));
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ detail: 'PR review not found.' });
    const key = await createKey(h, org.admin.token, ['assessments:update']);
    const noRead = await api().get(`/api/v1/projects/${p.id}/pr-reviews`).set(bearer(key));
    expect(noRead.status).toBe(403);
    expect(noRead.body.detail).toContain('projects:read');
    expect((await api().get(`/api/v1/pr-reviews/${review.id}`).set(bearer(key))).status).toBe(403);
  });
});
