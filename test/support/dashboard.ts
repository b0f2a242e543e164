import { existsSync, mkdirSync } from 'node:fs';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect as globalExpect, type ExpectStatic } from 'vitest';
import type { Guard } from '../../src/index.js';
import { closeWhenTestEnds } from './case-cleanup.js';

/** The job name every page must show as text: an HTML injection if it were not escaped. */
export const HOSTILE_NAME = '<img src=x onerror=alert(1)>';

/** Debian's chromium, driven by playwright-core (which downloads no browser). */
export const CHROMIUM = process.env['CRONGUARD_CHROMIUM'] ?? '/usr/bin/chromium';

/** False when there is no chromium outside CI (the browser tests are then skipped, loudly); under CI=true a missing one fails. */
export function browserTestsRun(): boolean {
  if (existsSync(CHROMIUM) || process.env['CI'] === 'true') return true;
  process.stderr.write(
    `\n*** cronguard: dashboard browser tests are SKIPPED: no ${CHROMIUM}. Install it with: apt-get install -y chromium ***\n\n`,
  );
  return false;
}

const SCREENSHOTS = fileURLToPath(new URL('../../.tmp/screenshots/', import.meta.url));

/**
 * A full-page picture of `page` as `.tmp/screenshots/<name>.png`, only when `CRONGUARD_SCREENSHOTS`
 * is set (the docs' dashboard images are taken so): each costs the browser about as much CPU as
 * opening a page, and a run asserts nothing of them.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  if ((process.env['CRONGUARD_SCREENSHOTS'] ?? '') === '') return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage: true });
}

/** Debian's chromium, headless; `--no-sandbox` as the tests run as root. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}

/**
 * A page at `url` that records every dialog (an alert would be a script injected through a name; there
 * should be none). `beforeLoad` runs on the page before it loads (`page.clock.install()`).
 */
export async function openPage(
  browser: Browser,
  url: string,
  headers: Record<string, string> = {},
  beforeLoad?: (page: Page) => Promise<void>,
): Promise<{ page: Page; dialogs: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, extraHTTPHeaders: headers });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  await beforeLoad?.(page);
  await page.goto(url);
  return { page, dialogs };
}

/**
 * A job with a declared every-second schedule (a decorated job with `cron`) whose runs the test
 * starts by hand: `at(i)` is its i-th slot from the next whole second at least 0.5 s away, and
 * `runAt(i)` runs that slot on time, as a scheduler would start it. `expect`: a concurrent test's own
 * (its context's), since `expect.poll` refuses the global one there.
 */
export async function everySecondJob(
  guard: Guard,
  name: string,
  expect: ExpectStatic = globalExpect,
): Promise<{ at: (index: number) => Date; runAt: (index: number) => Promise<void> }> {
  guard.guarded({ name, lockAtMostFor: '1m', cron: '* * * * * *' });
  await expect.poll(async () => (await guard.slots({ job: name })).length).toBe(1);
  const first = Math.ceil((Date.now() + 500) / 1_000) * 1_000;
  const at = (index: number): Date => new Date(first + index * 1_000);
  const runAt = async (index: number): Promise<void> => {
    await sleep(Math.max(0, at(index).getTime() + 20 - Date.now()));
    await guard.run({ name, lockAtMostFor: '1m', slot: at(index) }, () => 'ok');
  };
  return { at, runAt };
}

function closeServer(server: Server): Promise<unknown> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(resolve));
}

/** Serves a request listener on a free loopback port until the end of the test (`closeWhenTestEnds`). */
export async function serve(listener: RequestListener): Promise<string> {
  const server = createServer(listener);
  closeWhenTestEnds(() => closeServer(server));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

type Handler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

/**
 * A connect-style app (what Express's `app.use(path, handler)` does): under `mount`, req.url loses
 * the mount path and req.baseUrl holds it, and the handler gets a `next` that the app answers.
 */
export function connectStyleApp(mount: string, handler: Handler): RequestListener {
  return (req, res) => {
    const next = (): void => void res.writeHead(404, { 'Content-Type': 'text/plain' }).end('the app’s own 404');
    const url = req.url ?? '/';
    if (url !== mount && !url.startsWith(`${mount}/`) && !url.startsWith(`${mount}?`)) return next();
    Object.assign(req, {
      baseUrl: mount,
      originalUrl: url,
      url: url.slice(mount.length) === '' ? '/' : url.slice(mount.length),
    });
    if (req.url?.startsWith('?') === true) req.url = `/${req.url}`;
    handler(req, res, next);
  };
}

/**
 * Real history for the dashboard to show: a job with slots, a failure among its runs, a run that
 * overran its lock, a job with a hostile name whose error is hostile too, and a lock held by
 * lockAtLeastFor.
 */
export async function seedHistory(guard: Guard): Promise<void> {
  const minute = 60_000;
  const firstSlot = Math.floor(Date.now() / minute) * minute - 12 * minute;
  for (let index = 0; index < 12; index++) {
    const slot = new Date(firstSlot + index * minute);
    await guard
      .run({ name: 'nightly-report', lockAtMostFor: '1m', slot }, async () => {
        await sleep(20 + index * 5);
        if (index === 7) throw new Error('disk full: /var/reports');
      })
      .catch(() => undefined);
  }
  await guard.run({ name: 'slow-sync', lockAtMostFor: '10s' }, () => sleep(50));
  await guard.run({ name: 'slow-sync', lockAtMostFor: '300ms' }, () => sleep(600));
  await guard
    .run({ name: HOSTILE_NAME, lockAtMostFor: '1m' }, () => Promise.reject(new Error('<script>alert(2)</script>')))
    .catch(() => undefined);
  await guard.run({ name: 'cache-warm', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, () => sleep(10));
}
