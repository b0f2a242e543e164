// Fault test: the database server stops in the middle of a run and comes back. Each dialect gets its
// OWN server (halting the shared ones of the global setup would break other files), on pools the
// guard opens from the URL, so the guard meets the outage exactly as an app would.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DialectName, GuardError, RunResult } from '../src/index.js';
import { findMariadbd, startMariadb, startPostgres, type RestartableDatabase } from './setup/databases.js';
import { uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';

interface Server {
  readonly name: Exclude<DialectName, 'sqlite'>;
  readonly start: () => Promise<RestartableDatabase>;
  readonly skip: boolean;
}

// Same policy as the global setup: CI must never pass by silently skipping a dialect (there,
// startMariadb() fails the file for want of mariadbd); elsewhere one loud line.
const skipMariadb = findMariadbd() === undefined && process.env['CI'] !== 'true';
if (skipMariadb) {
  console.warn(
    '\n*** cronguard: the MariaDB restart test is SKIPPED: mariadbd not found. Install it with: apt-get install -y mariadb-server ***\n',
  );
}

const servers: Server[] = [
  { name: 'postgres', start: startPostgres, skip: false },
  { name: 'mysql', start: startMariadb, skip: skipMariadb },
];

/** The interrupted job: ~1.5 s, and it lasts until the server is down. */
const JOB_MS = 1_500;
/**
 * Short, to wait for its expiry, but not 3 s: the run settles ~2.5 s in (release tried at 1.5, 1.7
 * and 2.5 s; the next backoff, 3.2 s, would pass the expiry), and with 5 s its lock is still held
 * once the server is back, so the test sees the lock row survive the restart. Not above 5.7 s, or
 * the release's third retry would land after the resume and succeed.
 */
const LOCK_AT_MOST_FOR_MS = 5_000;
/** A bound for "did not hang": the release gives up after 3 attempts (200 + 800 ms of backoff). */
const RUN_SETTLES_WITHIN_MS = 10_000;

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Up to `max` attempts, 500 ms apart (a scheduler's next tick), until one executes; all results. */
async function attempts<T>(max: number, run: () => Promise<RunResult<T>>): Promise<RunResult<T>[]> {
  const results: RunResult<T>[] = [];
  for (let attempt = 0; attempt < max; attempt += 1) {
    if (attempt > 0) await sleep(500);
    const result = await run();
    results.push(result);
    if (result.executed) break;
  }
  return results;
}

describe.each(servers)('guard on $name while its server stops mid-run', ({ name, start, skip }) => {
  describe.skipIf(skip)('', () => {
    let db: RestartableDatabase | undefined;

    beforeAll(async () => {
      db = await start();
    });

    afterAll(async () => {
      await db?.stop();
    });

    it('does not crash, skips while the server is down, and runs normally within two attempts once it is back', async () => {
      if (db === undefined) throw new Error(`no ${name} server`);
      const server = db;
      const { guard, logger } = guardOn(server.url, uniquePrefix(), { acquireTimeout: '2s' });
      const errorCodes: string[] = [];
      guard.on('error', ({ error }) => void errorCodes.push(error.code));
      await guard.migrate();
      const job = { name: 'interrupted', lockAtMostFor: LOCK_AT_MOST_FOR_MS };

      // 1. The server stops while the job runs. The job itself succeeds; only the release fails.
      let interruptedRunId: string | undefined;
      let jobStarted!: () => void;
      const started = new Promise<void>((resolve) => (jobStarted = resolve));
      let serverDown!: () => void;
      const down = new Promise<void>((resolve) => (serverDown = resolve));
      const runStartedAt = performance.now();
      const interrupted = guard.run(job, async (ctx) => {
        interruptedRunId = ctx.runId;
        jobStarted();
        // ~1.5 s, and never done before the server is down: the release must meet a dead server.
        await Promise.all([sleep(JOB_MS), down]);
        return 'job done';
      });
      await within(started, 5_000, 'the job start');
      const haltStartedAt = performance.now();
      await server.halt().finally(serverDown);
      const haltMs = performance.now() - haltStartedAt;
      expect(await within(interrupted, RUN_SETTLES_WITHIN_MS, 'the interrupted run')).toEqual({
        executed: true,
        value: 'job done',
      });
      const runMs = performance.now() - runStartedAt;
      const releaseErrors = logger.errors.filter((message) => message.includes('Releasing the lock'));
      expect(releaseErrors, logger.errors.join('\n')).toHaveLength(1);
      expect(releaseErrors[0]).toMatch(/^Releasing the lock of job "interrupted" failed; it expires by itself at lockAtMostFor: /);
      expect(errorCodes).toContain('RELEASE_FAILED');
      expect(interruptedRunId).toBeTypeOf('string');

      // 2. While it is down: every attempt is skipped with an error, fast, and no job runs.
      for (const jobName of ['interrupted', 'other', 'interrupted']) {
        let ran = false;
        const startedAt = performance.now();
        const result = await within(
          guard.run({ name: jobName, lockAtMostFor: '1m' }, () => (ran = true)),
          RUN_SETTLES_WITHIN_MS,
          'a run while the server is down',
        );
        expect(performance.now() - startedAt).toBeLessThan(3_000);
        expect(ran).toBe(false);
        expect(result).toMatchObject({ executed: false, reason: 'error' });
        const { code } = (result as { error: GuardError }).error;
        expect(['ACQUIRE_FAILED', 'ACQUIRE_TIMEOUT']).toContain(code);
      }

      // 3. Back up: another job runs within two attempts.
      const resumeStartedAt = performance.now();
      await server.resume();
      const resumeMs = performance.now() - resumeStartedAt;
      const otherRuns = await attempts(2, () => guard.run({ name: 'other', lockAtMostFor: '1m' }, () => 'other ran'));
      expect(otherRuns.at(-1), JSON.stringify(otherRuns)).toEqual({ executed: true, value: 'other ran' });

      // The interrupted job's lock survived the restart (its release never got through): it is
      // held until lockAtMostFor, then the job runs within two attempts.
      const lock = (await guard.locks()).find((row) => row.name === job.name);
      expect(lock).toBeDefined();
      const heldAfterResume = lock !== undefined && lock.remainingMs > 300;
      if (heldAfterResume) {
        expect(lock).toMatchObject({ state: 'held', running: true });
        expect(await guard.run(job, () => 'too early')).toEqual({ executed: false, reason: 'locked' });
      }
      await sleep((lock?.remainingMs ?? 0) + 100);
      const jobRuns = await attempts(2, () => guard.run(job, () => 'ran again'));
      expect(jobRuns.at(-1), JSON.stringify(jobRuns)).toEqual({ executed: true, value: 'ran again' });

      // 4. Nothing is left running or held: the interrupted run was taken over, so it is abandoned.
      const { runs } = await guard.history();
      expect(runs.filter((run) => run.status === 'running')).toEqual([]);
      expect(runs.find((run) => run.id === interruptedRunId)).toMatchObject({ job: 'interrupted', status: 'abandoned', finishedAt: null });
      expect(runs.filter((run) => run.job === 'interrupted').map((run) => run.status)).toEqual(['succeeded', 'abandoned']);
      expect(runs.filter((run) => run.job === 'other').map((run) => run.status)).toEqual(['succeeded']);
      expect((await guard.locks()).filter((row) => row.running)).toEqual([]);

      // What the logger heard, for whoever reads a failure: one release failure, the skips, pool errors.
      const ms = (value: number): string => `${Math.round(value)} ms`;
      console.info(
        `[${name}] halt ${ms(haltMs)}, interrupted run settled after ${ms(runMs)}, resume ${ms(resumeMs)}, ` +
          `its lock ${heldAfterResume ? `still held for ${ms(lock?.remainingMs ?? 0)} after resume (checked: locked)` : 'already expired at resume'}, ` +
          `attempts after resume: other ${otherRuns.length}, interrupted ${jobRuns.length}`,
      );
      console.info(`[${name}] logger errors:\n  ${logger.errors.join('\n  ')}\n[${name}] warnings:\n  ${logger.warnings.join('\n  ')}`);
    });
  });
});
