// The erasure page in a real browser (Debian's Chromium through playwright-core) against the real API serving the
// built dashboard, with the worker's erasure job run in this process: an admin finds a member by name, files the
// request, reads the preview (counts and masked excerpts; nothing changed yet), confirms, and reads the receipt;
// a person without an account is found by e-mail, previewed and cancelled; the owner cannot be picked; a member is
// offered no erasure page.
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { newId } from '../../../packages/db/src';
import { createRedis } from '../../../packages/queue/src';
import { createOrg, createUserInOrg, insertProject, TEST_PASSWORD, type TestOrg } from '../../api/test/support/fixtures';
import { insertAssessmentIn, insertFinding } from '../../api/test/support/domain';
import { createHarness, uniqueSuffix, type Harness } from '../../api/test/support/harness';
import type { WorkerDeps } from '../../worker/src/deps';
import { runErasures } from '../../worker/src/erasure';
import { freePort, launchChromium, logIn, SCREENSHOTS, step as stepOf } from './support/browser';

let h: Harness;
let deps: WorkerDeps;
let server: Server;
let base: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let org: TestOrg;

const step = <T>(name: string, action: () => Promise<T>) => stepOf(() => page, `erasure-${name}`, action);

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  h = await createHarness({ PUBLIC_BASE_URL: base, RATE_LIMIT_PER_MINUTE: '5000', LOGIN_RATE_LIMIT_PER_MINUTE: '100' });
  deps = { config: h.config, logger: h.deps.logger, prisma: h.deps.prisma, redis: () => createRedis(h.config.redisUrl), clock: h.clock };
  org = await createOrg(h);
  server = await new Promise<Server>((resolve) => {
    const s = h.app.listen(port, '127.0.0.1', () => resolve(s));
  });
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on('dialog', (dialog) => void dialog.accept());
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await browser?.close();
  await new Promise((r) => server?.close(r));
  await h?.close();
});

describe('the erasure page in Chromium', () => {
  it('finds a member by name, previews, confirms and shows the receipt; an invitee by e-mail is previewed and cancelled', async () => {
    const s = uniqueSuffix();
    const person = await createUserInOrg(h, org.id, 'member', `dash-${s}`);
    await h.deps.prisma.user.update({ where: { id: person.id }, data: { name: 'Dana Erasmus' } });
    const project = await insertProject(h, org.id);
    const assessment = await insertAssessmentIn(h, org.id, project.id, 'completed');
    const finding = await insertFinding(h, assessment, { description: `Triaged by Dana Erasmus <${person.email}>.` });
    const guest = `guest-${s}@outside.test`;
    await h.deps.prisma.invitation.create({
      data: { id: newId('inv'), organizationId: org.id, email: guest, role: 'member', tokenHash: uniqueSuffix(), invitedById: org.admin.id, expiresAt: new Date(Date.now() + 86400_000) },
    });

    await step('find-member', async () => {
      await logIn(page, base, org.admin.email, TEST_PASSWORD);
      await page.getByRole('heading', { name: 'Projects' }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Erasure' }).click();
      await page.getByRole('heading', { name: 'Erasure requests' }).waitFor();
      // The owner is listed but cannot be picked.
      await page.getByLabel('Name or e-mail').fill(org.owner.email);
      await page.getByRole('button', { name: 'Search' }).click();
      expect(await page.getByRole('button', { name: new RegExp(`${org.owner.email}.*owner`) }).isDisabled()).toBe(true);
      await page.getByLabel('Name or e-mail').fill('dana eras');
      await page.getByRole('button', { name: 'Search' }).click();
      await page.getByRole('button', { name: `Dana Erasmus <${person.email}> (member, member)` }).click();
      await page.getByRole('button', { name: 'Preview the erasure' }).click();
    });

    const request = await poll(() => h.deps.prisma.erasureRequest.findFirst({ where: { subjectUserId: person.id } }));
    const row = page.getByTestId(`erasure-${request.id}`);
    await step('preview', async () => {
      await row.getByText('preparing the preview').waitFor();
      expect(await runErasures(deps)).toEqual({ previewed: 1, completed: 0, failed: 0 });
      // The page follows the request until the preview is there.
      await row.getByText('awaiting confirmation').waitFor();
      await row.getByText('findings.description: 1 row').waitFor();
      await row.getByText('Triaged by [name] <[e-mail]>.').waitFor();
      await row.getByText(/the name and the e-mail are searched/).waitFor();
      await page.screenshot({ path: path.join(SCREENSHOTS, 'erasure-preview.png'), fullPage: true });
      expect(await page.content()).not.toContain(person.email);
      // Nothing changed yet.
      expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } })).description).toContain(person.email);
    });

    await step('confirm', async () => {
      await row.getByRole('button', { name: `Confirm erasure ${request.id}` }).click();
      await row.getByText('erasing').waitFor();
      expect(await runErasures(deps)).toEqual({ previewed: 0, completed: 1, failed: 0 });
      await row.getByText('completed').waitFor();
      await row.getByText(/member removed, account erased/).click();
      await row.getByText('findings.description: 1 row').waitFor();
      expect((await h.deps.prisma.finding.findUniqueOrThrow({ where: { id: finding.id } })).description).toBe(
        `Triaged by ${request.pseudonymName} <${request.pseudonymEmail}>.`,
      );
    });

    await step('invitee-by-email', async () => {
      await page.getByLabel('Name or e-mail').fill(`guest-${s}`);
      await page.getByRole('button', { name: 'Search' }).click();
      await page.getByRole('button', { name: `<${guest}> (invitee, no account)` }).click();
      await page.getByRole('button', { name: 'Preview the erasure' }).click();
      const byEmail = await poll(async () => h.deps.prisma.erasureRequest.findFirst({ where: { organizationId: org.id, subjectUserId: null } }));
      const guestRow = page.getByTestId(`erasure-${byEmail.id}`);
      await guestRow.getByText('by e-mail').waitFor();
      await runErasures(deps);
      await guestRow.getByText('invitations.email: 1 row').waitFor();
      await guestRow.getByRole('button', { name: `Cancel ${byEmail.id}` }).click();
      await guestRow.getByText('cancelled').waitFor();
      expect((await h.deps.prisma.invitation.findFirstOrThrow({ where: { organizationId: org.id, email: guest } })).email).toBe(guest);
    });

    await step('member-has-no-erasure-page', async () => {
      await context.clearCookies();
      await logIn(page, base, org.member.email, TEST_PASSWORD);
      await page.getByRole('heading', { name: 'Projects' }).waitFor();
      expect(await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Erasure' }).count()).toBe(0);
      await page.goto(`${base}/governance/erasure`);
      await page.getByRole('heading', { name: 'Erasure requests' }).waitFor();
      await page.getByRole('alert').getByText(/governance:read/).waitFor();
      // No way to pick a person (the picker comes before any "Preview the erasure"): no search form, no field.
      expect(await page.getByRole('form', { name: 'Search people' }).count()).toBe(0);
      expect(await page.getByLabel('Name or e-mail').count()).toBe(0);
    });
  }, 90_000);
});

async function poll<T>(read: () => Promise<T | null | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}
