// Deletions that meet one another: a project's and one of its assessments', at once. The project's deletion holds its
// row, then every live subscription with its project_id (an assessment's too: they carry the project's id), then
// cascades into the assessment; the assessment's deletion holds its row, then its subscriptions. Both must land (204),
// never a deadlock's 409.
import request from 'supertest';
import { createHarness, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, type TestOrg } from './support/fixtures';
import { insertAssessmentIn, subscribe } from './support/domain';
import { queuedBehind } from './support/row-locks';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

it("a project and one of its assessments (with a webhook subscription) deleted at once: both 204, never a deadlock's 409", async () => {
  const project = await insertProject(h, org.id);
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  // The assessment's subscription first: its id sorts before the project's, so the project's deletion takes it and
  // then waits for the project's own (held below) while the assessment's deletion holds the assessment.
  const ofAssessment = await subscribe(h, org.owner.token, { assessmentId: assessment.id }, ['finding.created']);
  const ofProject = await subscribe(h, org.owner.token, { projectId: project.id }, ['finding.created']);
  expect(ofAssessment < ofProject).toBe(true);
  const [projectGone, assessmentGone] = await queuedBehind(h, 'SELECT id FROM webhook_subscriptions WHERE id = $1 FOR NO KEY UPDATE', [ofProject], [
    () => request(h.app).delete(`/api/v1/projects/${project.id}`).set(bearer(org.owner.token)),
    () => request(h.app).delete(`/api/v1/assessments/${assessment.id}`).set(bearer(org.admin.token)),
  ]);
  expect([projectGone.status, assessmentGone.status]).toEqual([204, 204]);
  expect(await h.deps.prisma.project.count({ where: { id: project.id } })).toBe(0);
  expect(await h.deps.prisma.assessment.count({ where: { id: assessment.id } })).toBe(0);
}, 30_000);
