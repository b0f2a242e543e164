// Durations with a fraction of a millisecond, through the lock statements and the run history of
// every dialect: each becomes the same whole number of milliseconds everywhere.
import { describe, expect, it } from 'vitest';
import { dialectTargets } from './support/dialects.js';
import { migratedGuard } from './support/guards.js';

describe.each(dialectTargets())('fractional milliseconds on $name', (target) => {
  it.skipIf(target.serverUrl === null)('are rounded up to whole ms, in the lock, the history and skipped-run rows', async () => {
    const { guard, logger } = await migratedGuard(target, { recordSkips: true });
    const job = { name: 'fraction', lockAtMostFor: '1500.5ms', lockAtLeastFor: 1200.25, stopMargin: '400.5ms' };
    expect(guard.resolveJob(job)).toMatchObject({
      lockAtMostForMs: 1_501,
      lockAtLeastForMs: 1_201,
      stopMarginMs: 401,
    });

    expect(await guard.run(job, () => 'ran')).toEqual({ executed: true, value: 'ran' });
    // lockAtLeastFor holds the lock: the loser's skip is recorded with its lockAtMostFor.
    expect(await guard.run(job, () => 'again')).toEqual({ executed: false, reason: 'locked' });

    const { runs } = await guard.history({ job: 'fraction' });
    expect(runs.map((run) => [run.status, run.lockAtMostForMs])).toEqual([
      ['skipped', 1_501],
      ['succeeded', 1_501],
    ]);
    const ran = runs[1];
    expect((ran?.lockUntil?.getTime() ?? 0) - (ran?.startedAt.getTime() ?? 0)).toBe(1_501);
    // Nothing failed on the way (PostgreSQL refused 1500.5 for the history's integer column).
    expect(logger.errors).toEqual([]);
    expect(logger.warnings).toEqual([]);
  });
});
