// Safety in the job's hands, on every dialect: keep-alive, ctx.extend, the deadline signal, events.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { GuardError, GuardEventMap } from '../src/index.js';
import { dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';

describe.each(dialectTargets())('the job\'s safety tools on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('keep-alive keeps a job that runs 3× lockAtMostFor exclusive against a contender trying every 100 ms', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const contender = guardOn(url, prefix).guard;
      // An extend every 500 ms keeps a 1.5 s lock: a second of slack for a loaded machine.
      const job = { name: 'long', lockAtMostFor: 1_500, keepAlive: true };
      const long = guard.run(job, async (ctx) => {
        await sleep(4_500);
        return ctx.signal.aborted;
      });
      await sleep(100);
      const attempts: string[] = [];
      for (let i = 0; i < 40; i += 1) {
        const result = await contender.run({ name: 'long', lockAtMostFor: 1_500 }, () => 'ran');
        attempts.push(result.executed ? 'ran' : result.reason);
        await sleep(100);
      }
      expect(await long).toEqual({ executed: true, value: false });
      expect(attempts.filter((attempt) => attempt !== 'locked')).toEqual([]);
      const [run] = (await guard.history({ job: 'long', status: 'succeeded' })).runs;
      expect(run?.overran).toBe(false);
      expect((run?.lockUntil?.getTime() ?? 0) - (run?.startedAt.getTime() ?? 0)).toBeGreaterThan(4_000);
    });

    it('never shortens the lock: an extend shorter than what is left keeps the later expiry', async () => {
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

    it('fires the signal before the lock expires for a job that ignores it, and records the overrun', async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      let signalledAt = 0;
      const late = guard.run({ name: 'ignores', lockAtMostFor: 1_200 }, async (ctx) => {
        ctx.signal.addEventListener('abort', () => (signalledAt = Date.now()), { once: true });
        await sleep(1_800);
      });
      await sleep(1_400);
      // The lock expired: another replica may start.
      expect((await guardOn(url, prefix).guard.run({ name: 'ignores', lockAtMostFor: '1m' }, () => 'next')).executed).toBe(true);
      await late;
      const runs = (await guard.history({ job: 'ignores' })).runs;
      const ignored = runs.find((run) => run.overran);
      // The database clock is this host's clock here: the signal came before the expiry it recorded.
      expect(signalledAt).toBeGreaterThan(0);
      expect(signalledAt).toBeLessThan(ignored?.lockUntil?.getTime() ?? 0);
      expect(runs.map((run) => [run.status, run.overran])).toEqual([
        ['succeeded', false],
        ['succeeded', true],
      ]);
    });

    it('extends by hand, moves the deadline, and aborts with LOCK_LOST when the lock was taken', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target);
      const events: string[] = [];
      const record = (name: keyof GuardEventMap) => () => void events.push(name);
      for (const name of ['acquired', 'skipped', 'succeeded', 'failed', 'released', 'lock-lost', 'overran'] as const) guard.on(name, record(name));
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
      expect(await guard.run({ name: 'stolen', lockAtMostFor: '1m' }, () => 2)).toEqual({ executed: false, reason: 'locked' });
      expect(events.at(-1)).toBe('skipped');
    });
  });
});
