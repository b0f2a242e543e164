// What the dashboard makes of pauses and takeovers, in a real headless browser on every dialect:
// the overview's slot strip shows a slot that fell while the job was paused as paused (as
// guard.slots() does), and a run that took over a lock its holder never released names and links
// that run, whose page links it back.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe } from 'vitest';
import { browserTestsRun, everySecondJob, launchChromium, openPage as openBrowserPage, serve } from './support/dashboard.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { startWorker } from './support/processes.js';

describe.skipIf(!browserTestsRun())('dashboard pauses and takeovers in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  const openPage = (url: string) => openBrowserPage(browser, url);

  // Each scenario runs on the three dialects at once, each its own tables, servers, processes and
  // browser contexts in the one chromium: most of a scenario is waiting (on slots, on expiring locks).
  eachDialectAtOnce(
    'draws the slots that fell while the job was paused as paused on the overview strip, as guard.slots() does',
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target);
      // A declared every-second schedule; the runs give their slots by hand.
      const { at, runAt } = await everySecondJob(guard, 'ticker', expect);
      // Slot 0 runs, then the job is paused over slots 1 to 4 and resumed; slot 5 runs, nobody
      // runs slots 6 and 7 (missed: the strip still shows what is missed), slot 8 runs. Slot 6 is
      // the slack of a busy machine: a resume recorded after it leaves it paused, a run of slot 5
      // that lasted past it leaves it overlapped; slot 7 is missed either way.
      await runAt(0);
      await guard.pause('ticker', { reason: 'deploy' });
      await sleep(Math.max(0, at(4).getTime() + 300 - Date.now()));
      expect(await guard.resume('ticker')).toBe(true);
      await runAt(5);
      await runAt(8);
      // Settled: lateAfter (1 s) after slot 8.
      await sleep(Math.max(0, at(10).getTime() - Date.now()));

      const [ledger] = await guard.slots({ job: 'ticker', since: at(-1), until: at(9) });
      const outcomeOf = new Map(ledger?.slots.map((entry) => [entry.slot.toISOString(), entry.outcome]));
      // The API's ledger: the slots in the pause are paused (on a busy machine the pause may
      // come after slot 1), slot 7 missed.
      const pausedSlots = [...outcomeOf].filter(([, outcome]) => outcome === 'paused').map(([slot]) => slot);
      expect(pausedSlots.length).toBeGreaterThanOrEqual(3);
      expect(['missed', 'paused', 'overlapped']).toContain(outcomeOf.get(at(6).toISOString()));
      expect(outcomeOf.get(at(7).toISOString())).toBe('missed');

      const { page, dialogs } = await openPage(`${await serve(guard.dashboard())}/`);
      const card = page.locator('section', { has: page.getByRole('heading', { name: 'ticker' }) });
      const marks = await card
        .locator('.strip span')
        .evaluateAll((spans) => spans.map((span) => ({ outcome: span.className, title: span.getAttribute('title') ?? '' })));
      const stripOutcome = (slot: string): string | undefined => marks.find((mark) => mark.title.startsWith(`slot ${slot}:`))?.outcome;
      // Each slot the API calls paused is a paused mark on the strip (‖, titled so), not a missed one.
      for (const slot of pausedSlots) expect([slot, stripOutcome(slot)]).toEqual([slot, 'slot-paused']);
      expect(await card.locator('.strip span.slot-paused').first().textContent()).toBe('‖');
      expect(await card.locator('.strip span.slot-paused').first().getAttribute('title')).toMatch(/: paused$/);
      // The strip agrees with the API on every slot both show from slot 0 to slot 8.
      for (let index = 0; index <= 8; index += 1) {
        const slot = at(index).toISOString();
        expect([slot, stripOutcome(slot)]).toEqual([slot, `slot-${outcomeOf.get(slot)}`]);
      }
      // Missed slots are still counted in words (slot 7, and those that settled since slot 8).
      expect(await card.locator('.slot-alarm', { hasText: /⚠ \d+ missed/ }).count()).toBe(1);
      // And among the job's problems, with what to do (the ledger's, as cronguard doctor reports them).
      const problems = await card.locator('.problem').allTextContents();
      expect(problems).toContainEqual(expect.stringMatching(/^⚠ \d+ of its last \d+ slot\(s\) missed: no replica ran them$/));
      expect(await card.locator('.fix', { hasText: 'catchUp' }).count()).toBe(1);
      expect(dialogs).toEqual([]);
    },
    90_000,
  );

  eachDialectAtOnce(
    'names and links the run a run took over from when its holder died, and links the takeover back',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target, { lockedBy: 'survivor' });
      // A replica in its own process takes the lock (lockAtMostFor 1 s) and is killed mid-run.
      const doomed = startWorker<{ type: 'running' }>('hold-worker.ts', [url, prefix, 'nightly', '1000']);
      await doomed.next('running');
      doomed.child.kill('SIGKILL');
      await doomed.exited;
      // The survivor tries until the dead holder's lock has expired, then a plain run follows.
      await expect
        .poll(async () => (await guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => 'ok')).executed, {
          timeout: 20_000,
          interval: 200,
        })
        .toBe(true);
      await guard.run({ name: 'nightly', lockAtMostFor: '1m' }, () => 'ok');
      const [plain, successor, dead] = (await guard.history({ job: 'nightly' })).runs;
      if (plain === undefined || successor === undefined || dead === undefined) throw new Error('expected three runs');
      expect([dead.status, dead.lockedBy.startsWith('doomed-')]).toEqual(['abandoned', true]);

      const dashboard = await serve(guard.dashboard());
      const { page, dialogs } = await openPage(`${dashboard}/run?id=${encodeURIComponent(successor.id)}`);
      const field = (label: string) => page.locator('dt', { hasText: label }).locator('xpath=following-sibling::dd[1]');
      expect(await page.locator('dt', { hasText: 'Took over from' }).count()).toBe(1);
      expect(await field('Took over from').textContent()).toMatch(/abandoned[\s\S]*never released it/);
      expect(await page.locator('dt', { hasText: 'Taken over by' }).count()).toBe(0);
      // The link leads to the dead run, whose page links the run that took over.
      await field('Took over from')
        .getByRole('link', { name: `run ${dead.id}` })
        .click();
      await page.waitForURL(new RegExp(`/run\\?id=${dead.id}$`));
      expect(await page.locator('h1').textContent()).toBe('Run of nightly');
      expect(await field('Replica').textContent()).toBe(dead.lockedBy);
      expect(await page.locator('dt', { hasText: 'Took over from' }).count()).toBe(0);
      await field('Taken over by')
        .getByRole('link', { name: `run ${successor.id}` })
        .click();
      await page.waitForURL(new RegExp(`/run\\?id=${successor.id}$`));
      // The plain run after it took a released lock: no takeover either way.
      await page.goto(`${dashboard}/run?id=${encodeURIComponent(plain.id)}`);
      expect(await page.locator('dt', { hasText: /Took over from|Taken over by/ }).count()).toBe(0);
      expect(dialogs).toEqual([]);
    },
    90_000,
  );

  eachDialectAtOnce(
    'names the run a run took over from when that one overran its lock and finished later',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target, { lockedBy: 'slow-replica' });
      const other = guardOn(url, prefix, { lockedBy: 'other-replica' }).guard;
      // A job that ignores its signal and keeps running 2 s past its 300 ms lock.
      let running = false;
      const slow = guard.run({ name: 'sync', lockAtMostFor: '300ms' }, () => ((running = true), sleep(2_300))).catch(() => undefined);
      // The other replica tries only once the slow run holds the lock: tried at the same instant
      // on a table with no row yet, either could create the row first.
      await expect.poll(() => running, { timeout: 20_000 }).toBe(true);
      await expect
        .poll(async () => (await other.run({ name: 'sync', lockAtMostFor: '1m' }, () => 'ok')).executed, {
          timeout: 20_000,
          interval: 100,
        })
        .toBe(true);
      await slow;
      const [successor, overran] = (await guard.history({ job: 'sync' })).runs;
      if (successor === undefined || overran === undefined) throw new Error('expected two runs');
      expect([overran.lockedBy, successor.lockedBy]).toEqual(['slow-replica', 'other-replica']);
      expect(overran.finishedAt?.getTime()).toBeGreaterThan(successor.startedAt.getTime());

      const dashboard = await serve(guard.dashboard());
      const { page } = await openPage(`${dashboard}/run?id=${encodeURIComponent(successor.id)}`);
      const field = (label: string) => page.locator('dt', { hasText: label }).locator('xpath=following-sibling::dd[1]');
      expect(
        await field('Took over from')
          .getByRole('link', { name: `run ${overran.id}` })
          .count(),
      ).toBe(1);
      expect(await field('Took over from').textContent()).toMatch(/slow-replica[\s\S]*finished only at/);
      await page.goto(`${dashboard}/run?id=${encodeURIComponent(overran.id)}`);
      expect(
        await field('Taken over by')
          .getByRole('link', { name: `run ${successor.id}` })
          .count(),
      ).toBe(1);
    },
    90_000,
  );
});
