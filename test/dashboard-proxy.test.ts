// The dashboard behind a reverse proxy (test/support/reverse-proxy.ts: node:http, Host rewritten
// to the backend's address, X-Forwarded-* set) serving it under a sub-path: in chromium, on every
// dialect, pause, resume, trigger and unlock work from the page reached by the proxy's public name,
// each redirect lands back under the sub-path, and an error page's links lead there too. Then the
// real `cronguard dashboard --base-path --allow-host` behind the same proxy, in raw HTTP.
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserTestsRun, CHROMIUM, serve } from './support/dashboard.js';
import { startDashboardCommand } from './support/dashboard-command.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { formSecrets, rawRequest } from './support/raw-http.js';
import { reverseProxy } from './support/reverse-proxy.js';

const PREFIX = '/ops/cronguard';

describe.skipIf(!browserTestsRun())('dashboard behind a reverse proxy, in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    // The proxy's public name, as the operator's browser resolves it.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--host-resolver-rules=MAP ops.proxy.test 127.0.0.1'],
    });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  eachDialectAtOnce(
    'under a sub-path with Host rewritten (basePath, trustProxy, allowedHosts): every control, redirect and error link works',
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target);
      // A held lock, for unlock.
      await guard.run({ name: 'report', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, () => 'done');
      const backend = await serve(
        guard.dashboard({
          readOnly: false,
          authorize: () => true,
          basePath: PREFIX,
          trustProxy: true,
          allowedHosts: ['ops.proxy.test'],
        }),
      );
      const port = await reverseProxy(backend, PREFIX);
      const publicUrl = `http://ops.proxy.test:${port}${PREFIX}`;
      const context = await browser.newContext();
      try {
        const page = await context.newPage();
        expect((await page.goto(`${publicUrl}/`))?.status()).toBe(200);
        await page.getByRole('link', { name: 'report' }).first().click();
        await page.waitForURL(`${publicUrl}/job?name=report`);

        await page.getByRole('button', { name: 'Pause' }).click();
        await page.waitForURL(`${publicUrl}/job?name=report&notice=paused`);
        expect((await guard.locks()).find((lock) => lock.name === 'report')?.paused?.by).toBe('dashboard');
        await page.getByRole('button', { name: 'Resume' }).click();
        await page.waitForURL(`${publicUrl}/job?name=report&notice=resumed`);
        await page.getByRole('button', { name: 'Trigger' }).click();
        await page.waitForURL(`${publicUrl}/job?name=report&notice=triggered`);
        await page.getByLabel('The process holding this lock is gone').check();
        await page.getByRole('button', { name: 'Unlock' }).click();
        await page.waitForURL(`${publicUrl}/job?name=report&notice=unlocked`);
        const lock = (await guard.locks()).find((candidate) => candidate.name === 'report');
        expect([lock?.state, lock?.paused, lock?.pendingTrigger?.by]).toEqual(['free', null, 'dashboard']);
        expect((await guard.controls('report')).map((record) => record.action)).toEqual(['unlock', 'trigger', 'resume', 'pause']);

        // An error page: its links are under the sub-path, and lead back through the proxy.
        expect((await page.goto(`${publicUrl}/job?name=no-such-job`))?.status()).toBe(404);
        const hrefs = await page.locator('a').evaluateAll((links) => links.map((link) => link.getAttribute('href')));
        expect(hrefs.length).toBeGreaterThan(2);
        for (const href of hrefs) expect(href?.startsWith(`${PREFIX}/`)).toBe(true);
        await page.getByRole('link', { name: 'Back to the overview' }).click();
        await page.waitForURL(`${publicUrl}/`);
        expect(await page.title()).not.toMatch(/Error/);
      } finally {
        await context.close();
      }
      // Past the proxy (its own address), or through it under a name it was not given: nothing.
      expect((await rawRequest(`${backend}${PREFIX}/`)).status).toBe(421);
      const rebound = await rawRequest(`http://127.0.0.1:${port}${PREFIX}/`, { headers: { Host: `rebind.test:${port}` } });
      expect(rebound.status).toBe(421);
    },
    60_000,
  );
});

describe('cronguard dashboard behind a reverse proxy', () => {
  it('--base-path and --allow-host: pages, a control and its redirect work through the proxy, under its name only', async () => {
    const sqlite = dialectTargets().find((target) => target.name === 'sqlite');
    if (sqlite === undefined) throw new Error('no sqlite target');
    const { guard, url: database, prefix } = await migratedGuard(sqlite);
    await guard.run({ name: 'report', lockAtMostFor: '1m' }, () => 'done');
    const dashboard = await startDashboardCommand([
      ...['--database', database, '--table-prefix', prefix, '--port', '0'],
      ...['--base-path', PREFIX, '--allow-host', 'ops.proxy.test'],
    ]);
    expect(dashboard.url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:\\d+${PREFIX}/$`));
    const port = await reverseProxy(dashboard.url, PREFIX);
    const through = (path: string): string => `http://127.0.0.1:${port}${PREFIX}${path}`;
    const host = { Host: `ops.proxy.test:${port}` };
    const page = await rawRequest(through('/job?name=report'), { headers: host });
    expect(page.status).toBe(200);
    expect(page.body).toContain(`action="${PREFIX}/job/pause"`);
    const { cookie, csrf } = formSecrets(page);
    expect(cookie).toContain('cronguard_csrf=');
    const paused = await rawRequest(through('/job/pause'), {
      method: 'POST',
      headers: { ...host, Origin: `http://ops.proxy.test:${port}`, Cookie: cookie },
      form: { csrf, job: 'report' },
    });
    expect([paused.status, paused.headers.location]).toEqual([303, `${PREFIX}/job?name=report&notice=paused`]);
    expect((await rawRequest(through(`/job?name=report&notice=paused`), { headers: { ...host, Cookie: cookie } })).status).toBe(200);
    expect((await guard.locks()).find((lock) => lock.name === 'report')?.paused?.by).toBe('dashboard');
    // The Host the proxy rewrote to is the dashboard's own address; a foreign Origin is still refused.
    const foreign = await rawRequest(through('/job/resume'), {
      method: 'POST',
      headers: { ...host, Origin: `http://rebind.test:${port}`, Cookie: cookie },
      form: { csrf, job: 'report' },
    });
    expect(foreign.status).toBe(403);
    expect(await dashboard.stop()).toBe(0);
  }, 30_000);
});
