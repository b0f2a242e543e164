// guard.coordinator(): node-cron's RunCoordinator hooks called directly, on a SQLite file. What is
// tested here is the coordinator's own bookkeeping (options, timers, shutdown), which is the same on
// every dialect; node-cron replicas on every dialect are in node-cron.test.ts. The last block checks,
// on every dialect, that a coordinator fire takes the same path as guard.run (the guard's Runner).
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Guard, GuardEventName } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';

const sqlite = dialectTargets().filter((target) => target.name === 'sqlite');

/** node-cron's key for a fire: `${taskName}:${slot.toISOString()}`. Computed once per fire: a later call may be in the next second. */
function keyOf(name: string, slot = new Date(Math.floor(Date.now() / 1_000) * 1_000)): string {
  return `${name}:${slot.toISOString()}`;
}

describe.each(sqlite)('guard.coordinator() on $name', (target) => {
  it('takes lockAtLeastFor alone, and refuses durations that cannot hold together', async () => {
    const { guard } = await migratedGuard(target);
    expect(() => guard.coordinator({ lockAtLeastFor: '5s' })).not.toThrow();
    expect(() => guard.coordinator({ lockAtMostFor: '1s', lockAtLeastFor: '5s' })).toThrow(
      new TypeError('Expected `coordinator.lockAtLeastFor` (5000 ms) to be at most `coordinator.lockAtMostFor` (1000 ms)'),
    );
    expect(() => guard.coordinator({ lockAtMostFor: '5 minutes' })).toThrow(
      new TypeError(`Expected \`coordinator.lockAtMostFor\` to be a duration like '5m' or 'PT5M', got "5 minutes"`),
    );
    const withDefaults = guardOn(databaseUrl(target), uniquePrefix(), { defaults: { lockAtMostFor: '1s' } }).guard;
    expect(() => withDefaults.coordinator({ lockAtLeastFor: '5s' })).toThrow(
      new TypeError('Expected `coordinator.lockAtLeastFor` (5000 ms) to be at most `defaults.lockAtMostFor` (1000 ms)'),
    );
  });

  it('skips, and says why once, a task whose lease is shorter than lockAtLeastFor', async () => {
    const { guard, logger } = await migratedGuard(target);
    const coordinator = guard.coordinator({ lockAtLeastFor: '5s' });
    // node-cron passes the task's distributedLease as the ttl: 30 s runs, 1 s cannot.
    const longLease = keyOf('long-lease');
    expect(await coordinator.shouldRun(longLease, 30_000)).toBe(true);
    await coordinator.onComplete?.(longLease);
    expect(await coordinator.shouldRun(keyOf('short-lease'), 1_000)).toBe(false);
    expect(await coordinator.shouldRun(keyOf('short-lease', new Date(Date.now() + 1_000)), 1_000)).toBe(false);
    expect(logger.errors).toEqual([
      'Task "short-lease" did not run: Expected `coordinator.lockAtLeastFor` of job "short-lease" (5000 ms) ' +
        'to be at most `distributedLease` (1000 ms)',
    ]);
  });

  it('releases a lock held longer than a timer can wait (lockAtMostFor 30 days)', async () => {
    const { guard, logger } = await migratedGuard(target);
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      const coordinator = guard.coordinator({ lockAtMostFor: '30d' });
      const key = keyOf('monthly');
      expect(await coordinator.shouldRun(key, 30_000)).toBe(true);
      // Node turns a timer over 2^31 - 1 ms into 1 ms: the coordinator then forgot the lock at once.
      await sleep(20);
      await coordinator.onComplete?.(key);
      const [lock] = await guard.locks();
      expect(lock).toMatchObject({ name: 'monthly', state: 'free' });
      expect((await guard.history({ job: 'monthly' })).runs[0]).toMatchObject({ status: 'succeeded', overran: false });
      expect(warnings).not.toContain('TimeoutOverflowWarning');
      expect(logger.errors).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('still releases, and reports the overrun, when a task completes after its lock expired', async () => {
    const { guard } = await migratedGuard(target);
    const overran: string[] = [];
    guard.on('overran', ({ job }) => void overran.push(job));
    const coordinator = guard.coordinator({ lockAtMostFor: '300ms' });
    const key = keyOf('slow');
    expect(await coordinator.shouldRun(key, 30_000)).toBe(true);
    await sleep(450);
    await coordinator.onComplete?.(key);
    expect(overran).toEqual(['slow']);
    expect((await guard.history({ job: 'slow' })).runs[0]).toMatchObject({ status: 'succeeded', overran: true });
  });

  it('runs a fire it wins while the guard shuts down (its slot is taken), and shutdown waits for its completion', async () => {
    const { guard, url, prefix } = await migratedGuard(target);
    const coordinator = guard.coordinator({ lockAtMostFor: '1m' });
    const key = keyOf('deploy');
    const deciding = coordinator.shouldRun(key, 30_000);
    let closed = false;
    const closing = guard.shutdown({ timeout: '10s' }).then(() => void (closed = true));
    // Giving the lock back unrun would leave the slot marked as run on every replica: it runs here.
    expect(await deciding).toBe(true);
    await sleep(100);
    expect(closed).toBe(false);
    await coordinator.onComplete?.(key);
    await closing;
    const reader = guardOn(url, prefix).guard;
    const [lock] = await reader.locks();
    expect(lock).toMatchObject({ name: 'deploy', state: 'free' });
    expect((await reader.history({ job: 'deploy' })).runs.map((run) => run.status)).toEqual(['succeeded']);
  });
});

/** Every event the guard emits for the runs of `job`, with the names of its payload's fields. */
function eventsOf(guard: Guard, job: string): Array<[GuardEventName, string[]]> {
  const seen: Array<[GuardEventName, string[]]> = [];
  const names: GuardEventName[] = [
    'acquired',
    'skipped',
    'succeeded',
    'failed',
    'cancelled',
    'abandoned',
    'released',
    'lock-lost',
    'overran',
    'error',
  ];
  for (const name of names) {
    guard.on(name, (payload: { job?: string }) => {
      if (payload.job === job) seen.push([name, Object.keys(payload).sort()]);
    });
  }
  return seen;
}

describe.each(dialectTargets())('a guard.coordinator() fire on $name', (target) => {
  it.skipIf(target.serverUrl === null)('emits the events guard.run emits, and finishes its history row the same way', async () => {
    const { guard } = await migratedGuard(target);
    const byRun = eventsOf(guard, 'by-run');
    const byCoordinator = eventsOf(guard, 'by-coordinator');
    const slot = new Date(Math.floor(Date.now() / 1_000) * 1_000);
    expect(await guard.run({ name: 'by-run', lockAtMostFor: '1m', slot }, () => 1)).toEqual({
      executed: true,
      value: 1,
    });
    const coordinator = guard.coordinator({ lockAtMostFor: '1m' });
    const key = keyOf('by-coordinator', slot);
    expect(await coordinator.shouldRun(key, 30_000)).toBe(true);
    await coordinator.onComplete?.(key);
    expect(byRun.map(([name]) => name)).toEqual(['acquired', 'succeeded', 'released']);
    expect(byCoordinator).toEqual(byRun);
    const fields = async (job: string): Promise<unknown> => {
      const [run] = (await guard.history({ job })).runs;
      return {
        status: run?.status,
        error: run?.error,
        overran: run?.overran,
        slot: run?.slot,
        finished: run?.finishedAt instanceof Date,
      };
    };
    expect(await fields('by-coordinator')).toEqual(await fields('by-run'));
    // A second fire for the same slot skips as a second guard.run would, with the same event.
    expect(await coordinator.shouldRun(key, 30_000)).toBe(false);
    expect((await guard.run({ name: 'by-run', lockAtMostFor: '1m', slot }, () => 2)).executed).toBe(false);
    expect(byCoordinator).toEqual(byRun);
  });

  it.skipIf(target.serverUrl === null)('starts the historyRetention prune after a fire it ran, as guard.run does', async () => {
    const { guard: writer, url, prefix } = await migratedGuard(target);
    for (const name of ['x', 'x', 'x', 'y', 'y']) await writer.run({ name, lockAtMostFor: '1m' }, () => 1);
    await sleep(150);
    const retaining = guardOn(url, prefix, { historyRetention: '100ms' }).guard;
    const coordinator = retaining.coordinator({ lockAtMostFor: '1m' });
    const key = keyOf('x');
    expect(await coordinator.shouldRun(key, 30_000)).toBe(true);
    await coordinator.onComplete?.(key);
    const jobs = async (): Promise<string[]> => (await writer.history()).runs.map((run) => run.job).sort();
    await expect.poll(jobs).toEqual(['x', 'y']);
  });
});
