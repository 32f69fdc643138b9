// A browser test's whole world: the real API serving the built dashboard on a loopback port over a world of the
// worker tests (API, in-process worker, PostgreSQL, Redis, HTTPS receiver), and Chromium (support/browser.ts).
import type { Server } from 'node:http';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createWorld, type World, type WorldOptions } from '../../../worker/test/support/world';
import { freePort, launchChromium, logIn, step } from './browser';

export interface BrowserWorld {
  w: World;
  base: string;
  /** A fresh browser context and page (the previous one is closed). */
  page(): Promise<Page>;
  /** Runs one step; on failure saves a screenshot of the current page named after it, then fails. */
  step<T>(name: string, action: () => Promise<T>): Promise<T>;
  logIn(email: string, password: string): Promise<void>;
  close(): Promise<void>;
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
    browser = await launchChromium();
  } catch (err) {
    await new Promise((r) => server.close(r));
    await w.close();
    throw err;
  }
  let context: BrowserContext | null = null;
  let current: Page | undefined;
  const world: BrowserWorld = {
    w,
    base,
    async page() {
      await context?.close();
      context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      current = await context.newPage();
      // A page that answers in under a second alone can take over 10 s while the full suite loads both cores.
      current.setDefaultTimeout(20_000);
      current.on('dialog', (dialog) => void dialog.accept());
      return current;
    },
    step: (name, action) => step(() => current, name, action),
    async logIn(email, password) {
      await logIn(current ?? (await world.page()), base, email, password);
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
