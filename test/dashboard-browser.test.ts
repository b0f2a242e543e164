// The web dashboard in a real headless browser (Debian's chromium via playwright-core), on every
// dialect with real history: what the pages show, that a hostile job name stays text, and that
// a state-changing request needs the controls on, `authorize` and the CSRF token.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe } from 'vitest';
import {
  browserTestsRun,
  everySecondJob,
  HOSTILE_NAME,
  launchChromium,
  screenshot,
  openPage as openBrowserPage,
  seedHistory,
  serve,
} from './support/dashboard.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { migratedGuard } from './support/guards.js';
import { REFRESH_SECONDS } from '../src/integrations/dashboard/html.js';

describe.skipIf(!browserTestsRun())('dashboard in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  const openPage = (url: string, headers: Record<string, string> = {}) => openBrowserPage(browser, url, headers);

  // Each scenario runs on the three dialects at once, each its own tables, server and pages in the
  // one browser: most of a scenario is waiting (on the clock, on the page's refresh).

  eachDialectAtOnce(
    'shows every job, an overran run on its job page, a hostile name as text, and no control when read-only',
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target, { lockedBy: 'replica-a' });
      await seedHistory(guard);
      const url = await serve(guard.dashboard());
      const { page, dialogs } = await openPage(`${url}/`);

      const jobs = await page.locator('main h2').allTextContents();
      expect(jobs).toEqual(expect.arrayContaining(['nightly-report', 'slow-sync', 'cache-warm', HOSTILE_NAME]));
      expect(await page.locator('section', { hasText: 'cache-warm' }).getByText('held').count()).toBe(1);
      // The strip: 12 marks for nightly-report, each with its shape, one of them the failure.
      const strip = page.locator('section', { has: page.getByRole('heading', { name: 'nightly-report' }) }).locator('.strip span');
      expect(await strip.count()).toBe(12);
      expect(await strip.filter({ hasText: '✗' }).count()).toBe(1);
      expect(await page.locator('img').count()).toBe(0);
      await screenshot(page, `dashboard-${target.name}-overview`);

      await page.getByRole('link', { name: 'slow-sync' }).click();
      await page.waitForURL(/\/job\?name=slow-sync/);
      const overran = page.locator('svg.timeline a[aria-label*="overran its lock"]');
      expect(await overran.count()).toBe(1);
      expect(await page.getByRole('cell', { name: /overran/ }).count()).toBe(1);
      await expect.poll(() => page.getByText('in the last day 1 run(s) overran their lock').count()).toBe(1);
      // The bar is reachable from the keyboard and leads to its run.
      await overran.focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(/\/run\?id=/);
      expect(await page.getByText('⚠ yes: it finished after its lock expired').count()).toBe(1);
      await page.goBack();
      // Read-only: not one form, button or field.
      expect(await page.locator('form, button, input').count()).toBe(0);
      await screenshot(page, `dashboard-${target.name}-job`);

      // The hostile job's page and run page: its name and its error stay text.
      await page.goto(`${url}/job?name=${encodeURIComponent(HOSTILE_NAME)}`);
      expect(await page.locator('h1').textContent()).toBe(HOSTILE_NAME);
      await page.locator('table a').first().click();
      await page.waitForURL(/\/run\?id=/);
      expect(await page.locator('pre').textContent()).toBe('<script>alert(2)</script>');
      expect(await page.locator('img').count()).toBe(0);
      expect(dialogs).toEqual([]);

      // A POST to a read-only dashboard is refused, and the lock stays held.
      const refused = await page.request.post(`${url}/job/unlock`, {
        form: { job: 'cache-warm', confirm: 'yes' },
        maxRedirects: 0,
      });
      expect(refused.status()).toBe(403);
      expect((await guard.locks()).find((lock) => lock.name === 'cache-warm')?.state).toBe('held');
    },
    90_000,
  );

  eachDialectAtOnce(
    'draws the slot ledger: missed slots on the strip and the timeline, the next slot from the cron, a run after a gap',
    async ({ target, expect }) => {
      // A declared every-second schedule; each run on time; slots 1 and 2: nobody runs them. A
      // stalled machine that held slot 0's run (and its lock) past slot 1 makes slot 1 overlapped,
      // not missed: then once more, on tables of its own.
      let { guard } = await migratedGuard(target);
      let { at, runAt } = await everySecondJob(guard, 'ticker', expect);
      await runAt(0);
      if (Date.now() >= at(1).getTime()) {
        ({ guard } = await migratedGuard(target));
        ({ at, runAt } = await everySecondJob(guard, 'ticker', expect));
        await runAt(0);
      }
      await runAt(3);
      // The other jobs of the screenshots (docs/dashboard-overview.png), while the slots settle.
      await seedHistory(guard);
      // Settled: lateAfter (1 s) after slot 3.
      await sleep(Math.max(0, at(5).getTime() - Date.now()));
      const url = await serve(guard.dashboard());
      const { page, dialogs } = await openPage(`${url}/`);

      const card = page.locator('section', { has: page.getByRole('heading', { name: 'ticker' }) });
      expect(await card.getByText('Last 50 slots').count()).toBe(1);
      // Missed slots are hollow marks with their own shape, and counted in words beside the strip.
      expect(await card.locator('.strip span.slot-missed').count()).toBeGreaterThanOrEqual(2);
      expect(await card.locator('.strip span.slot-missed').first().textContent()).toBe('○');
      // On a busy machine a run may start more than lateAfter after its slot: succeeded or late.
      expect(await card.locator('.strip span.slot-succeeded, .strip span.slot-late').count()).toBe(2);
      expect(await card.locator('.slot-alarm', { hasText: /⚠ \d+ missed/ }).count()).toBe(1);
      expect(await card.getByText('* * * * * *').count()).toBe(1);
      await screenshot(page, `dashboard-${target.name}-ledger-overview`);

      await card.getByRole('link', { name: 'ticker' }).click();
      await page.waitForURL(/\/job\?name=ticker/);
      // The timeline marks the stretch of missed slots 1 and 2 (one mark from the first to the last),
      // with its word, reachable from the keyboard; and lists it on one line.
      const missedSlots = page.locator(
        `svg.timeline g.slot-missed[aria-label^="2 missed slots in a row, ${at(1).toISOString()} to ${at(2).toISOString()}"]`,
      );
      const marks = await page
        .locator('svg.timeline g[aria-label]')
        .evaluateAll((nodes) => nodes.map((node) => node.getAttribute('aria-label')));
      expect(await missedSlots.count(), JSON.stringify({ slot0: at(0), marks })).toBe(1);
      expect(await page.locator('svg.timeline g.slot-missed[aria-label*="' + at(0).toISOString() + '"]').count()).toBe(0);
      await missedSlots.focus();
      expect(await missedSlots.evaluate((node) => node === node.ownerDocument.activeElement)).toBe(true);
      expect(
        await page
          .locator('.slot-list li', { hasText: `${at(1).toISOString().slice(11, 19)} UTC … ` })
          .filter({ hasText: '(2 slots in a row)' })
          .count(),
      ).toBe(1);
      await screenshot(page, `dashboard-${target.name}-ledger-job`);

      // The run after the gap: its slot, its outcome in the ledger, and the two slots missed before it.
      const [afterGap] = (await guard.history({ job: 'ticker' })).runs;
      await page.goto(`${url}/run?id=${encodeURIComponent(afterGap?.id ?? '')}`);
      expect(await page.getByText(at(3).toISOString().slice(0, 19).replace('T', ' ')).count()).toBeGreaterThan(0);
      expect(await page.locator('.badge.slot-succeeded, .badge.slot-late').count()).toBe(1);
      // missed_slots is written on the row just after the run wins (off the acquire path).
      await expect
        .poll(async () => {
          await page.reload();
          return page.getByText('⚠ 2 slot(s) before this one ran nowhere').count();
        })
        .toBe(1);
      expect(dialogs).toEqual([]);
    },
    90_000,
  );

  eachDialectAtOnce(
    `updates an open page by polling, one request every ${REFRESH_SECONDS} s of its clock, and reads without JavaScript`,
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target);
      await guard.run({ name: 'first-job', lockAtMostFor: '1m' }, () => 'done');
      const url = await serve(guard.dashboard());
      // The page's own clock, stopped and moved by the test: the refresh timer fires when the test
      // says, not after ten seconds of waiting (the requests themselves are real).
      const { page, dialogs } = await openBrowserPage(browser, `${url}/`, {}, (opened) => opened.clock.install());
      // Stopped 1 s ahead of the page's now: its timer was set at load, a moment (< 2 s) before.
      await page.clock.pauseAt((await page.evaluate(() => Date.now())) + 1_000);
      const requests: string[] = [];
      page.on('request', (request) => void requests.push(request.url()));
      await guard.run({ name: 'second-job', lockAtMostFor: '1m' }, () => 'done');
      // The dashboard shares each read for a second of real time among the pages that ask for it
      // (dashboard.ts): a refresh within a second of the page's load would get the read from before
      // the new job. Once the server's own answer lists it, any read the page gets does.
      await expect.poll(async () => (await (await fetch(`${url}/`)).text()).includes('second-job')).toBe(true);
      // Short of the interval on the page's clock: no request.
      await page.clock.runFor(REFRESH_SECONDS * 1_000 - 3_000);
      await sleep(300);
      expect(requests).toEqual([]);
      expect(await page.locator('main h2').allTextContents()).toEqual(['first-job']);
      // Past it (and short of two): one request, for the same page, its live region swapped in.
      await page.clock.runFor(3_000);
      await expect.poll(() => page.locator('main h2').allTextContents()).toEqual(['first-job', 'second-job']);
      expect(requests).toEqual([`${url}/`]);
      expect(dialogs).toEqual([]);

      const still = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
      await still.goto(`${url}/`);
      expect(await still.locator('main h2').allTextContents()).toEqual(['first-job', 'second-job']);
      await still.getByRole('link', { name: 'second-job' }).click();
      expect(await still.locator('h1').textContent()).toBe('second-job');
    },
    90_000,
  );

  eachDialectAtOnce(
    'unlocks from the page only with authorize and the CSRF token',
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target);
      await guard.run({ name: 'cache-warm', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, () => 'done');
      const url = await serve(guard.dashboard({ readOnly: false, authorize: (req) => req.headers['x-operator'] === 'alice' }));
      const held = async (): Promise<string | undefined> => (await guard.locks()).find((lock) => lock.name === 'cache-warm')?.state;
      const jobUrl = `${url}/job?name=cache-warm`;

      // Not authorized: the page shows no control.
      const visitor = await openPage(jobUrl);
      expect(await visitor.page.locator('form, button').count()).toBe(0);

      const operator = await openPage(jobUrl, { 'x-operator': 'alice' });
      // Every form of the page (pause, resume, trigger, unlock) carries the same token.
      const token = await operator.page.locator('input[name=csrf]').first().inputValue();
      const cookie = (await operator.page.context().cookies()).map((entry) => `${entry.name}=${entry.value}`).join('; ');
      const post = (headers: Record<string, string>, fields: Record<string, string>, control = 'unlock'): Promise<Response> =>
        fetch(`${url}/job/${control}`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body: new URLSearchParams(fields),
        });
      const form = { job: 'cache-warm', confirm: 'yes', csrf: token };
      // Without the token, with a wrong one, without the cookie, from another origin, or without authorize: refused.
      expect((await post({ cookie, 'x-operator': 'alice' }, { job: 'cache-warm', confirm: 'yes' })).status).toBe(403);
      expect((await post({ cookie, 'x-operator': 'alice' }, { ...form, csrf: `${token.slice(0, -2)}xx` })).status).toBe(403);
      expect((await post({ 'x-operator': 'alice' }, form)).status).toBe(403);
      expect((await post({ cookie, 'x-operator': 'alice', origin: 'https://evil.example' }, form)).status).toBe(403);
      expect((await post({ cookie }, form)).status).toBe(403);
      expect((await post({ cookie, 'x-operator': 'mallory' }, form)).status).toBe(403);
      expect(await held()).toBe('held');
      // The same for the other controls: a pause without the token, or without authorize, pauses nothing.
      expect((await post({ cookie, 'x-operator': 'alice' }, { job: 'cache-warm' }, 'pause')).status).toBe(403);
      expect((await post({ cookie }, { job: 'cache-warm', csrf: token }, 'pause')).status).toBe(403);
      expect((await post({ cookie }, { job: 'cache-warm', csrf: token }, 'trigger')).status).toBe(403);
      expect((await guard.locks()).find((lock) => lock.name === 'cache-warm')?.paused).toBeNull();

      // The operator's own form, through the browser: keyboard-reachable, labelled, and it works.
      await operator.page.getByLabel(/The process holding this lock is gone/).check();
      await operator.page.getByRole('button', { name: 'Unlock' }).click();
      await operator.page.waitForURL(/notice=unlocked/);
      expect(await operator.page.getByRole('status').textContent()).toContain('Unlocked');
      expect(await held()).toBe('free');
      expect(operator.dialogs).toEqual([]);
      // The unlock is in the audit: who, whose lock, which run (the page's own audit list too).
      const [audit] = await guard.controls('cache-warm');
      expect(audit).toMatchObject({ action: 'unlock' });
      // The run had finished (the lock was held by lockAtLeastFor): no run token was left to name.
      expect(audit?.reason).toMatch(/^freed the lock of [^,]+$/);
      await operator.page.reload();
      expect(await operator.page.locator('body').textContent()).toContain('freed the lock of');
    },
    90_000,
  );
});
