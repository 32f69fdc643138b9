// Exporting a finding to an issue tracker, as the API answers it (the worker's side: apps/worker/test/issue-exports*).
// One export per finding and tracker: two requests at once file one export and write one audit entry.
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { bearer, createOrg, insertProject, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import { insertAssessmentIn, insertFinding } from './support/domain';
import { queuedBehind, whileRowsHeld } from './support/row-locks';

let h: Harness;
let org: TestOrg;

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
});
afterAll(() => h.close());

it('two exports of one finding to one tracker at once: one files the export (202), the other answers it (200); one audit entry', async () => {
  const finding = await insertFinding(h, await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed'));
  const tracker = await request(h.app).post('/api/v1/issue-export-targets').set(bearer(org.owner.token))
    .send({ kind: 'github', name: `gh ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_twoAtOnce0123456789', current_password: TEST_PASSWORD });
  expect(tracker.status).toBe(201);
  const exportIt = () => request(h.app).post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(org.admin.token)).send({ target_id: tracker.body.id });
  // Both wait for the admin's membership (their re-check), then go on together.
  const answers = await queuedBehind(h, 'SELECT id FROM memberships WHERE organization_id = $1 AND user_id = $2 FOR NO KEY UPDATE', [org.id, org.admin.id], [exportIt, exportIt]);
  expect(answers.map((a) => a.status).sort()).toEqual([200, 202]);
  expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
  expect(await h.deps.prisma.findingIssueExport.count({ where: { findingId: finding.id } })).toBe(1);
  expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'finding.issue_exported', targetId: finding.id } })).toBe(1);
});

async function trackerOf(o: TestOrg): Promise<string> {
  const tracker = await request(h.app).post('/api/v1/issue-export-targets').set(bearer(o.owner.token))
    .send({ kind: 'github', name: `gh ${uniqueSuffix()}`, repository: 'acme/web', token: 'ghp_review0123456789abcd', current_password: TEST_PASSWORD });
  expect(tracker.status).toBe(201);
  return tracker.body.id;
}

it('an export to a tracker revoked while the request ran: 404 as for a revoked tracker, nothing filed, no audit entry', async () => {
  const finding = await insertFinding(h, await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed'));
  const trackerId = await trackerOf(org);
  const res = await whileRowsHeld(h,
    (tx) => tx.$queryRaw`SELECT id FROM memberships WHERE organization_id = ${org.id} AND user_id = ${org.admin.id} FOR NO KEY UPDATE`,
    () => request(h.app).post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(org.admin.token)).send({ target_id: trackerId }).then((r) => r),
    1,
    // As revokeIssueTarget writes it.
    (tx) => tx.issueExportTarget.update({ where: { id: trackerId }, data: { deletedAt: new Date(), credentialsEnc: '' } }),
  );
  expect(res.status).toBe(404);
  expect(res.body).toEqual({ detail: 'Issue export target not found.' });
  expect(await h.deps.prisma.findingIssueExport.count({ where: { findingId: finding.id } })).toBe(0);
  expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'finding.issue_exported', targetId: finding.id } })).toBe(0);
});

it('exporting again a finding whose export succeeded: 200 with that export, no second audit entry (nothing was filed)', async () => {
  const finding = await insertFinding(h, await insertAssessmentIn(h, org.id, (await insertProject(h, org.id)).id, 'completed'));
  const trackerId = await trackerOf(org);
  const exportIt = () => request(h.app).post(`/api/v1/findings/${finding.id}/issue-exports`).set(bearer(org.admin.token)).send({ target_id: trackerId });
  const first = await exportIt();
  expect(first.status).toBe(202);
  // As the worker records a created issue.
  await h.deps.prisma.findingIssueExport.update({
    where: { id: first.body.id },
    data: { status: 'succeeded', externalKey: '42', externalUrl: 'https://github.com/acme/web/issues/42', completedAt: new Date() },
  });
  const again = await exportIt();
  expect(again.status).toBe(200);
  expect(again.body).toMatchObject({ id: first.body.id, status: 'succeeded', external_key: '42' });
  expect(await h.deps.prisma.auditEvent.count({ where: { organizationId: org.id, action: 'finding.issue_exported', targetId: finding.id } })).toBe(1);
});
