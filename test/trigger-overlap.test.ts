// A manual run still running when a scheduled slot comes (issue #35, item 3): the slot's take finds
// the lock held, so the slot does not run, and the ledger calls it `overlapped` (held by the
// trigger's run, who asked for it), not `missed`; `cronguard slots` counts no missed slot and
// `cronguard doctor` says a manual run held the lock, never that no replica ran it; the replica
// that runs the next slot logs no missed slot either. On every dialect, the CLI through the real
// binary (`npm run build` first).
import { setTimeout as sleep } from 'node:timers/promises';
import { describe } from 'vitest';
import { cronguard } from './support/cronguard-cli.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { migratedGuard } from './support/guards.js';

const INTERVAL_MS = 3_000;

describe('a trigger still running at a slot', () => {
  eachDialectAtOnce(
    'lists the slot it held off as overlapped by the trigger, and doctor says so instead of blaming the replicas',
    async ({ target, expect }) => {
      const { guard, url, prefix, logger } = await migratedGuard(target, { controlPollInterval: '200ms' });
      const common = ['--database', url, '--table-prefix', prefix];
      const missedEvents: unknown[] = [];
      guard.on('missed', (event) => missedEvents.push(event));
      const manual: { startedAt: number; endedAt: number }[] = [];
      const task = guard.schedule('*/3 * * * * *', { name: 'report', lockAtMostFor: '1m', lockAtLeastFor: 0 }, async (ctx) => {
        if (ctx.slot !== null) return;
        // The manual run lasts until 1.2 s past the next slot, whenever it started: it holds that slot off.
        const startedAt = Date.now();
        await sleep(Math.ceil((startedAt + 1) / INTERVAL_MS) * INTERVAL_MS + 1_200 - startedAt);
        manual.push({ startedAt, endedAt: Date.now() });
      });
      // A scheduled run first (the schedule declared, the ledger started).
      await expect.poll(async () => (await guard.history({ job: 'report' })).runs.length, { timeout: 15_000 }).toBeGreaterThan(0);
      await guard.trigger('report', { by: 'alice' });
      await expect.poll(() => manual.length, { timeout: 15_000 }).toBe(1);
      const run = manual[0] as { startedAt: number; endedAt: number };
      // The slots the manual run spanned (on this machine's clock; the database's is the same here).
      const covered = Math.ceil((run.startedAt + 1) / INTERVAL_MS) * INTERVAL_MS;
      expect(run.endedAt).toBeGreaterThan(covered);

      // Once the slot is settled, the ledger lists it overlapped, held by alice's run.
      const entryOf = async () =>
        (await guard.slots({ job: 'report', since: '1m' }))[0]?.slots.find((entry) => Math.abs(entry.slot.getTime() - covered) < 500);
      await expect.poll(async () => (await entryOf())?.outcome, { timeout: 15_000, interval: 250 }).toBe('overlapped');
      expect((await entryOf())?.heldBy?.triggeredBy).toBe('alice');
      // The replica that ran the slot after it found no gap either: no warning, no `missed` event.
      await expect
        .poll(() => guard.history({ job: 'report' }).then(({ runs }) => runs.some((r) => (r.slot?.getTime() ?? 0) > covered)))
        .toBe(true);
      expect(logger.warnings.filter((warning) => warning.includes('missed'))).toEqual([]);
      expect(missedEvents).toEqual([]);

      const slots = await cronguard(['slots', '--job', 'report', '--since', '1m', '--json', ...common]);
      const [ledger] = JSON.parse(slots.stdout) as { slots: { slot: string; outcome: string }[] }[];
      expect(ledger?.slots.find((entry) => Math.abs(Date.parse(entry.slot) - covered) < 500)?.outcome).toBe('overlapped');
      const text = await cronguard(['slots', '--job', 'report', '--since', '1m', ...common]);
      expect(text.stdout).toMatch(/report: \S+ \S+ UTC overlapped \(a manual run triggered by alice was still running: run \S+\)/);
      const doctor = await cronguard(['doctor', '--job', 'report', ...common]);
      // One slot, or two when a stalled machine let the manual run's wait end past the slot after.
      expect(doctor.stdout, doctor.stdout).toMatch(
        /report: note: in the last day [12] slot\(s\) overlapped: a manual run \(triggered by alice\) was still running/,
      );
      expect(doctor.stdout).not.toMatch(/no replica ran them/);
      await task.destroy();
    },
    45_000,
  );
});
