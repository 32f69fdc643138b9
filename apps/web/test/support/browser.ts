// Shared pieces of the dashboard's browser tests: Debian's Chromium through playwright-core (flags: DESIGN.md), a
// free loopback port for the API under test, and steps that save a screenshot when they fail.
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

export { freePort } from '../../../../test-support/private-services';

// A journey of pages and sign-ins takes 10-30 s alone and more while the full suite loads both cores: the browser
// tests get 90 s each unless they say otherwise.
jest.setTimeout(90_000);

export const SCREENSHOTS = path.resolve(__dirname, '../../../../test-results/dashboard');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/** Runs one step of a journey; on failure saves a screenshot of `page()` named after it, then fails. */
export async function step<T>(page: () => Page | undefined, name: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (err) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    const file = path.join(SCREENSHOTS, `${name.replace(/[^a-z0-9]+/gi, '-')}.png`);
    await page()?.screenshot({ path: file, fullPage: true }).catch(() => undefined);
    throw new Error(`step "${name}" failed (screenshot: ${file}): ${(err as Error).message}`);
  }
}

export async function logIn(page: Page, base: string, email: string, password: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Log in' }).click();
}
