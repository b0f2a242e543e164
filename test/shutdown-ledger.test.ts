// Stopping the app is no outage (issue 35, item 4): once every replica scheduling a job stopped
// cleanly (SIGTERM handled by guard.close()), the ledger expects no slot after the stop, and
// `cronguard slots` exits 0; a restart expects slots again from the restart, and a replica killed
// with kill -9 stopped nothing: its slots are missed. Replicas in their own OS processes, the CLI
// through the real binary, on every dialect.
import { describe, expect as expectPure, it } from 'vitest';
import { stopGaps } from '../src/core/slot-walk.js';
import { databaseUrl, uniquePrefix } from './support/dialects.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn, migratedGuard } from './support/guards.js';
import type { JobLedger } from '../src/index.js';
import { droppedByAll, startWorker, type Worker } from './support/processes.js';
import { cronguard } from './support/cronguard-cli.js';

type Message = { type: 'ready'; pid: number } | { type: 'ran'; pid: number; slot: string } | { type: 'exiting'; pid: number };

/**
 * The missed slots of a ledger that are not seconds node-cron dropped in every replica alive then (a
 * stalled machine), nor the second just before the stop: a loaded machine may deliver that second's
 * fire after SIGTERM made the replicas stop starting runs (the stop is recorded from then), and a
 * slot due before the stop that nobody ran is missed indeed. A slot after the stop never is.
 * `stoppedAtMs`: the clean stop's, which a later ledger (after a restart) no longer shows.
 */
const missedUnexplained = (
  ledger: JobLedger | undefined,
  workers: Worker<Message>[],
  stoppedAtMs = ledger?.stoppedAt?.getTime() ?? -Infinity,
): string[] =>
  (ledger?.slots ?? [])
    .filter((slot) => {
      const at = slot.slot.getTime();
      const justBeforeTheStop = at <= stoppedAtMs && at > stoppedAtMs - 1_000;
      return slot.outcome === 'missed' && !droppedByAll(workers, at) && !justBeforeTheStop;
    })
    .map((slot) => slot.slot.toISOString());

const ran = (workers: Worker<Message>[]): number => workers.flatMap((worker) => worker.received.filter((m) => m.type === 'ran')).length;

describe('the slot ledger after a clean stop', () => {
  eachDialectAtOnce(
    'expects no slot after the last replica stopped cleanly, again from a restart, and a kill -9 still misses',
    async ({ target, expect, together }) => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const { guard } = guardOn(url, prefix);
      await guard.migrate();
      const common = ['--database', url, '--table-prefix', prefix];
      const first = [startWorker<Message>('stop-replica.ts', [url, prefix]), startWorker<Message>('stop-replica.ts', [url, prefix])];
      await Promise.all(first.map((worker) => worker.next('ready')));
      await together();
      await expect.poll(() => ran(first), { timeout: 20_000, interval: 200 }).toBeGreaterThanOrEqual(3);

      // Both replicas stop cleanly; then 3 s and more of slots nobody runs.
      for (const worker of first) worker.child.kill('SIGTERM');
      expect(await Promise.all(first.map((worker) => worker.exited))).toEqual([0, 0]);
      const stoppedBy = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      const [stopped] = await guard.slots({ job: 'tick', since: '1m' });
      expect(stopped?.stoppedAt).toBeInstanceOf(Date);
      expect(stopped?.stoppedAt?.getTime()).toBeLessThanOrEqual(stoppedBy + 1_000);
      // None missed, but a second whose fire node-cron dropped in both replicas (a stalled machine):
      // the stop itself expects nothing from when the replicas stopped starting runs.
      expect(
        missedUnexplained(stopped, first),
        JSON.stringify({
          stoppedAt: stopped?.stoppedAt,
          stoppedBy: new Date(stoppedBy),
          dropped: first.map((worker) => worker.droppedFires),
        }),
      ).toEqual([]);
      // The runs before the stop are listed (some may be late on a loaded machine).
      expect((stopped?.counts.succeeded ?? 0) + (stopped?.counts.late ?? 0)).toBeGreaterThanOrEqual(2);
      const listed = await cronguard(['slots', '--since', '1m', ...common]);
      // Exit 0, or 1 for a missed slot the ledger above explained (a stalled machine's, or the second
      // just before the stop): the CLI says missed for every missed slot.
      expect(listed.code, listed.stdout + listed.stderr).toBe((stopped?.counts.missed ?? 0) > 0 ? 1 : 0);
      expect(listed.stdout).toMatch(/tick: stopped at .* \(its last replica shut down cleanly\)/);
      // --until before the stop: the range the API's `until` gives, with the ISO form.
      const until = new Date((stopped?.stoppedAt?.getTime() ?? stoppedBy) - 1_000).toISOString();
      const cut = await cronguard(['slots', '--since', '1m', '--until', until, '--json', ...common]);
      expect(cut.code, cut.stderr).toBe(0);
      const [cutLedger] = JSON.parse(cut.stdout) as { until: string; since: string }[];
      // Cut there (or at the range's start, when the schedule was declared after it).
      expect(Date.parse(cutLedger?.until ?? '')).toBe(Math.max(Date.parse(until), Date.parse(cutLedger?.since ?? '')));

      // A restart expects slots again from the restart; the gap while stopped stays unexpected.
      const restarted = startWorker<Message>('stop-replica.ts', [url, prefix]);
      await restarted.next('ready');
      await expect.poll(() => ran([restarted]), { timeout: 20_000, interval: 200 }).toBeGreaterThanOrEqual(2);
      const [running] = await guard.slots({ job: 'tick', since: '1m' });
      expect(running?.stoppedAt).toBeNull();
      expect(missedUnexplained(running, [...first, restarted], stopped?.stoppedAt?.getTime())).toEqual([]);

      // kill -9: no shutdown, nothing recorded: the slots after it are missed, and slots exits 1.
      restarted.child.kill('SIGKILL');
      await restarted.exited;
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      const [killed] = await guard.slots({ job: 'tick', since: '1m' });
      expect(killed?.stoppedAt).toBeNull();
      expect(killed?.counts.missed).toBeGreaterThanOrEqual(2);
      const afterKill = await cronguard(['slots', '--since', '1m', ...common]);
      expect(afterKill.code).toBe(1);
      expect(afterKill.stdout).toMatch(/tick: .* missed/);
    },
    90_000,
  );

  eachDialectAtOnce(
    'dates the stop from when the replica stopped starting runs, not from when its drain ended',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target);
      let started = false;
      guard.schedule('* * * * * *', { name: 'slow-stop', lockAtMostFor: '10s', lockAtLeastFor: 0 }, async () => {
        started = true;
        // Ignores the shutdown's abort signal: the drain waits for it.
        await new Promise((resolve) => setTimeout(resolve, 2_500));
      });
      await expect.poll(() => started, { timeout: 20_000, interval: 50 }).toBe(true);
      const closing = Date.now();
      await guard.close();
      const drained = Date.now();
      expect(drained - closing).toBeGreaterThanOrEqual(1_000);
      const { guard: operator } = guardOn(url, prefix);
      const [ledger] = await operator.slots({ job: 'slow-stop', since: '1m' });
      // On the database's clock (this machine's): back-dated by the drain, so within the close call's
      // first moments (a slow machine gets 500 ms), well before the drain ended.
      expect(ledger?.stoppedAt?.getTime()).toBeGreaterThanOrEqual(closing - 500);
      expect(ledger?.stoppedAt?.getTime()).toBeLessThanOrEqual(closing + 500);
      await operator.close();
    },
    60_000,
  );
});

describe('stopGaps', () => {
  const at = (seconds: number): Date => new Date(Date.UTC(2026, 11, 6) + seconds * 1_000);
  const row = (started: number, declared: number, stopped: number | null) => ({
    startedAt: at(started),
    declaredAt: at(declared),
    stoppedAt: stopped === null ? null : at(stopped),
  });
  const hour = 3_600;
  it('opens a gap only when the last declaring process stops, and closes it at the next start', () => {
    // Two replicas; one stops at 100 while the other runs: no gap; the other stops at 200: a gap to the restart at 300.
    expectPure(stopGaps([row(0, 0, 100), row(0, 0, 200), row(300, 300, null)], at(400), 2 * hour * 1_000)).toEqual([
      { from: at(200), until: at(300) },
    ]);
    expectPure(stopGaps([row(0, 0, 100), row(0, 0, 200)], at(400), 2 * hour * 1_000)).toEqual([{ from: at(200), until: null }]);
  });
  it('counts a process that died (no stop) as declaring until two hours after its last declaration', () => {
    const killed = row(0, 0, null);
    expectPure(stopGaps([killed, row(0, 0, 200)], at(400), 2 * hour * 1_000)).toEqual([]);
    // Three hours later the dead one no longer hides a clean stop.
    expectPure(stopGaps([killed, row(0, 3 * hour, 3 * hour)], at(3 * hour + 10), 2 * hour * 1_000)).toEqual([
      { from: at(3 * hour), until: null },
    ]);
  });
});
