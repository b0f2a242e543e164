// What the dashboard makes of pauses, in a real headless browser on every dialect: the overview's
// slot strip shows a slot that fell while the job was paused as paused (as guard.slots() does).
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserTestsRun, CHROMIUM, serve } from './support/dashboard.js';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';

describe.skipIf(!browserTestsRun())('dashboard pauses and takeovers in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  /** A page that records every dialog (there should be none). */
  async function openPage(url: string): Promise<{ page: Page; dialogs: string[] }> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    await page.goto(url);
    return { page, dialogs };
  }

  describe.each(dialectTargets())('on $name', (target) => {
    describe.skipIf(target.serverUrl === null)('', () => {
      it('draws the slots that fell while the job was paused as paused on the overview strip, as guard.slots() does', async () => {
        const { guard } = await migratedGuard(target);
        // A declared every-second schedule (a decorated job with `cron`); the runs give their slots by hand.
        guard.guarded({ name: 'ticker', lockAtMostFor: '1m', cron: '* * * * * *' });
        await expect.poll(async () => (await guard.slots({ job: 'ticker' })).length).toBe(1);
        const first = Math.ceil((Date.now() + 500) / 1_000) * 1_000;
        const at = (index: number): Date => new Date(first + index * 1_000);
        const runAt = async (index: number): Promise<void> => {
          await sleep(Math.max(0, at(index).getTime() + 20 - Date.now()));
          await guard.run({ name: 'ticker', lockAtMostFor: '1m', slot: at(index) }, () => 'ok');
        };
        // Slot 0 runs, then the job is paused over slots 1 to 4 and resumed; slot 5 runs, nobody
        // runs slot 6 (missed: the strip still shows what is missed), slot 7 runs.
        await runAt(0);
        await guard.pause('ticker', { reason: 'deploy' });
        await sleep(Math.max(0, at(4).getTime() + 300 - Date.now()));
        expect(await guard.resume('ticker')).toBe(true);
        await runAt(5);
        await runAt(7);
        // Settled: lateAfter (1 s) after slot 7.
        await sleep(Math.max(0, at(9).getTime() - Date.now()));

        const [ledger] = await guard.slots({ job: 'ticker', since: at(-1), until: at(8) });
        const outcomeOf = new Map(ledger?.slots.map((entry) => [entry.slot.toISOString(), entry.outcome]));
        // The API's ledger: the slots in the pause are paused (on a busy machine the pause may
        // come after slot 1), slot 6 missed.
        const pausedSlots = [...outcomeOf].filter(([, outcome]) => outcome === 'paused').map(([slot]) => slot);
        expect(pausedSlots.length).toBeGreaterThanOrEqual(3);
        expect(outcomeOf.get(at(6).toISOString())).toBe('missed');

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
        // The strip agrees with the API on every slot both show from slot 0 to slot 7.
        for (let index = 0; index <= 7; index += 1) {
          const slot = at(index).toISOString();
          expect([slot, stripOutcome(slot)]).toEqual([slot, `slot-${outcomeOf.get(slot)}`]);
        }
        // Missed slots are still counted in words (slot 6, and those that settled since slot 7).
        expect(await card.locator('.slot-alarm', { hasText: /⚠ \d+ missed/ }).count()).toBe(1);
        expect(dialogs).toEqual([]);
      }, 90_000);
    });
  });
});
