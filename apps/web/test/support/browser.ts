// A real Chromium (Debian's, driven by playwright-core) against the real API serving the built dashboard on a
// loopback port, over a world of the worker tests (API, in-process worker, PostgreSQL, Redis, HTTPS receiver).
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer } from 'node:net';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createWorld, type World, type WorldOptions } from '../../../worker/test/support/world';

const SCREENSHOTS = path.resolve(__dirname, '../../../../test-results/dashboard');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

export interface BrowserWorld {
  w: World;
  base: string;
  page(): Promise<Page>;
  /** Runs one step; on failure saves a screenshot named after it, then fails. */
  step<T>(name: string, action: () => Promise<T>): Promise<T>;
  logIn(email: string, password: string): Promise<void>;
  close(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export async function startBrowserWorld(options: WorldOptions = {}): Promise<BrowserWorld> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const w = await createWorld({ ...options, env: { PUBLIC_BASE_URL: base, RATE_LIMIT_PER_MINUTE: '5000', ...options.env } });
  const server = await new Promise<Server>((resolve) => {
    const s = w.h.app.listen(port, '127.0.0.1', () => resolve(s));
  });
  let browser: Browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  } catch (err) {
    await new Promise((r) => server.close(r));
    await w.close();
    throw err;
  }
  let context: BrowserContext | null = null;
  let current: Page | null = null;
  const world: BrowserWorld = {
    w,
    base,
    async page() {
      await context?.close();
      context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      current = await context.newPage();
      current.setDefaultTimeout(10_000);
      current.on('dialog', (dialog) => void dialog.accept());
      return current;
    },
    async step(name, action) {
      try {
        return await action();
      } catch (err) {
        mkdirSync(SCREENSHOTS, { recursive: true });
        const file = path.join(SCREENSHOTS, `${name.replace(/[^a-z0-9]+/gi, '-')}.png`);
        await current?.screenshot({ path: file, fullPage: true }).catch(() => undefined);
        throw new Error(`step "${name}" failed (screenshot: ${file}): ${(err as Error).message}`);
      }
    },
    async logIn(email, password) {
      const page = current ?? (await world.page());
      await page.goto(`${base}/login`);
      await page.getByLabel('E-mail').fill(email);
      await page.getByLabel('Password').fill(password);
      await page.getByRole('button', { name: 'Log in' }).click();
    },
    async close() {
      await context?.close();
      await browser.close();
      await new Promise((r) => server.close(r));
      await w.close();
    },
  };
  return world;
}
