// Published and shared reports through the HTTP API: publishing to a URL (token stored as a keyed hash), e-mailed
// grants read back from the mail outbox, revocation and expiry applying to the next request, the public routes'
// 404s, headers, rate limits (429 + Retry-After) and audit entries; scopes, role bundles and cross-organization 404.
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createMailer } from '@svc/mail';
import type { Logger } from '@svc/config';
import express from 'express';
import { accessLog } from '../src/http/request-id';
import request from 'supertest';
import { newId } from '@svc/db';
import { createHarness, type Harness } from './support/harness';
import { AN_ADDRESS, whileMailRefused } from './support/smtp';
import { bearer, createOrg, createUserInOrg, insertGrant, insertProject, type TestOrg } from './support/fixtures';
import { createKey, insertAssessmentIn, insertReadyReport } from './support/domain';

const PER_TOKEN = 6;
const PER_IP = 10;

let h: Harness;
let org: TestOrg;
let other: TestOrg;
let assessment: { id: string };

beforeAll(async () => {
  h = await createHarness({
    // Client addresses come from X-Forwarded-For (the test is the proxy): each test speaks from its own address.
    TRUST_PROXY: 'loopback',
    REPORT_SHARE_RATE_LIMIT_PER_TOKEN: String(PER_TOKEN),
    REPORT_SHARE_RATE_LIMIT_PER_IP: String(PER_IP),
    PUBLIC_BASE_URL: 'https://reports.example.test',
  });
  [org, other] = await Promise.all([createOrg(h), createOrg(h)]);
  const project = await insertProject(h, org.id);
  assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  // The manager reads this project's reports (a grant, as a manager needs); the member does not.
  await insertGrant(h, org.id, { projectId: project.id }, { userId: org.manager.id }, 'read');
});
afterAll(() => h.close());

const api = () => request(h.app);
let ipCounter = 0;
/** A fresh client address (documentation range) per call unless one is given. */
const clientIp = () => `198.51.100.${(ipCounter = (ipCounter % 250) + 1)}`;

const readyReport = (opts: { title?: string; pdf?: Buffer } = {}) => insertReadyReport(h, org.id, assessment.id, opts);
const publish = (token: string, reportId: string, body: Record<string, unknown> = {}) =>
  api().post(`/api/v1/reports/${reportId}/publication`).set(bearer(token)).send(body);
const share = (token: string, reportId: string, body: Record<string, unknown>) =>
  api().post(`/api/v1/reports/${reportId}/shares`).set(bearer(token)).send(body);
const shares = (token: string, reportId: string, query = '') => api().get(`/api/v1/reports/${reportId}/shares${query}`).set(bearer(token));
const revoke = (token: string, reportId: string, shareId: string) =>
  api().delete(`/api/v1/reports/${reportId}/shares/${shareId}`).set(bearer(token));

const tokenOf = (url: string) => url.split('/').pop()!;
const view = (shareToken: string, ip = clientIp()) => api().get(`/api/v1/shared/reports/${shareToken}`).set('X-Forwarded-For', ip);
const download = (shareToken: string, ip = clientIp()) =>
  api()
    .get(`/api/v1/shared/reports/${shareToken}/pdf`)
    .set('X-Forwarded-For', ip)
    .buffer(true)
    .parse((r, done) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => done(null, Buffer.concat(chunks)));
    });

function expectPrivateHeaders(res: request.Response) {
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.headers['referrer-policy']).toBe('no-referrer');
  expect(res.headers['x-robots-tag']).toBe('noindex');
}

async function auditOf(action: string, reportId: string) {
  const res = await api().get(`/api/v1/audit-events?action=${action}&target_id=${reportId}&limit=100`).set(bearer(org.owner.token));
  expect(res.status).toBe(200);
  return res.body.data as Array<Record<string, unknown>>;
}

function lastMailTo(address: string) {
  const mails = h.mail().filter((m) => m.to === address);
  expect(mails.length).toBeGreaterThan(0);
  return mails[mails.length - 1];
}

describe('publishing a report', () => {
  it('gives a URL with a 256-bit token stored only as its keyed hash; the URL reads the page and downloads the PDF', async () => {
    const pdf = Buffer.from('%PDF-1.3\n% the published document\n%%EOF\n');
    const report = await readyReport({ title: 'Q4 external test', pdf });
    const res = await publish(org.manager.token, report.id);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^rsh_/),
      report_id: report.id,
      kind: 'link',
      email: null,
      status: 'active',
      expires_at: null,
      created_by_user_id: org.manager.id,
      access_count: 0,
      url: expect.stringMatching(/^https:\/\/reports\.example\.test\/shared\/reports\/rshare_[A-Za-z0-9_-]{43}$/),
    });
    const token = tokenOf(res.body.url);
    expect(Buffer.from(token.slice('rshare_'.length), 'base64url')).toHaveLength(32);
    const row = await h.deps.prisma.reportShare.findUniqueOrThrow({ where: { id: res.body.id } });
    expect(row.tokenHash).toBe(createHmac('sha256', h.config.apiKeyPepper).update(token).digest('hex'));
    expect(JSON.stringify(row)).not.toContain(token.slice(7));

    const page = await view(token, '203.0.113.7');
    expect(page.status).toBe(200);
    expectPrivateHeaders(page);
    expect(page.body).toEqual({
      title: 'Q4 external test',
      organization_name: org.name,
      project_name: expect.any(String),
      assessment_name: expect.any(String),
      size_bytes: pdf.length,
      ready_at: expect.any(String),
      expires_at: null,
      download_path: `/api/v1/shared/reports/${token}/pdf`,
    });
    const file = await download(token, '203.0.113.8');
    expect(file.status).toBe(200);
    expectPrivateHeaders(file);
    expect(file.headers['content-type']).toBe('application/pdf');
    expect(file.headers['content-disposition']).toBe('attachment; filename="Q4-external-test.pdf"');
    expect(Buffer.compare(file.body as Buffer, pdf)).toBe(0);

    // Each access is audited with the share (not a user) as actor, and counted on the share.
    const [viewed] = await auditOf('report.share_viewed', report.id);
    expect(viewed).toMatchObject({
      actor_type: 'report_share',
      actor_id: res.body.id,
      actor_label: 'published link',
      target_type: 'report',
      target_id: report.id,
      ip: '203.0.113.7',
      metadata: { share_id: res.body.id, kind: 'link' },
    });
    const [downloaded] = await auditOf('report.share_downloaded', report.id);
    expect(downloaded).toMatchObject({ actor_type: 'report_share', actor_id: res.body.id, ip: '203.0.113.8' });
    const [published] = await auditOf('report.published', report.id);
    expect(published).toMatchObject({ actor_type: 'user', actor_id: org.manager.id, metadata: { share_id: res.body.id, expires_at: null } });
    expect(JSON.stringify(published)).not.toContain(token);
    const list = await shares(org.member.token, report.id);
    expect(list.status).toBe(404); // the member cannot read this assessment
    const listed = await shares(org.admin.token, report.id);
    expect(listed.body.data).toEqual([expect.objectContaining({ id: res.body.id, access_count: 2, last_accessed_at: expect.any(String) })]);
    expect(listed.body.data[0]).not.toHaveProperty('url');
  });

  it('grants nothing else: the token is no API credential, and one character off is an unknown token', async () => {
    const report = await readyReport();
    const token = tokenOf((await publish(org.admin.token, report.id)).body.url);
    const asBearer = await api().get(`/api/v1/reports/${report.id}`).set(bearer(token));
    expect(asBearer.status).toBe(401);
    expect((await api().get(`/api/v1/reports/${report.id}/download`).set(bearer(token))).status).toBe(401);
    expect((await view(`${token}x`)).status).toBe(404);
    expect((await view(token.slice(0, -1))).status).toBe(404);
  });

  it('publishing again replaces the URL; unpublishing ends it on the next request', async () => {
    const report = await readyReport();
    const first = tokenOf((await publish(org.admin.token, report.id)).body.url);
    expect((await view(first)).status).toBe(200);
    const second = await publish(org.admin.token, report.id);
    expect(second.status).toBe(201);
    const gone = await view(first);
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ detail: 'Report not found.' });
    expectPrivateHeaders(gone);
    const current = tokenOf(second.body.url);
    expect((await view(current)).status).toBe(200);
    const [replaced] = await auditOf('report.published', report.id);
    expect(replaced.metadata).toMatchObject({ replaced_previous: true });

    const unpublished = await api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(org.admin.token));
    expect(unpublished.status).toBe(204);
    expect((await view(current)).status).toBe(404);
    expect((await download(current)).status).toBe(404);
    expect((await api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(org.admin.token))).status).toBe(404);
    const listed = await shares(org.admin.token, report.id, '?status=revoked');
    expect(listed.body.data.map((s: { status: string }) => s.status)).toEqual(['revoked', 'revoked']);
    expect(await auditOf('report.unpublished', report.id)).toHaveLength(1);
  });

  it("publishing again needs reports:revoke_share as well when it would revoke the live URL (403 naming it, the URL kept)", async () => {
    // A key that may publish but not revoke external access (SPEC: reports:revoke_share) took a report's URL away from
    // everyone who held it by publishing again.
    const publishOnly = await createKey(h, org.admin.token, ['reports:read', 'reports:publish']);
    const report = await readyReport();
    const first = await publish(publishOnly, report.id);
    expect(first.status).toBe(201);
    const again = await publish(publishOnly, report.id);
    expect(again.status).toBe(403);
    expect(again.body).toEqual({ detail: 'Missing required scope: reports:revoke_share. Publishing again would revoke the URL this report is published at.' });
    expect((await view(tokenOf(first.body.url))).status).toBe(200);
    expect(await auditOf('report.published', report.id)).toHaveLength(1);
    // Once unpublished by someone who may, the key publishes again (nothing to revoke).
    expect((await api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(org.admin.token))).status).toBe(204);
    expect((await publish(publishOnly, report.id)).status).toBe(201);
  });

  it('takes an optional expiry: the URL answers 404 once it has passed; a past, too distant or malformed one is refused', async () => {
    const report = await readyReport();
    const expiresAt = new Date(h.clock.now().getTime() + 3600_000);
    const res = await publish(org.admin.token, report.id, { expires_at: expiresAt.toISOString() });
    expect(res.status).toBe(201);
    expect(res.body.expires_at).toBe(expiresAt.toISOString());
    const token = tokenOf(res.body.url);
    const page = await view(token);
    expect(page.body.expires_at).toBe(expiresAt.toISOString());
    h.clock.advance(3600_000 + 1000);
    try {
      const expired = await view(token);
      expect(expired.status).toBe(404);
      expect(expired.body).toEqual({ detail: 'Report not found.' });
      expect((await download(token)).status).toBe(404);
      const listed = await shares(org.admin.token, report.id);
      expect(listed.body.data[0]).toMatchObject({ id: res.body.id, status: 'expired' });
      // Nothing live to unpublish.
      expect((await api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(org.admin.token))).status).toBe(404);
    } finally {
      h.clock.reset();
    }
    const past = await publish(org.admin.token, report.id, { expires_at: new Date(Date.now() - 1000).toISOString() });
    expect(past.status).toBe(422);
    const far = await publish(org.admin.token, report.id, { expires_at: new Date(Date.now() + 400 * 86400_000).toISOString() });
    expect(far.status).toBe(422);
    expect(far.body.detail).toContain('365 days');
    expect((await publish(org.admin.token, report.id, { expires_at: 'tomorrow' })).status).toBe(400);
    expect((await publish(org.admin.token, report.id, { url: 'x' })).status).toBe(400);
  });

  it('only a ready report is published or shared (409)', async () => {
    for (const status of ['pending', 'failed']) {
      const report = await h.deps.prisma.report.create({
        data: { id: newId('rpt'), organizationId: org.id, assessmentId: assessment.id, title: 'not ready', status },
      });
      const res = await publish(org.admin.token, report.id);
      expect(res.status).toBe(409);
      expect(res.body.detail).toContain(status);
      expect((await share(org.admin.token, report.id, { email: 'x@example.test' })).status).toBe(409);
      await h.deps.prisma.report.delete({ where: { id: report.id } });
    }
  });
});

describe('sharing a report by e-mail', () => {
  it('mails a link (never returned by the API) that reads the report until the grant is revoked', async () => {
    const report = await readyReport({ title: 'Audit for a customer' });
    const auditor = `auditor-${Date.now()}@customer.example`;
    const res = await share(org.manager.token, report.id, { email: auditor.toUpperCase() });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ kind: 'email', email: auditor, status: 'active', created_by_user_id: org.manager.id });
    expect(JSON.stringify(res.body)).not.toMatch(/rshare_/);
    // Default lifetime: 30 days.
    expect(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)).toBe(30 * 86400_000);

    const mail = lastMailTo(auditor);
    expect(mail.subject).toBe(`${org.name} shared a security report with you`);
    expect(mail.text).toContain('"Audit for a customer"');
    const link = /https:\/\/reports\.example\.test\/shared\/reports\/(rshare_[A-Za-z0-9_-]{43})/.exec(mail.text);
    expect(link).not.toBeNull();
    const token = link![1];
    const page = await view(token, '192.0.2.44');
    expect(page.status).toBe(200);
    expect(page.body).toMatchObject({ title: 'Audit for a customer', expires_at: res.body.expires_at });
    expect((await download(token)).status).toBe(200);
    const [viewed] = await auditOf('report.share_viewed', report.id);
    expect(viewed).toMatchObject({ actor_type: 'report_share', actor_id: res.body.id, actor_label: auditor, ip: '192.0.2.44' });
    const [granted] = await auditOf('report.share_granted', report.id);
    expect(granted).toMatchObject({ actor_id: org.manager.id, metadata: { share_id: res.body.id, email: auditor } });

    // One live grant per address.
    const again = await share(org.manager.token, report.id, { email: auditor });
    expect(again.status).toBe(409);

    const revoked = await revoke(org.manager.token, report.id, res.body.id);
    expect(revoked.status).toBe(204);
    expect((await view(token)).status).toBe(404);
    expect((await download(token)).status).toBe(404);
    expect((await revoke(org.manager.token, report.id, res.body.id)).status).toBe(409);
    const [entry] = await auditOf('report.share_revoked', report.id);
    expect(entry).toMatchObject({ actor_id: org.manager.id, metadata: { share_id: res.body.id, kind: 'email', email: auditor } });
    // After the revocation the address can be granted again.
    expect((await share(org.manager.token, report.id, { email: auditor })).status).toBe(201);
  });

  it('lists grants and the published URL with their status; filters by status', async () => {
    const report = await readyReport();
    const link = await publish(org.admin.token, report.id);
    const a = await share(org.admin.token, report.id, { email: 'a@customer.example' });
    const b = await share(org.admin.token, report.id, { email: 'b@customer.example', expires_at: new Date(Date.now() + 86400_000).toISOString() });
    await revoke(org.admin.token, report.id, a.body.id);
    const all = await shares(org.admin.token, report.id);
    expect(all.status).toBe(200);
    expect(all.body.data.map((s: { id: string; status: string }) => [s.id, s.status])).toEqual([
      [b.body.id, 'active'],
      [a.body.id, 'revoked'],
      [link.body.id, 'active'],
    ]);
    const active = await shares(org.admin.token, report.id, '?status=active&limit=1');
    expect(active.body.data.map((s: { id: string }) => s.id)).toEqual([b.body.id]);
    expect(active.body.next_cursor).toBe(b.body.id);
    expect((await shares(org.admin.token, report.id, '?status=gone')).status).toBe(400);
    // The published URL is revoked through the same route.
    expect((await revoke(org.admin.token, report.id, link.body.id)).status).toBe(204);
    expect(await auditOf('report.unpublished', report.id)).toHaveLength(1);
    // A share id of another report is not this report's.
    const otherReport = await readyReport();
    expect((await revoke(org.admin.token, otherReport.id, b.body.id)).status).toBe(404);
    expect((await revoke(org.admin.token, report.id, 'rsh_doesnotexist')).status).toBe(404);
  });

  it('when the mail cannot be sent: 503, the grant is revoked (and audited so), and a retry can send a new one', async () => {
    const report = await readyReport();
    const address = 'unlucky@customer.example';
    const working = h.deps.mailer;
    // A real mail transport writing into a folder that cannot be created (its parent is a file).
    const blocker = path.join(mkdtempSync(path.join(tmpdir(), 'svc-mail-')), 'not-a-folder');
    writeFileSync(blocker, '');
    h.deps.mailer = createMailer({ from: 'x@example.test', outboxDir: path.join(blocker, 'outbox') });
    try {
      const res = await share(org.admin.token, report.id, { email: address });
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBeDefined();
    } finally {
      h.deps.mailer = working;
    }
    const listed = await shares(org.admin.token, report.id);
    expect(listed.body.data).toEqual([expect.objectContaining({ email: address, status: 'revoked' })]);
    const [revoked] = await auditOf('report.share_revoked', report.id);
    expect(revoked.metadata).toMatchObject({ email: address, reason: 'mail_failed' });
    expect((await share(org.admin.token, report.id, { email: address })).status).toBe(201);
    expect(lastMailTo(address).text).toContain('/shared/reports/rshare_');
  });

  it("when the mail fails after its sender was demoted meanwhile: the grant is still revoked (taking back an undelivered grant is the service's act, not re-checked against the sender's role)", async () => {
    const report = await readyReport();
    const sender = await createUserInOrg(h, org.id, 'admin', 'demoted-sender');
    const address = 'never.told@customer.example';
    const working = h.deps.mailer;
    const blocker = path.join(mkdtempSync(path.join(tmpdir(), 'svc-mail-')), 'not-a-folder');
    writeFileSync(blocker, '');
    const failing = createMailer({ from: 'x@example.test', outboxDir: path.join(blocker, 'outbox') });
    // As the mail goes out (the grant committed), the owner demotes its sender; then the transport fails.
    h.deps.mailer = {
      send: async (message) => {
        expect((await api().patch(`/api/v1/members/${sender.id}`).set(bearer(org.owner.token)).send({ role: 'member' })).status).toBe(200);
        return failing.send(message);
      },
    };
    try {
      expect((await share(sender.token, report.id, { email: address })).status).toBe(503);
    } finally {
      h.deps.mailer = working;
    }
    expect((await shares(org.admin.token, report.id)).body.data).toEqual([expect.objectContaining({ email: address, status: 'revoked' })]);
  });

  it("logs a mail server's refusal of the grant without the address it quotes", async () => {
    const report = await readyReport();
    const address = 'refused.reader@customer.example';
    const { logged, refused } = await whileMailRefused(h, async () => {
      // Refused for good (SMTP 550): 422, the address to be checked; a server out of reach is 503 (try later).
      const res = await share(org.admin.token, report.id, { email: address });
      expect(res.status).toBe(422);
      expect(res.body).toEqual({ detail: expect.stringContaining('refused the e-mail address') });
    });
    expect(refused).toEqual([address]);
    expect(logged).toContainEqual([
      'Mailing a report grant failed; the grant is revoked',
      { share_id: expect.any(String), error: expect.stringContaining('Recipient address rejected') },
    ]);
    expect(JSON.stringify(logged)).not.toMatch(AN_ADDRESS);
  });

  it('refuses a malformed address or expiry (400) and an expiry in the past (422)', async () => {
    const report = await readyReport();
    expect((await share(org.admin.token, report.id, {})).status).toBe(400);
    expect((await share(org.admin.token, report.id, { email: 'not an address' })).status).toBe(400);
    expect((await share(org.admin.token, report.id, { email: 'x@customer.example', expires_at: 'soon' })).status).toBe(400);
    const past = await share(org.admin.token, report.id, { email: 'x@customer.example', expires_at: new Date(Date.now() - 60_000).toISOString() });
    expect(past.status).toBe(422);
    expect(await h.deps.prisma.reportShare.count({ where: { reportId: report.id } })).toBe(0);
  });
});

describe('scopes, roles and organizations', () => {
  it('each route needs its scope: 403 naming it', async () => {
    const report = await readyReport();
    const published = await publish(org.admin.token, report.id);
    const readOnly = await createKey(h, org.admin.token, ['reports:read']);
    const noRead = await createKey(h, org.admin.token, ['reports:publish', 'reports:share', 'reports:revoke_share']);
    const publishOnly = await createKey(h, org.admin.token, ['reports:read', 'reports:publish']);
    const cases: Array<[request.Test, string]> = [
      [api().post(`/api/v1/reports/${report.id}/publication`).set(bearer(readOnly)).send({}), 'reports:publish'],
      [api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(readOnly)), 'reports:revoke_share'],
      // Publishing is not revoking: a key that may publish still may not take the URL down (SPEC's reports:revoke_share).
      [api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(publishOnly)), 'reports:revoke_share'],
      [api().post(`/api/v1/reports/${report.id}/shares`).set(bearer(readOnly)).send({ email: 'k@customer.example' }), 'reports:share'],
      [api().delete(`/api/v1/reports/${report.id}/shares/${published.body.id}`).set(bearer(readOnly)), 'reports:revoke_share'],
      [api().get(`/api/v1/reports/${report.id}/shares`).set(bearer(noRead)), 'reports:read'],
    ];
    for (const [call, scope] of cases) {
      const res = await call;
      expect(res.status).toBe(403);
      expect(res.body.detail).toContain(scope);
    }
    // With the scope, the same key works.
    const full = await createKey(h, org.admin.token, ['reports:read', 'reports:publish', 'reports:share', 'reports:revoke_share']);
    expect((await shares(full, report.id)).status).toBe(200);
    expect((await share(full, report.id, { email: 'key@customer.example' })).status).toBe(201);
    expect((await revoke(full, report.id, published.body.id)).status).toBe(204);
  });

  it('a member (reports:read only) lists shares but cannot publish, share or revoke; a manager with read access can', async () => {
    const project = await insertProject(h, org.id);
    const a = await insertAssessmentIn(h, org.id, project.id, 'completed');
    const report = await insertReadyReport(h, org.id, a.id);
    // Without access to the assessment the manager sees nothing (404), like the report itself.
    expect((await publish(org.manager.token, report.id)).status).toBe(404);
    await insertGrant(h, org.id, { projectId: project.id }, { userId: org.manager.id }, 'read');
    await insertGrant(h, org.id, { projectId: project.id }, { userId: org.member.id }, 'read');
    const published = await publish(org.manager.token, report.id);
    expect(published.status).toBe(201);

    const memberPublish = await publish(org.member.token, report.id);
    expect(memberPublish.status).toBe(403);
    expect(memberPublish.body.detail).toContain('reports:publish');
    const memberShare = await share(org.member.token, report.id, { email: 'm@customer.example' });
    expect(memberShare.status).toBe(403);
    expect(memberShare.body.detail).toContain('reports:share');
    const memberRevoke = await revoke(org.member.token, report.id, published.body.id);
    expect(memberRevoke.status).toBe(403);
    expect(memberRevoke.body.detail).toContain('reports:revoke_share');
    const listed = await shares(org.member.token, report.id);
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(1);

    expect((await share(org.manager.token, report.id, { email: 'mgr@customer.example' })).status).toBe(201);
    expect((await revoke(org.manager.token, report.id, published.body.id)).status).toBe(204);
  });

  it("answers 404 for another organization's report and shares, even to its owner", async () => {
    const report = await readyReport();
    const published = await publish(org.admin.token, report.id);
    const o = other.owner.token;
    for (const res of [
      await publish(o, report.id),
      await api().delete(`/api/v1/reports/${report.id}/publication`).set(bearer(o)),
      await share(o, report.id, { email: 'x@customer.example' }),
      await shares(o, report.id),
      await revoke(o, report.id, published.body.id),
    ]) {
      expect(res.status).toBe(404);
    }
    // The other organization's own report cannot name this share either.
    const project = await insertProject(h, other.id);
    const theirs = await insertReadyReport(h, other.id, (await insertAssessmentIn(h, other.id, project.id, 'completed')).id);
    expect((await revoke(o, theirs.id, published.body.id)).status).toBe(404);
    expect((await view(tokenOf(published.body.url))).status).toBe(200);
  });
});

describe('the public share routes', () => {
  it('answer unknown, malformed, expired and revoked tokens alike with 404 and the private headers', async () => {
    const unknown = await view(`rshare_${'A'.repeat(43)}`);
    const malformed = await view('not-a-token');
    for (const res of [unknown, malformed]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ detail: 'Report not found.' });
      expectPrivateHeaders(res);
    }
    const pdf = await download('nope');
    expect(pdf.status).toBe(404);
    expectPrivateHeaders(pdf);
  });

  it('limit each token per minute (429 with Retry-After), whatever the address', async () => {
    const report = await readyReport();
    const token = tokenOf((await publish(org.admin.token, report.id)).body.url);
    for (let i = 0; i < PER_TOKEN; i++) expect((await view(token)).status).toBe(200);
    const limited = await view(token);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(limited.body.detail).toMatch(/^Rate limit exceeded/);
    expectPrivateHeaders(limited);
    expect((await download(token)).status).toBe(429);
    // Refused requests are not audited as views.
    expect(await auditOf('report.share_viewed', report.id)).toHaveLength(PER_TOKEN);
  });

  it('limit each client address per minute, also for tokens that do not exist', async () => {
    const ip = '203.0.113.99';
    for (let i = 0; i < PER_IP; i++) expect((await view(`rshare_${String(i).padStart(43, 'x')}`, ip)).status).toBe(404);
    const limited = await view(`rshare_${'y'.repeat(43)}`, ip);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another address is not affected.
    expect((await view(`rshare_${'y'.repeat(43)}`, '203.0.113.100')).status).toBe(404);
  });

  it('count an IPv6 client by its /64: one host cycling through its own addresses is limited like one address', async () => {
    // A host is routinely given a whole /64: counted per address, it could guess tokens without ever reaching 429.
    for (let i = 0; i < PER_IP; i++) {
      expect((await view(`rshare_${String(i).padStart(43, 'v')}`, `2001:db8:5:6::${(i + 1).toString(16)}`)).status).toBe(404);
    }
    expect((await view(`rshare_${'w'.repeat(43)}`, '2001:db8:5:6:ffff:1:2:3')).status).toBe(429);
    // Another /64 is another client.
    expect((await view(`rshare_${'w'.repeat(43)}`, '2001:db8:5:7::1')).status).toBe(404);
  });

  it('answer a token holding a NUL character with the same 404 as any malformed token, headers included', async () => {
    for (const path of [`/api/v1/shared/reports/rshare_${'a'.repeat(20)}%00`, `/api/v1/shared/reports/%00/pdf`]) {
      const res = await api().get(path).set('X-Forwarded-For', clientIp());
      expect({ path, status: res.status, body: res.body }).toEqual({ path, status: 404, body: { detail: 'Report not found.' } });
      expectPrivateHeaders(res);
    }
  });

  it('are documented as public in the OpenAPI document', async () => {
    const doc = (await api().get('/api/v1/openapi.json')).body;
    expect(doc.paths['/api/v1/shared/reports/{token}'].get.security).toEqual([]);
    expect(doc.paths['/api/v1/reports/{id}/publication'].post['x-required-scope']).toBe('reports:publish');
    expect(doc.paths['/api/v1/reports/{id}/shares/{share_id}'].delete['x-required-scope']).toBe('reports:revoke_share');
  });
});

describe('logs', () => {
  it('the access log masks a share token in the request path', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = { info: (_message: string, meta: Record<string, unknown>) => lines.push(meta) } as unknown as Logger;
    const app = express().use(accessLog(logger)).get('/api/v1/shared/reports/:token/pdf', (_req, res) => void res.status(404).end());
    const token = `rshare_${'Ab_-'.repeat(10)}xyz`;
    await request(app).get(`/api/v1/shared/reports/${token}/pdf`);
    expect(lines).toEqual([expect.objectContaining({ path: '/api/v1/shared/reports/rshare_[redacted]/pdf', status: 404 })]);
    expect(JSON.stringify(lines)).not.toContain(token.slice(7));
  });
});
