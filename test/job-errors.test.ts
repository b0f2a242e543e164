// Job errors and the end of an execution, on every dialect: whatever a job throws, its lock is given
// back at once, its run ends in a final status with text every database stores, and `run` rejects
// with exactly what the job threw; a job stopped by its signal is `cancelled`; once a run has
// ended, what the job left behind is told so; scheduled jobs' errors go to the guard's logger.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import { assertLocked, currentExecution, GuardError, type ExecutionContext } from '../src/index.js';
import { dialectTargets, type DialectTarget } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { HOSTILE_VALUES, isStorable, settle } from './support/hostile-values.js';
import { startWorker } from './support/processes.js';
import { openRaw } from './support/raw-database.js';

/** Makes the history's `error` column refuse more than 20 characters, as a schema changed by hand might. */
async function shortenErrorColumn(target: DialectTarget, url: string, prefix: string): Promise<void> {
  const raw = await openRaw(target.name, url);
  try {
    if (target.name === 'postgres') await raw.exec(`ALTER TABLE ${prefix}runs ALTER COLUMN error TYPE varchar(20)`);
    else if (target.name === 'mysql') await raw.exec(`ALTER TABLE ${prefix}runs MODIFY error VARCHAR(20) NULL`);
    else {
      await raw.exec(
        `CREATE TRIGGER ${prefix}short_error BEFORE UPDATE OF error ON ${prefix}runs WHEN length(NEW.error) > 20 ` +
          "BEGIN SELECT RAISE(ABORT, 'error text too long'); END",
      );
    }
  } finally {
    await raw.close();
  }
}

type LateReleaseMessage = { type: 'ended'; at: number } | { type: 'settled'; errors: string[]; executed: boolean };

describe.each(dialectTargets())('job errors on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it.each(HOSTILE_VALUES)(
      'a job that throws $kind: lock given back at once, storable history, rejects with the very value',
      async (hostile) => {
        const { guard } = await migratedGuard(target);
        const job = { name: 'hostile', lockAtMostFor: '1m' };
        const runIds: string[] = [];
        guard.on('acquired', ({ runId }) => void runIds.push(runId));
        const thrown = hostile.make();
        const settled = await settle(
          guard.run(job, () => {
            throw thrown;
          }),
        );
        expect(settled.rejected).toBe(true);
        // Not toBe: a failing toBe would try to print a revoked Proxy.
        expect(settled.value === thrown, 'rejected with exactly the thrown value').toBe(true);
        // The lock is free at once: the next run executes (a lock left held would skip it for a minute).
        expect(await guard.run(job, () => 'next')).toEqual({ executed: true, value: 'next' });
        const failed = (await guard.history({ job: 'hostile' })).runs.find((run) => run.id === runIds[0]);
        expect(failed?.status).toBe('failed');
        expect(isStorable(failed?.error), `stored ${JSON.stringify(failed?.error)}`).toBe(true);
        if (hostile.storedAs !== undefined) expect(failed?.error).toBe(hostile.storedAs);
      },
    );

    it('gives the lock back when the history cannot store the error text (a column changed by hand)', async () => {
      const { guard, url, prefix, logger } = await migratedGuard(target);
      await shortenErrorColumn(target, url, prefix);
      const job = { name: 'long-message', lockAtMostFor: '1m' };
      const runIds: string[] = [];
      guard.on('acquired', ({ runId }) => void runIds.push(runId));
      const failure = new Error('x'.repeat(100));
      await expect(guard.run(job, () => Promise.reject(failure))).rejects.toBe(failure);
      expect(await guard.run(job, () => 'next')).toEqual({ executed: true, value: 'next' });
      const failed = (await guard.history({ job: job.name })).runs.find((run) => run.id === runIds[0]);
      expect(failed).toMatchObject({ status: 'failed', error: null });
      expect(logger.warnings.join('\n')).toMatch(/without the job's error text/);
    });

    it('after a run ends, assertLocked() throws NOT_LOCKED, currentExecution() is undefined and ctx.signal is aborted', async () => {
      const { guard } = await migratedGuard(target);
      let resume!: () => void;
      const resumed = new Promise<void>((resolve) => (resume = resolve));
      const leftBehind: Promise<{ locked: unknown; current: unknown; aborted: boolean; reason: unknown }>[] = [];
      let heardAbort: unknown;
      const leave = (ctx: ExecutionContext, readSignalNow: boolean): void => {
        if (readSignalNow) ctx.signal.addEventListener('abort', () => (heardAbort = ctx.signal.reason), { once: true });
        leftBehind.push(
          resumed.then(() => {
            let locked: unknown;
            try {
              assertLocked();
            } catch (error) {
              locked = error;
            }
            return { locked, current: currentExecution(), aborted: ctx.signal.aborted, reason: ctx.signal.reason };
          }),
        );
      };
      // One job read its signal while it ran, one never did; one returned, one threw.
      expect(await guard.run({ name: 'returns', lockAtMostFor: '1m' }, (ctx) => void leave(ctx, true))).toEqual({
        executed: true,
        value: undefined,
      });
      const thrown = new Error('failed, leaving work behind');
      await expect(
        guard.run({ name: 'throws', lockAtMostFor: '1m' }, (ctx) => {
          leave(ctx, false);
          throw thrown;
        }),
      ).rejects.toBe(thrown);
      resume();
      for (const seen of await Promise.all(leftBehind)) {
        expect(seen.locked).toBeInstanceOf(GuardError);
        expect(seen.locked).toMatchObject({ code: 'NOT_LOCKED' });
        expect(seen.current).toBeUndefined();
        expect(seen.aborted).toBe(true);
        expect(seen.reason).toBeInstanceOf(GuardError);
        expect(seen.reason).toMatchObject({ code: 'EXECUTION_ENDED' });
      }
      expect(heardAbort).toMatchObject({ code: 'EXECUTION_ENDED' });
    });

    it("records a job that stops on shutdown with the signal's reason as cancelled, not failed; doctor does not count it", async () => {
      const { guard, url, prefix } = await migratedGuard(target);
      const events: string[] = [];
      guard.on('failed', () => void events.push('failed'));
      guard.on('cancelled', ({ reason }) => void events.push(`cancelled ${reason.code}`));
      let started!: () => void;
      const running = new Promise<void>((resolve) => (started = resolve));
      // timers/promises rejects with an AbortError whose cause is the signal's reason.
      const run = settle(
        guard.run({ name: 'stopped', lockAtMostFor: '1m' }, async (ctx) => {
          started();
          await sleep(60_000, undefined, { signal: ctx.signal });
        }),
      );
      await running;
      await guard.shutdown({ timeout: '10s' });
      const { rejected, value } = await run;
      expect(rejected).toBe(true);
      expect(value).toMatchObject({ name: 'AbortError', cause: { code: 'SHUTDOWN' } });
      expect(events).toEqual(['cancelled SHUTDOWN']);
      const reader = guardOn(url, prefix).guard;
      const [record] = (await reader.history({ job: 'stopped' })).runs;
      expect(record).toMatchObject({
        status: 'cancelled',
        error: 'The guard is shutting down: job "stopped" should stop',
      });
      expect((await reader.history({ status: 'cancelled' })).runs).toHaveLength(1);
      expect(await reader.doctor()).toMatchObject([{ job: 'stopped', runs: 1, failed: 0, cancelled: 1, problems: [] }]);
      expect(await reader.run({ name: 'stopped', lockAtMostFor: '1m' }, () => 'next')).toEqual({
        executed: true,
        value: 'next',
      });
    });

    it("records a job that stops at its deadline by throwing the signal's reason as cancelled; its own error stays failed", async () => {
      const { guard } = await migratedGuard(target);
      const reasons: string[] = [];
      guard.on('cancelled', ({ reason }) => void reasons.push(reason.code));
      // lockAtMostFor 2.2 s: the stop margin is 1 s, so the signal fires near 1.2 s.
      const untilAborted = (ctx: ExecutionContext): Promise<void> =>
        new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      const stopped = await settle(
        guard.run({ name: 'deadline', lockAtMostFor: 2_200 }, async (ctx) => {
          await untilAborted(ctx);
          ctx.signal.throwIfAborted();
        }),
      );
      expect(stopped.rejected).toBe(true);
      expect(stopped.value).toMatchObject({ code: 'DEADLINE' });
      const ownError = new Error('gave up my own way');
      const failed = await settle(
        guard.run({ name: 'deadline-own-error', lockAtMostFor: 2_200 }, async (ctx) => {
          await untilAborted(ctx);
          throw ownError;
        }),
      );
      expect(failed.value).toBe(ownError);
      expect(reasons).toEqual(['DEADLINE']);
      const statuses = (await guard.history()).runs.map((run) => [run.job, run.status, run.error]);
      expect(statuses).toEqual(
        expect.arrayContaining([
          ['deadline', 'cancelled', 'Job "deadline" reached its deadline: its lock expires soon'],
          ['deadline-own-error', 'failed', 'gave up my own way'],
        ]),
      );
    });

    it("sends a scheduled job's errors to the guard's logger and events, never to node-cron's console", async () => {
      const consoleError = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        const { guard, logger } = await migratedGuard(target);
        const failed: unknown[] = [];
        guard.on('failed', ({ error }) => void failed.push(error));
        const boom = new Error('scheduled boom');
        const task = guard.schedule('* * * * * *', { name: 'scheduled-fails', lockAtMostFor: '1m' }, () => {
          throw boom;
        });
        try {
          await expect.poll(() => logger.errors.length, { timeout: 10_000 }).toBeGreaterThan(0);
          // Whatever node-cron would print of a rejected task, it prints in the same turn.
          await sleep(200);
        } finally {
          await task.destroy();
        }
        expect(logger.errors[0]).toBe('Job "scheduled-fails" failed: scheduled boom');
        expect(failed[0]).toBe(boom);
        expect(consoleError.mock.calls).toEqual([]);
      } finally {
        consoleError.mockRestore();
      }
    });

    it("logs a scheduled job that stops on shutdown with its signal's reason as a warning, and records it cancelled", async () => {
      const consoleError = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      try {
        const { guard, url, prefix, logger } = await migratedGuard(target);
        let running = false;
        guard.schedule('* * * * * *', { name: 'scheduled-stops', lockAtMostFor: '1m' }, async (ctx) => {
          running = true;
          await sleep(60_000, undefined, { signal: ctx.signal });
        });
        await expect.poll(() => running, { timeout: 10_000 }).toBe(true);
        await guard.shutdown({ timeout: '10s' });
        expect(logger.warnings).toContain('Job "scheduled-stops" stopped: The guard is shutting down: job "scheduled-stops" should stop');
        expect(logger.errors).toEqual([]);
        expect(consoleError.mock.calls).toEqual([]);
        const [record] = (await guardOn(url, prefix).guard.history({ job: 'scheduled-stops' })).runs;
        expect(record?.status).toBe('cancelled');
      } finally {
        consoleError.mockRestore();
      }
    });

    it('lets a process whose late release comes after shutdown exit at once (no retries against the closed pool)', async () => {
      const { url, prefix } = await migratedGuard(target);
      const worker = startWorker<LateReleaseMessage>('late-release-worker.ts', [url, prefix]);
      const ended = await worker.next<Extract<LateReleaseMessage, { type: 'ended' }>>('ended');
      const settled = await worker.next<Extract<LateReleaseMessage, { type: 'settled' }>>('settled');
      expect(await worker.exited).toBe(0);
      // Retries would have slept 200 + 800 + 3,200 ms, keeping the process alive that long.
      expect(Date.now() - ended.at).toBeLessThan(3_000);
      expect(settled.executed).toBe(true);
      expect(settled.errors).toHaveLength(1);
      expect(settled.errors[0]).toMatch(/^Releasing the lock of job "late" failed after shutdown ended the guard's connections/);
    });
  });
});
