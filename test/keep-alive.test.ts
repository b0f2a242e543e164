// Safety in the job's hands, on every dialect: keep-alive, ctx.extend, the deadline signal, events.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { GuardError, GuardEventMap } from '../src/index.js';
import { eachDialectAtOnce } from './support/dialects-at-once.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { openRaw } from './support/raw-database.js';

// Each scenario on the three dialects at once (each its own tables): most of a scenario is waiting
// on the lock's clock.
describe("the job's safety tools", () => {
  eachDialectAtOnce(
    'keep-alive keeps a job that runs 3× lockAtMostFor exclusive against a contender trying every 100 ms',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target);
      const contender = guardOn(url, prefix).guard;
      // An extend every second keeps a 3 s lock: 2 s of slack for a loaded machine (at 1.5 s and at
      // 2 s, full runs on 2 cores stalled the process past the deadline and the job's signal fired).
      const job = { name: 'long', lockAtMostFor: 3_000, keepAlive: true };
      let longRunning = true;
      let longSettled = false;
      let longStarted!: () => void;
      const started = new Promise<void>((resolve) => (longStarted = resolve));
      const long = guard.run(job, async (ctx) => {
        longStarted();
        await sleep(9_000);
        longRunning = false;
        return ctx.signal.aborted;
      });
      void long.finally(() => (longSettled = true));
      // The contender starts once the long run holds the lock (its job has started), not after a guess.
      await started;
      // The contender tries until the long run has released, however slowly a busy machine runs the
      // loop; what must never happen is its job running while the long one still runs.
      const attempts: string[] = [];
      while (!longSettled) {
        const result = await contender.run({ name: 'long', lockAtMostFor: 3_000 }, () => (longRunning ? 'overlap' : 'ran'));
        attempts.push(result.executed ? result.value : result.reason);
        await sleep(100);
      }
      expect(await long).toEqual({ executed: true, value: false });
      expect(attempts.filter((attempt) => attempt !== 'locked' && attempt !== 'ran')).toEqual([]);
      // It tried past lockAtMostFor: keep-alive is what refused it then.
      expect(attempts.filter((attempt) => attempt === 'locked').length).toBeGreaterThan(3);
      // The long run is the first that started: the contender's last attempt may have run the job
      // just after the long one released, before `longSettled` was set (a newer, short run).
      const { runs } = await guard.history({ job: 'long', status: 'succeeded' });
      const run = runs.reduce<(typeof runs)[number] | undefined>(
        (first, one) => (first === undefined || one.startedAt < first.startedAt ? one : first),
        undefined,
      );
      expect(runs.length - attempts.filter((attempt) => attempt === 'ran').length).toBe(1);
      expect(run?.overran).toBe(false);
      expect((run?.lockUntil?.getTime() ?? 0) - (run?.startedAt.getTime() ?? 0)).toBeGreaterThan(7_500);
    },
  );

  eachDialectAtOnce('never shortens the lock: an extend shorter than what is left keeps the later expiry', async ({ target, expect }) => {
    const { guard, url, prefix } = await migratedGuard(target);
    const result = await guard.run({ name: 'no-shorter', lockAtMostFor: '10s' }, async (ctx) => {
      const extended = await ctx.extend('1s');
      await expect(ctx.extend(0)).rejects.toThrow(TypeError);
      await sleep(1_300);
      // Another replica still finds the lock held after the 1 s the extend asked for.
      const other = await guardOn(url, prefix).guard.run({ name: 'no-shorter', lockAtMostFor: '10s' }, () => 'overlap');
      return { extended, other: other.executed ? 'ran' : other.reason };
    });
    expect(result).toEqual({ executed: true, value: { extended: true, other: 'locked' } });
  });

  eachDialectAtOnce(
    'fires the signal before the lock expires for a job that ignores it, and records the overrun',
    async ({ target, expect }) => {
      const { guard, url, prefix } = await migratedGuard(target);
      /** One run that ignores its signal; the longest stall of this process's event loop meanwhile. */
      const attempt = async (name: string) => {
        let lastTick = performance.now();
        let longestGapMs = 0;
        const ticker = setInterval(() => {
          longestGapMs = Math.max(longestGapMs, performance.now() - lastTick);
          lastTick = performance.now();
        }, 10);
        let signalledAt = 0;
        const late = guard.run({ name, lockAtMostFor: 1_200 }, async (ctx) => {
          ctx.signal.addEventListener('abort', () => (signalledAt = Date.now()), { once: true });
          await sleep(1_800);
        });
        await sleep(1_400);
        // The lock expired: another replica may start.
        expect((await guardOn(url, prefix).guard.run({ name, lockAtMostFor: '1m' }, () => 'next')).executed).toBe(true);
        await late;
        clearInterval(ticker);
        const runs = (await guard.history({ job: name })).runs;
        return { signalledAt, longestGapMs, runs };
      };
      // A signal is a timer of this process: while the process itself is stalled (a loaded machine
      // stopped it for over a second, as seen in a full run), no timer can fire. Such an attempt
      // proves nothing either way and is tried again, up to three times.
      let result = await attempt('ignores-0');
      for (let retry = 1; retry < 3 && result.longestGapMs > 300; retry += 1) result = await attempt(`ignores-${retry}`);
      const { signalledAt, longestGapMs, runs } = result;
      const ignored = runs.find((run) => run.overran);
      // The database clock is this host's clock here: the signal came before the expiry it recorded.
      const stalled = `the longest gap between 10 ms ticks of this process's event loop was ${Math.round(longestGapMs)} ms`;
      expect(signalledAt, stalled).toBeGreaterThan(0);
      expect(signalledAt, stalled).toBeLessThan(ignored?.lockUntil?.getTime() ?? 0);
      expect(runs.map((run) => [run.status, run.overran])).toEqual([
        ['succeeded', false],
        ['succeeded', true],
      ]);
    },
  );

  eachDialectAtOnce(
    'extends by hand, moves the deadline, and aborts with LOCK_LOST when the lock was taken',
    async ({ target, expect }) => {
      const { guard, url, prefix, logger } = await migratedGuard(target);
      const events: string[] = [];
      const record = (name: keyof GuardEventMap) => () => void events.push(name);
      for (const name of ['acquired', 'skipped', 'succeeded', 'failed', 'released', 'lock-lost', 'overran'] as const)
        guard.on(name, record(name));
      const result = await guard.run({ name: 'by-hand', lockAtMostFor: 2_000 }, async (ctx) => {
        const before = ctx.lockExpiresAt;
        await sleep(50);
        const extended = await ctx.extend('10s');
        const lock = (await guard.locks()).find((row) => row.name === 'by-hand');
        return { extended, moved: ctx.lockExpiresAt - before, remaining: lock?.remainingMs ?? 0 };
      });
      if (!result.executed) throw new Error('expected a run');
      expect(result.value.extended).toBe(true);
      expect(result.value.moved).toBeGreaterThan(7_500);
      expect(result.value.remaining).toBeGreaterThan(9_000);

      const lost = await guard.run({ name: 'stolen', lockAtMostFor: '500ms' }, async (ctx) => {
        await sleep(700);
        // The lock expired and another replica took it: the extend must not take it back.
        await guardOn(url, prefix).guard.run({ name: 'stolen', lockAtMostFor: '1m', lockAtLeastFor: '1m' }, () => 1);
        const extended = await ctx.extend();
        return { extended, reason: (ctx.signal.reason as GuardError | undefined)?.code };
      });
      expect(lost).toEqual({ executed: true, value: { extended: false, reason: 'LOCK_LOST' } });
      expect(events).toContain('lock-lost');
      expect(logger.warnings.join('\n')).toMatch(/lost its lock at an extend/);
      expect(events.slice(0, 3)).toEqual(['acquired', 'succeeded', 'released']);
      expect(await guard.run({ name: 'stolen', lockAtMostFor: '1m' }, () => 2)).toEqual({
        executed: false,
        reason: 'locked',
      });
      expect(events.at(-1)).toBe('skipped');
    },
  );
});

// A SQLite wait for the write lock stops this whole process (better-sqlite3 waits synchronously):
// alone, not beside the other dialects' cases.
describe("the job's safety tools on 'sqlite'", () => {
  const target = { name: 'sqlite' as const, serverUrl: 'sqlite:' };
  it('fires the signal before the lock expires while another run of this process waits for the write lock', async () => {
    // acquireTimeout is SQLite's busy timeout: better-sqlite3 waits for another connection's write
    // lock synchronously, and no timer fires meanwhile. A 3 s wait would hold the signal (due at
    // 1.2 s) past the lock's expiry (2.4 s): the wait is cut at the deadline instead. (With 0.6 s
    // between the two, a full run's loaded machine once stalled this process past the expiry.)
    const { guard, url } = await migratedGuard(target, { acquireTimeout: '3s' });
    const writer = await openRaw('sqlite', url);
    let firedAt = 0;
    let expiresAt = 0;
    const watched = guard.run({ name: 'watched', lockAtMostFor: 2_400 }, async (ctx) => {
      expiresAt = ctx.lockExpiresAt;
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      firedAt = performance.now();
      return (ctx.signal.reason as GuardError).code;
    });
    await sleep(50);
    await writer.exec('BEGIN IMMEDIATE');
    const other = await guard.run({ name: 'other', lockAtMostFor: '1m' }, () => 'ran');
    await writer.exec('COMMIT');
    expect(await watched).toEqual({ executed: true, value: 'DEADLINE' });
    expect(firedAt).toBeLessThan(expiresAt);
    // The waiting acquire gave up at the deadline, as a lock-wait timeout.
    expect(other).toMatchObject({ executed: false, reason: 'error', error: { code: 'ACQUIRE_TIMEOUT' } });
    // With no deadline ahead, a wait lasts the whole acquireTimeout again.
    await writer.exec('BEGIN IMMEDIATE');
    const waitStarted = performance.now();
    const alone = await guard.run({ name: 'other', lockAtMostFor: '1m' }, () => 'ran');
    const waited = performance.now() - waitStarted;
    await writer.exec('COMMIT');
    await writer.close();
    expect(alone).toMatchObject({ executed: false, reason: 'error', error: { code: 'ACQUIRE_TIMEOUT' } });
    expect(waited).toBeGreaterThanOrEqual(2_900);
  });
});
