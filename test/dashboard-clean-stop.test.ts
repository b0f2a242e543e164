// The dashboard agrees with `cronguard slots` after a clean stop (issue #35, item 4): once the last
// replica scheduling a job shut down cleanly (guard.close()), no slot after the stop is expected,
// so the overview card and the job page show no missed slot and no problem for the stopped time,
// while `cronguard slots` (the real binary) says the job stopped and exits 0. Raw HTTP and
// Chromium, every dialect.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, type ExpectStatic } from 'vitest';
import type { Guard } from '../src/index.js';
import { cronguard } from './support/cronguard-cli.js';
import { browserTestsRun, launchChromium, openPage, serve } from './support/dashboard.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import type { DialectTarget } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { rawRequest } from './support/raw-http.js';

/** The problems a page lists (the text of each `⚠` line). */
function problemsOf(body: string): string[] {
  return [...body.matchAll(/<span class="problem">⚠ ([^<]*)<\/span>/g)].map((match) => match[1] ?? '');
}

/**
 * The only replica of an every-second job `tick` runs it a few times, shuts down cleanly, and 4 s of
 * slots nobody runs (or expects) go by; `cronguard slots` agrees that nothing was missed. The
 * operator's guard (one that schedules nothing) is returned.
 */
async function stoppedCleanly(target: DialectTarget, expect: ExpectStatic): Promise<Guard> {
  const { guard: replica, url, prefix } = await migratedGuard(target);
  const common = ['--database', url, '--table-prefix', prefix];
  let ran = 0;
  replica.schedule('* * * * * *', { name: 'tick', lockAtMostFor: '10s', lockAtLeastFor: 0 }, () => {
    ran += 1;
  });
  await expect.poll(() => ran, { timeout: 20_000, interval: 200 }).toBeGreaterThanOrEqual(3);
  await replica.close();
  await sleep(4_000);
  const { guard: operator } = guardOn(url, prefix);
  const [ledger] = await operator.slots({ job: 'tick', since: '1m' });
  expect(ledger?.stoppedAt).toBeInstanceOf(Date);
  expect(ledger?.counts.missed).toBe(0);
  const slots = await cronguard(['slots', '--job', 'tick', '--since', '1m', ...common]);
  expect(slots.code, slots.stdout + slots.stderr).toBe(0);
  return operator;
}

describe('the dashboard after a clean stop', () => {
  eachDialectAtOnce(
    'shows no missed slot nor problem for the time after the last replica stopped cleanly, as cronguard slots says',
    async ({ target, expect }) => {
      const operator = await stoppedCleanly(target, expect);
      const dashboard = await serve(operator.dashboard());
      const overview = await rawRequest(`${dashboard}/`);
      expect(overview.status).toBe(200);
      expect(overview.body).toContain('tick');
      expect(problemsOf(overview.body).filter((problem) => problem.includes('missed'))).toEqual([]);
      expect(overview.body).not.toMatch(/class="[^"]*slot-missed/);
      const job = await rawRequest(`${dashboard}/job?name=tick`);
      expect(job.status).toBe(200);
      expect(problemsOf(job.body).filter((problem) => problem.includes('missed'))).toEqual([]);
      expect(job.body).not.toContain('○ missed');
      expect(job.body).not.toMatch(/class="[^"]*slot-missed/);
      // The overview's filter for problems agrees: the stopped job is not one.
      const problems = await rawRequest(`${dashboard}/?problems=1`);
      expect(problems.body).not.toMatch(/<a class="name" href="[^"]*">tick<\/a>/);
    },
    45_000,
  );
});

describe.skipIf(!browserTestsRun())('the dashboard after a clean stop, in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  eachDialectAtOnce(
    'shows the stopped job’s card and page without a missed slot or a problem',
    async ({ target, expect }) => {
      const operator = await stoppedCleanly(target, expect);
      const { page, dialogs } = await openPage(browser, `${await serve(operator.dashboard())}/`);
      const card = page.locator('section', { has: page.getByRole('heading', { name: 'tick' }) });
      expect(await card.count()).toBe(1);
      expect(await card.locator('.problem').allTextContents()).toEqual([]);
      expect(await card.locator('.slot-missed').count()).toBe(0);
      await card.getByRole('link', { name: 'tick' }).click();
      await page.waitForURL(/\/job\?name=tick/);
      expect(await page.locator('.problem').allTextContents()).toEqual([]);
      expect(await page.locator('.slot-missed').count()).toBe(0);
      expect(await page.getByText('○ missed').count()).toBe(0);
      expect(dialogs).toEqual([]);
    },
    60_000,
  );
});
