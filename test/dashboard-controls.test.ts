// The dashboard's operator controls in a real headless browser, on every server dialect: pausing
// from the job page stops the next slot on two replicas in their own OS processes, resuming
// restarts them, the audit lists both, and the read-only page shows the pause with no control;
// with an `actor` option the audit names the operator of each change instead of 'dashboard'.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe } from 'vitest';
import { browserTestsRun, launchChromium, openPage as openBrowserPage, screenshot, serve } from './support/dashboard.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { migratedGuard } from './support/guards.js';
import { startWorker, type Worker } from './support/processes.js';

type Message =
  { type: 'ready' | 'exiting' | 'paused'; pid: number } | { type: 'ran'; pid: number; slot: string | null; start: number; end: number };
type Ran = Extract<Message, { type: 'ran' }>;

function runsOf(replicas: Worker<Message>[]): Ran[] {
  return replicas
    .flatMap((replica) => replica.received.filter((message): message is Ran => message.type === 'ran'))
    .sort((a, b) => a.start - b.start);
}

describe.skipIf(!browserTestsRun())('dashboard controls in chromium', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
  });

  const openPage = async (url: string, headers: Record<string, string> = {}): Promise<Page> =>
    (await openBrowserPage(browser, url, headers)).page;

  // Each scenario runs on the three dialects at once, each its own tables, servers, replica processes
  // and browser contexts in the one chromium: most of a scenario is waiting (on slots, on the pause).
  eachDialectAtOnce(
    'pausing from the page stops the next slot on two replica processes; resume restarts them; read-only has no control',
    async ({ target, expect, together }) => {
      const { guard, url, prefix } = await migratedGuard(target);
      // Two replicas of an app with an every-second guard.schedule job 'tick' (test/fixtures/controlled-replica.ts).
      const replicas = [0, 1].map(() => startWorker<Message>('controlled-replica.ts', [url, prefix, 'ok', '1s', '60000']));
      try {
        await Promise.all(replicas.map((replica) => replica.next('ready')));
        // Every case's replicas are up before any case's windows (the pause, the resume).
        await together();
        const startedAfter = (at: number): Ran[] => runsOf(replicas).filter((run) => run.start > at);
        await expect.poll(() => startedAfter(0).length, { timeout: 15_000 }).toBeGreaterThanOrEqual(2);

        const controlled = await serve(guard.dashboard({ readOnly: false, authorize: (req) => req.headers['x-operator'] === 'alice' }));
        const page = await openPage(`${controlled}/job?name=tick`, { 'x-operator': 'alice' });
        await page.getByLabel('For (a duration').fill('');
        await page.getByLabel('Reason').first().fill('deploying the <b>new</b> schema');
        await page.getByRole('button', { name: 'Pause' }).click();
        await page.waitForURL(/notice=paused/);
        // A run whose take committed before the pause may start a few ms after the POST returned.
        const paused = Date.now();
        expect(await page.getByRole('status').textContent()).toContain('Paused');
        await sleep(3_500);
        expect(startedAfter(paused + 500)).toEqual([]);
        // The page says so: the state, who, why (as text), and the audit.
        await page.reload();
        expect(await page.locator('#live .badge', { hasText: 'paused' }).count()).toBe(1);
        expect(await page.getByText('“deploying the <b>new</b> schema”').count()).toBe(1);
        const auditRows = (action: string) =>
          page.locator('table[aria-labelledby=audit] tr', {
            has: page.locator('td', { hasText: new RegExp(`^${action}$`) }),
          });
        const audit = auditRows('pause');
        expect(await audit.count()).toBe(1);
        expect(await audit.locator('td').nth(2).textContent()).toBe('dashboard');
        await screenshot(page, `dashboard-${target.name}-controls-job`);

        // The read-only page shows the pause on the overview and the job page, and no control.
        const readOnly = await serve(guard.dashboard());
        const visitor = await openPage(`${readOnly}/`);
        const card = visitor.locator('section', { has: visitor.getByRole('heading', { name: 'tick' }) });
        expect(await card.getByText('‖ paused').count()).toBe(1);
        await visitor.goto(`${readOnly}/job?name=tick`);
        expect(await visitor.getByText('‖ paused').count()).toBe(1);
        expect(await visitor.locator('form, button, input').count()).toBe(0);
        expect((await visitor.request.post(`${readOnly}/job/resume`, { form: { job: 'tick' } })).status()).toBe(403);

        // Resume from the page: the replicas take the next slots again.
        await page.getByRole('button', { name: 'Resume' }).click();
        await page.waitForURL(/notice=resumed/);
        const resumed = Date.now();
        await expect.poll(() => startedAfter(resumed).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
        expect(await auditRows('resume').count()).toBe(1);
        // Still once per slot across the two replicas.
        const slots = runsOf(replicas).flatMap((run) => (run.slot === null ? [] : [run.slot]));
        expect(new Set(slots).size).toBe(slots.length);
      } finally {
        for (const replica of replicas) replica.child.kill('SIGTERM');
        await Promise.all(replicas.map((replica) => replica.exited));
      }
    },
    90_000,
  );

  eachDialectAtOnce(
    'records each change by the operator `actor` names, as text, cut to 255 characters; blank or none is dashboard',
    async ({ target, expect }) => {
      const { guard } = await migratedGuard(target);
      await guard.run({ name: 'report', lockAtMostFor: '1m' }, () => 'done');
      const long = '😀'.repeat(200);
      const controlled = await serve(
        guard.dashboard({
          readOnly: false,
          authorize: (req) => req.headers['x-operator'] !== undefined,
          // The operator's name from the request, as a proxy in front of the dashboard would set it.
          actor: async (req) => {
            const header = req.headers['x-operator'];
            return header === 'long' ? long : header === 'nobody' ? undefined : String(header);
          },
        }),
      );
      const as = (operator: string): Promise<Page> => openPage(`${controlled}/job?name=report`, { 'x-operator': operator });

      // A name that is markup stays text: on the page, in the audit, and as recorded.
      const alice = await as('<b>alice</b>');
      await alice.getByLabel('Reason').first().fill('maintenance');
      await alice.getByRole('button', { name: 'Pause' }).click();
      await alice.waitForURL(/notice=paused/);
      const audit = alice.locator('table[aria-labelledby=audit] tr', { has: alice.locator('td', { hasText: /^pause$/ }) });
      expect(await audit.locator('td').nth(2).textContent()).toBe('<b>alice</b>');
      expect(await alice.locator('#live .pause .name').textContent()).toBe('<b>alice</b>');
      expect(await alice.locator('main b').count()).toBe(0);

      // A name longer than 255 characters is cut to them, never through a surrogate pair.
      const longPage = await as('long');
      await longPage.getByRole('button', { name: 'Resume' }).click();
      await longPage.waitForURL(/notice=resumed/);
      // Blank, or no name at all: recorded as by 'dashboard'.
      const blank = await as('   ');
      await blank.getByRole('button', { name: 'Trigger' }).click();
      await blank.waitForURL(/notice=triggered/);
      const nobody = await as('nobody');
      await nobody.getByRole('button', { name: 'Pause' }).click();
      await nobody.waitForURL(/notice=paused/);

      const records = await guard.controls('report');
      expect(records.map((record) => [record.action, record.by])).toEqual([
        ['pause', 'dashboard'],
        ['trigger', 'dashboard'],
        ['resume', '😀'.repeat(127)],
        ['pause', '<b>alice</b>'],
      ]);
      // An actor that throws refuses the change: nothing is recorded under a wrong name.
      const failing = await serve(
        guard.dashboard({
          readOnly: false,
          authorize: () => true,
          actor: () => {
            throw new Error('no session');
          },
        }),
      );
      const refused = await openPage(`${failing}/job?name=report`);
      await refused.getByRole('button', { name: 'Resume' }).click();
      await expect.poll(() => refused.locator('h1').textContent()).toBe('Error 500');
      expect(await refused.getByText('nothing was changed').count()).toBe(1);
      expect((await guard.controls('report')).length).toBe(4);
      expect((await guard.locks()).find((lock) => lock.name === 'report')?.paused?.by).toBe('dashboard');
      expect(() => guard.dashboard({ actor: 'alice' as unknown as () => string })).toThrow(/`actor`.*"alice"/);
    },
    90_000,
  );
});
