// Published and shared reports in a real browser (Debian's Chromium through playwright-core) against the real API
// serving the built dashboard: a manager publishes a report and shares it by e-mail from the report page; signed
// out, the published URL and the mailed link (read from the mail outbox) show the report and download its PDF;
// revoking and unpublishing end them on the next load; a member sees the report without the controls.
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { bearer, createOrg, insertGrant, insertProject, TEST_PASSWORD, type TestOrg } from '../../api/test/support/fixtures';
import { insertAssessmentIn, insertReadyReport } from '../../api/test/support/domain';
import { createHarness, type Harness } from '../../api/test/support/harness';
import { freePort, launchChromium, logIn, SCREENSHOTS, step as stepOf } from './support/browser';

let h: Harness;
let server: Server;
let base: string;
let browser: Browser;
let org: TestOrg;
let report: { id: string; title: string };
let assessmentId: string;
const pdf = Buffer.from('%PDF-1.3\n% the shared report document\n%%EOF\n');
const contexts: BrowserContext[] = [];
let current: Page | undefined;

const step = <T>(name: string, action: () => Promise<T>) => stepOf(() => current, `report-sharing-${name}`, action);

async function newPage(): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  contexts.push(context);
  const page = await context.newPage();
  page.on('dialog', (dialog) => void dialog.accept());
  current = page;
  return page;
}

function mailedLink(to: string): string {
  const mails = h.mail().filter((m) => m.to === to);
  if (mails.length === 0) throw new Error(`no mail to ${to}`);
  const match = /https?:\/\/\S+\/shared\/reports\/rshare_[A-Za-z0-9_-]+/.exec(mails[mails.length - 1].text);
  if (!match) throw new Error(`no report link in: ${mails[mails.length - 1].text}`);
  return match[0];
}

async function auditActions(reportId: string): Promise<Array<{ action: string; actor_type: string; actor_label: string }>> {
  const res = await fetch(`${base}/api/v1/audit-events?target_id=${reportId}&limit=100`, { headers: bearer(org.owner.token) });
  return ((await res.json()) as { data: Array<{ action: string; actor_type: string; actor_label: string }> }).data;
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  h = await createHarness({ PUBLIC_BASE_URL: base, RATE_LIMIT_PER_MINUTE: '5000', LOGIN_RATE_LIMIT_PER_MINUTE: '100' });
  org = await createOrg(h);
  const project = await insertProject(h, org.id, 'Storefront');
  const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
  assessmentId = assessment.id;
  report = await insertReadyReport(h, org.id, assessment.id, { title: 'Storefront pentest Q4', pdf });
  // Managers and members read the project's reports through a grant.
  await insertGrant(h, org.id, { projectId: project.id }, { userId: org.manager.id }, 'read');
  await insertGrant(h, org.id, { projectId: project.id }, { userId: org.member.id }, 'read');
  server = await new Promise<Server>((resolve) => {
    const s = h.app.listen(port, '127.0.0.1', () => resolve(s));
  });
  browser = await launchChromium();
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => undefined);
  await browser?.close();
  await new Promise((r) => server?.close(r));
  await h?.close();
});

describe('report publishing and sharing in Chromium', () => {
  it('publish, share by e-mail, open both signed out, download the PDF, revoke, unpublish', async () => {
    const manager = await newPage();
    await step('manager-opens-report', async () => {
      await logIn(manager, base, org.manager.email, TEST_PASSWORD);
      await manager.getByRole('heading', { name: 'Projects' }).waitFor();
      await manager.goto(`${base}/assessments/${assessmentId}`);
      await manager.getByRole('link', { name: 'Storefront pentest Q4' }).click();
      await manager.getByRole('heading', { name: 'Report Storefront pentest Q4' }).waitFor();
      await manager.getByText('Nobody outside the organization has access.').waitFor();
      expect(await manager.getByRole('button', { name: 'Unpublish' }).count()).toBe(0);
    });

    let publishedUrl = '';
    await step('publish', async () => {
      await manager.getByRole('button', { name: 'Publish', exact: true }).click();
      await manager.getByText('It is shown only once').waitFor();
      publishedUrl = (await manager.getByTestId('secret-value').textContent()) ?? '';
      expect(publishedUrl).toMatch(new RegExp(`^${base}/shared/reports/rshare_[A-Za-z0-9_-]{43}$`));
      await manager.getByRole('cell', { name: 'Published URL', exact: true }).waitFor();
      await manager.getByRole('button', { name: 'Publish again (new URL)' }).waitFor();
    });

    const auditor = `auditor-${Date.now()}@customer.example`;
    await step('share-by-email', async () => {
      await manager.getByLabel('E-mail to share with').fill(auditor);
      await manager.getByRole('button', { name: 'Share', exact: true }).click();
      await manager.getByText(`A link to the report was mailed to ${auditor}.`).waitFor();
      await manager.getByRole('cell', { name: auditor, exact: true }).waitFor();
      await manager.screenshot({ path: path.join(SCREENSHOTS, 'report-sharing-report-page.png'), fullPage: true });
    });

    const outsider = await newPage();
    await step('published-url-signed-out', async () => {
      // The dashboard asks who is signed in on every page, this one too: its answer decides the signed-in header.
      const whoAmI = outsider.waitForResponse((r) => new URL(r.url()).pathname === '/api/v1/auth/me');
      const res = await outsider.goto(publishedUrl);
      // The page itself is served with the private headers too.
      expect(res?.headers()['cache-control']).toBe('no-store');
      expect(res?.headers()['referrer-policy']).toBe('no-referrer');
      expect(res?.headers()['x-robots-tag']).toBe('noindex');
      await outsider.getByRole('heading', { name: 'Storefront pentest Q4' }).waitFor();
      await outsider.getByText(`Shared by ${org.name}.`).waitFor();
      await outsider.getByText('Storefront', { exact: true }).waitFor();
      await outsider.screenshot({ path: path.join(SCREENSHOTS, 'report-sharing-public-page.png'), fullPage: true });
      // Nobody is signed in here, and the page has had that answer (and a turn to render it) before the header is
      // read: no Log out button (a button, in the dashboard's header) and no main navigation.
      const me = await whoAmI;
      expect(me.status()).toBe(401);
      await me.finished();
      await outsider.evaluate('new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 50)))');
      expect(await outsider.getByRole('button', { name: 'Log out' }).count()).toBe(0);
      expect(await outsider.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
      const [download] = await Promise.all([outsider.waitForEvent('download'), outsider.getByRole('link', { name: 'Download PDF' }).click()]);
      expect(download.suggestedFilename()).toBe('Storefront-pentest-Q4.pdf');
      const stream = await download.createReadStream();
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      expect(Buffer.compare(Buffer.concat(chunks), pdf)).toBe(0);
    });

    const emailed = mailedLink(auditor);
    await step('mailed-link-signed-out', async () => {
      expect(new URL(emailed).origin).toBe(base);
      await outsider.goto(emailed);
      await outsider.getByRole('heading', { name: 'Storefront pentest Q4' }).waitFor();
      await outsider.getByRole('link', { name: 'Download PDF' }).waitFor();
    });

    await step('views-audited-and-counted', async () => {
      const entries = await auditActions(report.id);
      const byShare = entries.filter((e) => e.actor_type === 'report_share');
      expect(byShare.map((e) => `${e.action} ${e.actor_label}`).sort()).toEqual([
        'report.share_downloaded published link',
        `report.share_viewed ${auditor}`,
        'report.share_viewed published link',
      ]);
      await manager.reload();
      await manager.getByRole('row', { name: /Published URL active .* 2 / }).waitFor();
    });

    await step('revoke-grant', async () => {
      await manager.getByRole('button', { name: `Revoke ${auditor}` }).click();
      await manager.getByRole('row', { name: new RegExp(`${auditor.replace(/[.]/g, '\\.')} revoked`) }).waitFor();
      await outsider.goto(emailed);
      await outsider.getByRole('heading', { name: 'Report not available' }).waitFor();
      await outsider.goto(publishedUrl);
      await outsider.getByRole('heading', { name: 'Storefront pentest Q4' }).waitFor();
    });

    await step('unpublish', async () => {
      await manager.getByRole('button', { name: 'Unpublish' }).click();
      await manager.getByRole('row', { name: /Published URL revoked/ }).waitFor();
      await manager.getByRole('button', { name: 'Publish', exact: true }).waitFor();
      await outsider.goto(publishedUrl);
      await outsider.getByRole('heading', { name: 'Report not available' }).waitFor();
      await outsider.getByText('This link is invalid, has expired or was revoked.').waitFor();
    });
  });

  it('a member sees the report and its external access without the controls', async () => {
    // The journey above revoked everything it made: the owner publishes the report and shares it again (through the
    // API), so the page lists active grants that a manager could revoke and unpublish.
    const grantee = `member-view-${Date.now()}@customer.example`;
    const asOwner = { ...bearer(org.owner.token), 'Content-Type': 'application/json' };
    const published = await fetch(`${base}/api/v1/reports/${report.id}/publication`, { method: 'POST', headers: asOwner, body: '{}' });
    expect(published.status).toBe(201);
    const shared = await fetch(`${base}/api/v1/reports/${report.id}/shares`, { method: 'POST', headers: asOwner, body: JSON.stringify({ email: grantee }) });
    expect(shared.status).toBe(201);

    const member = await newPage();
    await step('member-report-page', async () => {
      await logIn(member, base, org.member.email, TEST_PASSWORD);
      await member.getByRole('heading', { name: 'Projects' }).waitFor();
      await member.goto(`${base}/reports/${report.id}`);
      await member.getByRole('heading', { name: 'Report Storefront pentest Q4' }).waitFor();
      // The grants are a request of their own (the table is there before they are): wait for both active rows before
      // saying that no row offers Revoke and that the active publication offers no Unpublish.
      const external = member.getByRole('table', { name: 'External access' });
      const grantRow = external.getByRole('row', { name: new RegExp(`${grantee.replace(/[.]/g, '\\.')} active`) });
      const linkRow = external.getByRole('row', { name: /Published URL active/ });
      await grantRow.waitFor();
      await linkRow.waitFor();
      expect(await member.getByRole('button', { name: /^Publish/ }).count()).toBe(0);
      expect(await member.getByRole('button', { name: 'Unpublish' }).count()).toBe(0);
      expect(await member.getByRole('button', { name: 'Share', exact: true }).count()).toBe(0);
      expect(await member.getByRole('button', { name: /^Revoke/ }).count()).toBe(0);
      // A member holds reports:read, not reports:download.
      expect(await member.getByRole('link', { name: 'Download PDF' }).count()).toBe(0);
    });
  });
});
