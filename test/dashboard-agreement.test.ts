// The dashboard agrees with itself (issue #35, item 6), over raw HTTP on every dialect and in a real
// headless browser: a job page lists the same problems as the job's overview card (both from its
// newest runs and slots); a run that has been running longer than usual (its holder killed with
// kill -9) says how long, how long it usually takes and when its lock expires; and a stopped job's
// hundreds of missed slots are one line and one mark per stretch of consecutive slots, not one each.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, type ExpectStatic } from 'vitest';
import type { Dialect } from '../src/core/dialect.js';
import { mysqlDialect } from '../src/dialects/mysql/dialect.js';
import { postgresDialect } from '../src/dialects/postgres/dialect.js';
import { sqliteDialect } from '../src/dialects/sqlite/dialect.js';
import type { DialectName, Guard } from '../src/index.js';
import { browserTestsRun, launchChromium, openPage, serve } from './support/dashboard.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { dialectTargets, type DialectTarget } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';
import { startWorker } from './support/processes.js';
import { openRaw } from './support/raw-database.js';
import { rawRequest } from './support/raw-http.js';

const DIALECTS: Record<DialectName, Dialect<never>> = {
  sqlite: sqliteDialect as Dialect<never>,
  postgres: postgresDialect as Dialect<never>,
  mysql: mysqlDialect as Dialect<never>,
};

/**
 * An every-second job whose schedule was declared `secondsAgo` seconds ago (its `changed_at`
 * moved back, as if the app had declared it then), so that every slot since is expected; `ranAt`
 * are the slots, in seconds before now, that a run took (run now, with that slot).
 */
async function stoppedJob(
  tested: { guard: Guard; url: string; prefix: string; target: DialectTarget },
  name: string,
  secondsAgo: number,
  ranAt: readonly number[],
  expect: ExpectStatic,
): Promise<void> {
  const { guard, url, prefix, target } = tested;
  guard.guarded({ name, lockAtMostFor: '1m', cron: '* * * * * *' });
  await expect.poll(async () => (await guard.slots({ job: name })).length).toBe(1);
  const dialect = DIALECTS[target.name];
  const raw = await openRaw(target.name, url);
  try {
    const jobs = `${dialect.quote}${prefix}jobs${dialect.quote}`;
    const changed = dialect.reads.timeParameter(new Date(Date.now() - secondsAgo * 1_000));
    await raw.query(`UPDATE ${jobs} SET changed_at = ? WHERE name = ?`, [changed, name]);
  } finally {
    await raw.close();
  }
  const second = Math.floor(Date.now() / 1_000) * 1_000;
  for (const ago of [...ranAt].sort((a, b) => b - a)) {
    await guard.run({ name, lockAtMostFor: '1m', slot: new Date(second - ago * 1_000) }, () => sleep(5));
  }
}

/** A replica in its own process that takes `name`'s lock for a minute and is killed with SIGKILL mid-run. */
async function killedHolder(url: string, prefix: string, name: string): Promise<void> {
  const doomed = startWorker<{ type: 'running' }>('hold-worker.ts', [url, prefix, name, '60000']);
  await doomed.next('running');
  doomed.child.kill('SIGKILL');
  await doomed.exited;
}

/** The problems a page lists (the text of each `⚠` line). */
function problemsOf(body: string): string[] {
  return [...body.matchAll(/<span class="problem">⚠ ([^<]*)<\/span>/g)].map((match) => match[1] ?? '');
}

/** What the page says of a run longer than usual, tags and line breaks folded. */
function overdueOf(body: string): string | undefined {
  return /<span class="problem overdue"\s*>([^<]*)<\/span/.exec(body)?.[1]?.replace(/\s+/g, ' ').trim();
}

/** The lines of the job page's list of slots no run took. */
function slotLines(body: string): string[] {
  const list = /<ul class="slot-list">([\s\S]*?)<\/ul>/.exec(body)?.[1] ?? '';
  return [...list.matchAll(/<li>([\s\S]*?)<\/li>/g)].map((match) =>
    (match[1] ?? '')
      .replace(/<[^>]*>/g, '')
      .replace(/\s+/g, ' ')
      .trim(),
  );
}

function formatTime(date: Date | undefined): string {
  return `${date?.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

describe.each(dialectTargets())('the dashboard agrees with itself on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('lists on the job page the problems its overview card lists: 50 of its last 50 slots missed', async () => {
      const tested = { ...(await migratedGuard(target)), target };
      // Declared 3 minutes ago; three runs long ago, none since: its newest 50 slots are all missed.
      await stoppedJob(tested, 'ticker', 180, [150, 149, 148], expect);
      const url = await serve(tested.guard.dashboard());
      const overview = await rawRequest(`${url}/`);
      const card = problemsOf(overview.body);
      expect(card).toContain('50 of its last 50 slot(s) missed: no replica ran them');
      const job = await rawRequest(`${url}/job?name=ticker`);
      expect(job.status).toBe(200);
      expect(problemsOf(job.body)).toEqual(card);
      expect(job.body).not.toContain('No problem found');
    });

    it('says how long a run killed with kill -9 has been running, how long it usually takes and when its lock expires', async () => {
      const { guard, url, prefix } = await migratedGuard(target, { lockedBy: 'survivor' });
      for (let index = 0; index < 3; index += 1) await guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => sleep(20));
      await killedHolder(url, prefix, 'nightly');
      const lock = (await guard.locks()).find((candidate) => candidate.name === 'nightly');
      expect([lock?.state, lock?.running]).toEqual(['held', true]);
      const dashboard = await serve(guard.dashboard());
      const wanted = new RegExp(
        `^running for [\\d.]+ (ms|s), usually \\d+ ms; its lock expires at ${formatTime(lock?.lockUntil).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`,
      );
      // The holder's run is longer than usual once it has run longer than the median of the three.
      await expect
        .poll(async () => overdueOf((await rawRequest(`${dashboard}/`)).body), { timeout: 45_000, interval: 250 })
        .toMatch(wanted);
      expect(overdueOf((await rawRequest(`${dashboard}/job?name=nightly`)).body)).toMatch(wanted);
    }, 90_000);

    it('lists a stopped job’s missed slots by stretches of consecutive slots: a bounded page', async () => {
      const tested = { ...(await migratedGuard(target)), target };
      // Declared 10 minutes ago; one run of the slot 5 minutes ago: stretches of about 300 slots
      // before and after it (missed, or overlapped where the ledger counts the late run's lock).
      await stoppedJob(tested, 'ticker', 600, [300], expect);
      const url = await serve(tested.guard.dashboard());
      for (const range of ['1h', 'fit']) {
        const page = await rawRequest(`${url}/job?name=ticker&range=${range}`);
        expect(page.status).toBe(200);
        const lines = slotLines(page.body);
        expect(lines.length).toBeGreaterThanOrEqual(1);
        expect(lines.length).toBeLessThanOrEqual(3);
        // (The slots after the late run are overlapped, as the ledger says: a stretch of their own.)
        expect(lines).toContainEqual(
          expect.stringMatching(
            /^(○ missed|⧉ overlapped) \d{4}-\d\d-\d\d [\d:]+ UTC … \d{4}-\d\d-\d\d [\d:]+ UTC \(\d{3} slots in a row\)$/,
          ),
        );
        // One mark per stretch on the timeline too.
        expect([...page.body.matchAll(/<g class="slot-mark slot-/g)].length).toBe(lines.length);
        expect(page.body.length).toBeLessThan(40_000);
      }
    });
  });
});

describe.skipIf(!browserTestsRun())('the dashboard agrees with itself in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  eachDialectAtOnce(
    'shows on the job page the card’s problems, a killed holder’s run as longer than usual, and stretches of missed slots',
    async ({ target, expect }) => {
      const tested = { ...(await migratedGuard(target)), target };
      // Declared 5 minutes ago and never run since: about 300 missed slots in a row.
      await stoppedJob(tested, 'ticker', 300, [], expect);
      for (let index = 0; index < 3; index += 1) await tested.guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => sleep(20));
      await killedHolder(tested.url, tested.prefix, 'nightly');
      const url = await serve(tested.guard.dashboard());
      const { page, dialogs } = await openPage(browser, `${url}/`);
      const card = page.locator('section', { has: page.getByRole('heading', { name: 'ticker' }) });
      const holderCard = page.locator('section', { has: page.getByRole('heading', { name: 'nightly' }) });
      await expect
        .poll(() => holderCard.locator('.overdue').textContent(), { timeout: 45_000, interval: 250 })
        .toMatch(/^running for [\d.]+ (ms|s), usually \d+ ms; its lock expires at /);
      const cardProblems = await card.locator('.problem:not(.overdue)').allTextContents();
      expect(cardProblems).toContainEqual(expect.stringMatching(/^⚠ 50 of its last 50 slot\(s\) missed: no replica ran them$/));

      await card.getByRole('link', { name: 'ticker' }).click();
      await page.waitForURL(/\/job\?name=ticker/);
      expect(await page.locator('.problem:not(.overdue)').allTextContents()).toEqual(cardProblems);
      expect(await page.getByText('No problem found').count()).toBe(0);
      // One line for the stretch, one mark on the timeline, reachable from the keyboard.
      const lines = page.locator('.slot-list li');
      expect(await lines.count()).toBe(1);
      expect(await lines.first().textContent()).toMatch(/○ missed\s+\S+ \S+ UTC … \S+ \S+ UTC \(\d{2,3} slots in a row\)/);
      const mark = page.locator('svg.timeline g.slot-missed[aria-label*="missed slots in a row"]').last();
      expect(await mark.getAttribute('aria-label')).toMatch(/^\d{2,3} missed slots in a row, /);
      await mark.focus();
      expect(await mark.evaluate((node) => node === node.ownerDocument.activeElement)).toBe(true);
      // The holder's page: its run is longer than usual there too.
      await page.goto(`${url}/job?name=nightly`);
      expect(await page.locator('.overdue').textContent()).toMatch(/^running for [\d.]+ (ms|s), usually \d+ ms; its lock expires at /);
      expect(dialogs).toEqual([]);
    },
    90_000,
  );
});
