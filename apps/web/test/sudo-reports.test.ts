// Sudo mode on the report page (docs/api.md, "Sensitive changes"), in Chromium: a person whose sign-in is more than
// 10 minutes old publishes a report to a URL and shares it with an e-mail address. The page sends each as it is; only
// when the API asks does the form show "Confirm with your password"; a wrong password shows the API's message, the
// right one publishes (the URL is shown) or shares (the link is mailed). Unpublishing never asks.
import type { Page, Request } from 'playwright-core';
import { createUserInOrg, insertProject, TEST_PASSWORD } from '../../api/test/support/fixtures';
import { insertAssessmentIn, insertReadyReport } from '../../api/test/support/domain';
import { startBrowserWorld, type BrowserWorld } from './support/browser-world';
import { requestsTo, signedInAWhileAgo } from './support/sudo';

let b: BrowserWorld;
let page: Page;

beforeAll(async () => {
  b = await startBrowserWorld();
}, 60_000);
beforeEach(async () => {
  page = await b.page();
});
afterAll(() => b?.close());

const passwordsSent = (posts: Request[]) => posts.map((r) => (JSON.parse(r.postData() ?? '{}') as { current_password?: string }).current_password);

describe('publishing and sharing a report from an older sign-in', () => {
  it('each form asks for the password once the API does; a wrong one is refused, the right one publishes or shares', async () => {
    const { w, step } = b;
    const admin = await createUserInOrg(w.h, w.org.id, 'admin', 'sudo-reports');
    const project = await insertProject(w.h, w.org.id, 'Sudo storefront');
    const assessment = await insertAssessmentIn(w.h, w.org.id, project.id, 'completed');
    const report = await insertReadyReport(w.h, w.org.id, assessment.id, { title: 'Sudo pentest' });
    const liveShares = (kind: string) => w.h.deps.prisma.reportShare.count({ where: { reportId: report.id, kind, revokedAt: null } });
    const publishes = requestsTo(page, `/api/v1/reports/${report.id}/publication`, 'POST');
    const shares = requestsTo(page, `/api/v1/reports/${report.id}/shares`, 'POST');

    await step('open-report', async () => {
      await b.logIn(admin.email, TEST_PASSWORD);
      await page.getByRole('navigation', { name: 'Main' }).waitFor();
      await page.goto(`${b.base}/reports/${report.id}`);
      await page.getByRole('heading', { name: 'Report Sudo pentest' }).waitFor();
      await page.getByText('Nobody outside the organization has access.').waitFor();
    });
    await signedInAWhileAgo(b, page);

    const publish = page.getByRole('form', { name: 'Publish the report' });
    await step('publish-asked', async () => {
      await publish.getByRole('button', { name: 'Publish', exact: true }).click();
      await publish.getByText('You signed in more than 10 minutes ago: confirm with your password to publish the report.').waitFor();
      // The API's text for clients is not shown as an error; nothing was published.
      expect(await page.getByRole('alert').filter({ hasText: 'current_password' }).count()).toBe(0);
      expect(await liveShares('link')).toBe(0);
    });
    await step('publish-wrong-password', async () => {
      await publish.getByLabel('Confirm with your password').fill('not the password at all');
      await publish.getByRole('button', { name: 'Publish', exact: true }).click();
      await page.getByRole('alert').filter({ hasText: 'The current password is not correct.' }).waitFor();
      expect(await publish.getByLabel('Confirm with your password').inputValue()).toBe('');
      expect(await liveShares('link')).toBe(0);
    });
    await step('published-with-password', async () => {
      await publish.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await publish.getByRole('button', { name: 'Publish', exact: true }).click();
      await page.getByText('It is shown only once').waitFor();
      await page.getByRole('cell', { name: 'Published URL', exact: true }).waitFor();
      expect(await publish.getByLabel('Confirm with your password').count()).toBe(0);
      expect(await liveShares('link')).toBe(1);
    });

    const share = page.getByRole('form', { name: 'Share the report by e-mail' });
    const auditor = `auditor-${Date.now()}@customer.example`;
    await step('share-asked', async () => {
      await share.getByLabel('E-mail to share with').fill(auditor);
      await share.getByRole('button', { name: 'Share', exact: true }).click();
      await share.getByText(`confirm with your password to share the report with ${auditor}`).waitFor();
      expect(await liveShares('email')).toBe(0);
      expect(w.h.mail().filter((m) => m.to === auditor)).toHaveLength(0);
    });
    await step('shared-with-password', async () => {
      await share.getByLabel('Confirm with your password').fill(TEST_PASSWORD);
      await share.getByRole('button', { name: 'Share', exact: true }).click();
      await page.getByText(`A link to the report was mailed to ${auditor}.`).waitFor();
      await page.getByRole('cell', { name: auditor, exact: true }).waitFor();
      expect(w.h.mail().filter((m) => m.to === auditor)).toHaveLength(1);
    });

    await step('unpublish-not-asked', async () => {
      await publish.getByRole('button', { name: 'Unpublish' }).click();
      await publish.getByRole('button', { name: 'Publish', exact: true }).waitFor();
      expect(await liveShares('link')).toBe(0);
    });

    expect(passwordsSent(publishes)).toEqual([undefined, 'not the password at all', TEST_PASSWORD]);
    expect(passwordsSent(shares)).toEqual([undefined, TEST_PASSWORD]);
    expect([...publishes, ...shares].every((r) => !r.url().includes('password'))).toBe(true);
  });
});
