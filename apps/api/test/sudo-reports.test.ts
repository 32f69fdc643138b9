// Sudo mode (reauthentication.ts confirmSensitiveChange) on the routes that hand a report to someone outside the
// organization: publishing it to a public URL (report_publish) and granting an e-mail address access (report_share).
// An older session (a cookie left behind, or stolen) confirms with the current password, else 403 and nothing is
// published, granted or mailed; a request that fails anyway (unknown or unready report, bad expiry, an address that
// already has access) answers its 4xx without asking. A recent session and an API key are not asked; unpublishing,
// revoking and listing never ask. The password ends up in no row, audit entry or mail.
import request from 'supertest';
import { createHarness, uniqueSuffix, type Harness } from './support/harness';
import { A_WHILE_AGO, expectAskedForPassword, expectWrongPassword, failedPasswordChecks, signedInAgo } from './support/reauthentication';
import { bearer, createOrg, insertProject, TEST_PASSWORD, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, insertReadyReport } from './support/domain';
import { newId } from '@svc/db';
import { issueSession } from '../src/modules/auth/sessions';

const WRONG_PASSWORD = 'not the password at all';

let h: Harness;
let org: TestOrg;
let assessment: { id: string };

beforeAll(async () => {
  h = await createHarness();
  org = await createOrg(h);
  const project = await insertProject(h, org.id);
  assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
});
afterAll(() => h.close());

const api = () => request(h.app);
const readyReport = () => insertReadyReport(h, org.id, assessment.id);
const publish = (token: string, reportId: string, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  api().post(`/api/v1/reports/${reportId}/publication`).set({ ...bearer(token), ...headers }).send(body);
const share = (token: string, reportId: string, body: Record<string, unknown>) =>
  api().post(`/api/v1/reports/${reportId}/shares`).set(bearer(token)).send(body);
const view = (url: string) => api().get(`/api/v1/shared/reports/${url.split('/').pop()}`);

const sharesOf = (reportId: string) => h.deps.prisma.reportShare.findMany({ where: { reportId } });
const liveSharesOf = (reportId: string) => h.deps.prisma.reportShare.findMany({ where: { reportId, revokedAt: null } });
const mailsTo = (email: string) => h.mail().filter((m) => m.to === email);
const failedChecks = (operation: string) => failedPasswordChecks(h, org.admin.id, operation);
const auditOf = (reportId: string) => h.deps.prisma.auditEvent.findMany({ where: { targetId: reportId } });
const unknownReport = newId('rpt');
const newAddress = () => `auditor-${uniqueSuffix()}@partner.example`;

/** The password is in none of the report's share rows, its audit entries, or the failed checks of the operation. */
async function expectPasswordStoredNowhere(reportId: string, operation: string) {
  const stored = JSON.stringify([await sharesOf(reportId), await auditOf(reportId), await failedChecks(operation), h.mail()]);
  for (const password of [TEST_PASSWORD, WRONG_PASSWORD]) expect(stored).not.toContain(password);
}

describe('publishing a report (report_publish)', () => {
  beforeEach(() => signedInAgo(h, org.admin.token, A_WHILE_AGO));

  it('an older session is asked for the password (403, nothing published); a wrong one is 400 and audited; the right one publishes', async () => {
    const report = await readyReport();
    expectAskedForPassword(await publish(org.admin.token, report.id));
    expect(await sharesOf(report.id)).toHaveLength(0);

    expectWrongPassword(await publish(org.admin.token, report.id, { current_password: WRONG_PASSWORD }));
    expect(await sharesOf(report.id)).toHaveLength(0);
    const failures = await failedChecks('report_publish');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ organizationId: org.id, metadata: { reason: 'invalid_current_password', operation: 'report_publish' } });

    const published = await publish(org.admin.token, report.id, { current_password: TEST_PASSWORD });
    expect(published.status).toBe(201);
    expect((await view(published.body.url)).status).toBe(200);
    expect(await sharesOf(report.id)).toHaveLength(1);
    await expectPasswordStoredNowhere(report.id, 'report_publish');
  });

  it('publishing again (a new URL replacing the old one) asks too, and a refusal leaves the old URL working', async () => {
    const report = await readyReport();
    const first = await publish(org.admin.token, report.id, { current_password: TEST_PASSWORD });
    expect(first.status).toBe(201);
    expectAskedForPassword(await publish(org.admin.token, report.id));
    expect((await liveSharesOf(report.id)).map((s) => s.id)).toEqual([first.body.id]);
    expect((await view(first.body.url)).status).toBe(200);
  });

  it('a request that fails anyway answers its own 4xx without asking: unknown report, unready report, bad expiry', async () => {
    const report = await readyReport();
    const pending = await readyReport();
    await h.deps.prisma.report.update({ where: { id: pending.id }, data: { status: 'pending' } });
    const pastExpiry = { expires_at: new Date(h.clock.now().getTime() - 60_000).toISOString() };
    for (const body of [{}, { current_password: WRONG_PASSWORD }]) {
      expect((await publish(org.admin.token, unknownReport, body)).status).toBe(404);
      expect((await publish(org.admin.token, pending.id, body)).status).toBe(409);
      expect((await publish(org.admin.token, report.id, { ...pastExpiry, ...body })).status).toBe(422);
    }
    expect(await sharesOf(report.id)).toHaveLength(0);
    expect(await failedChecks('report_publish')).toHaveLength(1); // the one of the first test only
  });

  it('a session signed in within the window and an API key publish without a password', async () => {
    const fresh = await issueSession(h.deps, org.admin.id, org.id);
    expect((await publish(fresh.token, (await readyReport()).id)).status).toBe(201);
    const key = await createKey(h, fresh.token, ['reports:read', 'reports:publish']);
    expect((await publish(key, (await readyReport()).id)).status).toBe(201);
  });

  it('unpublishing, revoking and listing never ask', async () => {
    const report = await readyReport();
    const published = await publish(org.admin.token, report.id, { current_password: TEST_PASSWORD });
    expect((await api().get(`/api/v1/reports/${report.id}/shares`).set(bearer(org.admin.token))).status).toBe(200);
    expect((await api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(org.admin.token))).status).toBe(204);
    const again = await publish(org.admin.token, report.id, { current_password: TEST_PASSWORD });
    expect((await api().delete(`/api/v1/reports/${report.id}/shares/${again.body.id}`).set(bearer(org.admin.token))).status).toBe(204);
    expect(await liveSharesOf(report.id)).toHaveLength(0);
    expect(published.status).toBe(201);
  });

  it("a publication's Idempotency-Key is not replayed to another, older session of the same user", async () => {
    const report = await readyReport();
    const fresh = await issueSession(h.deps, org.admin.id, org.id);
    const key = { 'Idempotency-Key': `sudo-publish-${uniqueSuffix()}` };
    const published = await publish(fresh.token, report.id, {}, key);
    expect(published.status).toBe(201);
    const stolen = await publish(org.admin.token, report.id, {}, key);
    expect(stolen.body.url).toBeUndefined();
    expectAskedForPassword(stolen);
  });
});

describe('granting an e-mail address access (report_share)', () => {
  beforeEach(() => signedInAgo(h, org.admin.token, A_WHILE_AGO));

  it('an older session is asked for the password (403, no grant, no mail); a wrong one is 400 and audited; the right one grants', async () => {
    const report = await readyReport();
    const email = newAddress();
    expectAskedForPassword(await share(org.admin.token, report.id, { email }));
    expect(await sharesOf(report.id)).toHaveLength(0);
    expect(mailsTo(email)).toHaveLength(0);

    expectWrongPassword(await share(org.admin.token, report.id, { email, current_password: WRONG_PASSWORD }));
    expect(await sharesOf(report.id)).toHaveLength(0);
    const failures = await failedChecks('report_share');
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatchObject({ organizationId: org.id, metadata: { reason: 'invalid_current_password', operation: 'report_share' } });

    const granted = await share(org.admin.token, report.id, { email, current_password: TEST_PASSWORD });
    expect(granted.status).toBe(201);
    expect(granted.body).toMatchObject({ kind: 'email', email, status: 'active' });
    expect(mailsTo(email)).toHaveLength(1);
    await expectPasswordStoredNowhere(report.id, 'report_share');
  });

  it('a request that fails anyway answers its own 4xx without asking: unknown or unready report, bad expiry, an address already granted', async () => {
    const report = await readyReport();
    const pending = await readyReport();
    await h.deps.prisma.report.update({ where: { id: pending.id }, data: { status: 'pending' } });
    const granted = newAddress();
    expect((await share(org.admin.token, report.id, { email: granted, current_password: TEST_PASSWORD })).status).toBe(201);
    const email = newAddress();
    const pastExpiry = { expires_at: new Date(h.clock.now().getTime() - 60_000).toISOString() };
    for (const body of [{}, { current_password: WRONG_PASSWORD }]) {
      expect((await share(org.admin.token, unknownReport, { email, ...body })).status).toBe(404);
      expect((await share(org.admin.token, pending.id, { email, ...body })).status).toBe(409);
      expect((await share(org.admin.token, report.id, { email, ...pastExpiry, ...body })).status).toBe(422);
      const again = await share(org.admin.token, report.id, { email: granted.toUpperCase(), ...body });
      expect([again.status, again.body.detail]).toEqual([409, expect.stringContaining('already has access')]);
    }
    expect(await sharesOf(report.id)).toHaveLength(1);
    expect(mailsTo(email)).toHaveLength(0);
    expect(await failedChecks('report_share')).toHaveLength(1); // the one of the first test only
  });

  it('a session signed in within the window and an API key grant without a password', async () => {
    const fresh = await issueSession(h.deps, org.admin.id, org.id);
    expect((await share(fresh.token, (await readyReport()).id, { email: newAddress() })).status).toBe(201);
    const key = await createKey(h, fresh.token, ['reports:read', 'reports:share']);
    expect((await share(key, (await readyReport()).id, { email: newAddress() })).status).toBe(201);
  });
});
