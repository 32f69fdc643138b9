// Lists longer than one page of the API (100 rows) in a real browser (Debian's Chromium through playwright-core)
// against the real API serving the built dashboard: a list shows its first page and a "Show more" button that
// appends the next; a lookup that must see every row (whose each API key is, and whether its Revoke is offered)
// reads every page.
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { newId } from '../../../packages/db/src';
import { bearer, createOrg, TEST_PASSWORD, type TestOrg } from '../../api/test/support/fixtures';
import { createHarness, uniqueSuffix, type Harness } from '../../api/test/support/harness';
import { freePort, launchChromium, logIn, SCREENSHOTS, step as stepOf } from './support/browser';

let h: Harness;
let server: Server;
let base: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let org: TestOrg;

const step = <T>(name: string, action: () => Promise<T>) => stepOf(() => page, `long-lists-${name}`, action);

/** `n` members and `n` projects, each newer than the organization's first four members (and so listed before them). */
async function seed(n: number): Promise<void> {
  const s = uniqueSuffix();
  const users = Array.from({ length: n }, (_, i) => ({ id: newId('usr'), email: `crowd-${i}-${s}@example.test`, name: `Crowd ${i}`, status: 'active' as const }));
  await h.deps.prisma.user.createMany({ data: users });
  await h.deps.prisma.membership.createMany({ data: users.map((u) => ({ id: newId('mem'), organizationId: org.id, userId: u.id, role: 'member' as const })) });
  await h.deps.prisma.project.createMany({ data: Array.from({ length: n }, (_, i) => ({ id: newId('prj'), organizationId: org.id, name: `Crowded project ${i}` })) });
}

/** Polls `read` until it answers `expected` (the page loads its pages asynchronously); fails with the last answer. */
async function until<T>(read: () => Promise<T>, expected: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (expected(value)) return value;
    if (Date.now() > deadline) throw new Error(`still ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  h = await createHarness({ PUBLIC_BASE_URL: base, RATE_LIMIT_PER_MINUTE: '5000', LOGIN_RATE_LIMIT_PER_MINUTE: '100' });
  org = await createOrg(h);
  server = await new Promise<Server>((resolve) => {
    const s = h.app.listen(port, '127.0.0.1', () => resolve(s));
  });
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await context?.close().catch(() => undefined);
  await browser?.close();
  await new Promise((r) => server?.close(r));
  await h?.close();
});

it('shows 100 rows, then the rest on "Show more"; the API-keys page knows whose each key is when its owner is on the second page of members', async () => {
  // The owner's and a manager's keys, made before 120 newer members push both people to the members' second page.
  for (const who of [org.owner, org.manager]) {
    const minted = await fetch(`${base}/api/v1/api-keys`, {
      method: 'POST',
      headers: { ...bearer(who.token), 'content-type': 'application/json' },
      body: JSON.stringify({ name: `key of ${who.role}`, scopes: ['projects:read'] }),
    });
    expect(minted.status).toBe(201);
  }
  await seed(120);

  await step('projects', async () => {
    await logIn(page, base, org.admin.email, TEST_PASSWORD);
    await page.getByRole('heading', { name: 'Projects' }).waitFor();
    const projects = page.getByRole('main').getByRole('link', { name: /^Crowded project / });
    await until(() => projects.count(), (n) => n === 100);
    await page.getByRole('button', { name: 'Show more projects' }).click();
    await until(() => projects.count(), (n) => n === 120);
    expect(await page.getByRole('button', { name: 'Show more projects' }).count()).toBe(0);
  });

  await step('members', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Members' }).click();
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    const rows = page.getByRole('main').locator('tbody tr');
    await until(() => rows.count(), (n) => n === 100);
    expect(await page.getByRole('cell', { name: org.member.email }).count()).toBe(0);
    await page.getByRole('button', { name: 'Show more members' }).click();
    await until(() => rows.count(), (n) => n === 124);
    await page.getByRole('cell', { name: org.member.email }).waitFor();
    // A change to a row of the second page reloads the list as far as it was shown: the row stays, changed.
    await page.getByLabel(`Role of ${org.member.email}`).selectOption('manager');
    await until(async () => (await h.deps.prisma.membership.findFirstOrThrow({ where: { organizationId: org.id, userId: org.member.id } })).role, (role) => role === 'manager');
    await until(() => page.getByLabel(`Role of ${org.member.email}`).inputValue(), (role) => role === 'manager');
    await page.waitForTimeout(500);
    expect(await rows.count()).toBe(124);
  });

  await step('api-keys', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    const managerKey = page.getByRole('row', { name: /key of manager/ });
    await until(() => managerKey.textContent(), (text) => !!text?.includes(org.manager.email));
    expect(await managerKey.getByRole('button', { name: 'Revoke key of manager' }).count()).toBe(1);
    // The owner's role is above the admin's: the API refuses, so the page offers no Revoke.
    const ownerKey = page.getByRole('row', { name: /key of owner/ });
    await until(() => ownerKey.textContent(), (text) => !!text?.includes(org.owner.email));
    expect(await ownerKey.getByRole('button').count()).toBe(0);
  });

  await step('erasure', async () => {
    // 105 requests cancelled long ago, and one awaiting confirmation (not 'previewing': the run's database is shared,
    // and another file's erasure run would take that one up).
    const erasure = (i: number, status: string, createdAt: Date) => ({
      id: newId('era', createdAt.getTime()),
      organizationId: org.id,
      subjectEmailKey: `key-${i}-${uniqueSuffix()}`,
      status,
      pseudonymName: `Erased person ${i}`,
      pseudonymEmail: `erased-${i}@erased.invalid`,
      requestedById: org.owner.id,
      createdAt,
    });
    const long = Date.now() - 86_400_000;
    await h.deps.prisma.erasureRequest.createMany({ data: Array.from({ length: 105 }, (_, i) => erasure(i, 'cancelled', new Date(long + i * 1000))) });
    const waiting = await h.deps.prisma.erasureRequest.create({ data: erasure(105, 'awaiting_confirmation', new Date()) });
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Erasure' }).click();
    await page.getByRole('heading', { name: 'Erasure requests' }).waitFor();
    const requests = page.locator('tbody[data-testid^="erasure-"]');
    await until(() => requests.count(), (n) => n === 100);
    await page.getByRole('button', { name: 'Show more erasure requests' }).click();
    await until(() => requests.count(), (n) => n === 106);
    // Cancelling the newest reloads the list as far as it was shown (as the 2 s follow of a request being worked on
    // does): the rows of the second page stay.
    await page.getByRole('button', { name: `Cancel ${waiting.id}` }).click();
    await until(async () => (await h.deps.prisma.erasureRequest.findUniqueOrThrow({ where: { id: waiting.id } })).status, (s) => s === 'cancelled');
    await page.getByTestId(`erasure-${waiting.id}`).getByText('cancelled', { exact: true }).waitFor();
    await page.waitForTimeout(500);
    expect(await requests.count()).toBe(106);
    expect(await page.getByRole('button', { name: 'Show more erasure requests' }).count()).toBe(0);
  });
});
