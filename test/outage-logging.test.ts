// The log during an outage, on real databases that fail: a job's first failed acquire is logged,
// the next ones are not (but each still emits its events), at most one summary line a minute says
// how many were skipped, and one line says when the job can take its lock again.
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Guard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn } from './support/guards.js';

afterEach(() => {
  vi.useRealTimers();
});

/** Counts the guard's `error` and `skipped` events: every failure must reach them, logged or not. */
function countEvents(guard: Guard): { error: number; skipped: number } {
  const counts = { error: 0, skipped: 0 };
  guard.on('error', () => void (counts.error += 1));
  guard.on('skipped', ({ reason }) => void (counts.skipped += reason === 'error' ? 1 : 0));
  return counts;
}

const job = { name: 'nightly', lockAtMostFor: '1m' };

describe.each(dialectTargets())('the log of an outage on $name', (target) => {
  describe.skipIf(target.serverUrl === null)('', () => {
    it('logs the first failure once, not the next ones, and the recovery once; events count every skip', async () => {
      // The tables are missing until migrate(): every acquire fails on the real database.
      const { guard, logger } = guardOn(databaseUrl(target), uniquePrefix());
      const events = countEvents(guard);
      for (let tick = 0; tick < 6; tick += 1) expect((await guard.run(job, () => 'ran')).executed).toBe(false);
      expect(logger.errors).toEqual([expect.stringMatching(/^The cronguard lock table does not exist; .*Job "nightly" was skipped\.$/)]);
      expect(events).toEqual({ error: 6, skipped: 6 });
      expect(logger.warnings).toEqual([]);

      await guard.migrate();
      expect(await guard.run(job, () => 'ran')).toEqual({ executed: true, value: 'ran' });
      expect(logger.warnings).toEqual([
        expect.stringMatching(/^Job "nightly" can take its lock again: 6 run\(s\) were skipped since \S+Z because taking the lock failed$/),
      ]);
      expect(await guard.run(job, () => 'again')).toEqual({ executed: true, value: 'again' });
      expect(logger.warnings).toHaveLength(1);
      expect(logger.errors).toHaveLength(1);
    });

    it('writes at most one summary line a minute per job, saying how many runs were skipped', async () => {
      vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-12-01T08:00:00Z') });
      const { guard, logger } = guardOn(databaseUrl(target), uniquePrefix());
      const events = countEvents(guard);
      for (let tick = 0; tick < 3; tick += 1) await guard.run(job, () => 'ran');
      // Another job's outage is its own: its first failure is logged too.
      await guard.run({ name: 'hourly', lockAtMostFor: '1m' }, () => 'ran');
      expect(logger.errors).toHaveLength(2);

      vi.setSystemTime(new Date('2026-12-01T08:00:59Z'));
      await guard.run(job, () => 'ran');
      expect(logger.errors).toHaveLength(2);
      vi.setSystemTime(new Date('2026-12-01T08:01:00Z'));
      await guard.run(job, () => 'ran');
      expect(logger.errors).toHaveLength(3);
      expect(logger.errors[2]).toMatch(
        /^Job "nightly" still cannot take its lock: 4 more run\(s\) skipped since the last message, 5 since 2026-12-01T08:00:00.000Z\. Latest: The cronguard lock table does not exist; /,
      );
      // The next minute starts at that summary.
      vi.setSystemTime(new Date('2026-12-01T08:01:30Z'));
      await guard.run(job, () => 'ran');
      expect(logger.errors).toHaveLength(3);
      expect(events).toEqual({ error: 7, skipped: 7 });
    });
  });
});

/** URLs of databases that cannot be reached: a closed port, a file in a folder that does not exist. */
const unreachable = [
  { name: 'sqlite', url: `sqlite:${join(tmpdir(), `cronguard-missing-${process.pid}`, 'jobs.sqlite')}` },
  { name: 'postgres', url: 'postgres://postgres@127.0.0.1:1/none' },
  { name: 'mysql', url: 'mysql://root@127.0.0.1:1/none' },
];

describe.each(unreachable)('the log of an unreachable $name database', ({ url }) => {
  it('holds one line for five failed acquires, and five error events', async () => {
    const { guard, logger } = guardOn(url, uniquePrefix());
    const events = countEvents(guard);
    for (let tick = 0; tick < 5; tick += 1) {
      const result = await guard.run(job, () => 'ran');
      expect(result).toMatchObject({ executed: false, reason: 'error', error: { code: 'ACQUIRE_FAILED' } });
    }
    expect(logger.errors).toEqual([expect.stringMatching(/^Taking the lock of job "nightly" failed, so the run was skipped: /)]);
    expect(events).toEqual({ error: 5, skipped: 5 });
  });
});
