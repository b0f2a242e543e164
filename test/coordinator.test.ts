// guard.coordinator(): node-cron's RunCoordinator hooks called directly, on a SQLite file. What is
// tested here is the coordinator's own bookkeeping (options, timers, shutdown), which is the same on
// every dialect; node-cron replicas on every dialect are in node-cron.test.ts.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
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
