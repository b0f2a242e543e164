// The probe (a read of the lock row before the atomic take) answers losers cheaply; a guard that
// released a job's lock itself skips it next time, and the take alone still decides correctly.
import type { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createGuard, type Guard } from '../src/index.js';
import { databaseUrl, dialectTargets, uniquePrefix } from './support/dialects.js';
import { guardOn, migratedGuard, recordingLogger } from './support/guards.js';
import { loggedKysely } from './support/logged-kysely.js';
import { openRaw } from './support/raw-database.js';

describe.each(dialectTargets())('the probe on $name', (target) => {
  it.skipIf(target.serverUrl === null)(
    'is skipped after the guard released the lock itself, and the take alone still decides',
    async () => {
      const url = databaseUrl(target);
      const prefix = uniquePrefix();
      const log: CompiledQuery[] = [];
      const kysely = loggedKysely(target, url, log);
      const logger = recordingLogger();
      const guard: Guard = createGuard({ database: kysely, tablePrefix: prefix, logger });
      const other = guardOn(url, prefix).guard;
      // Every dialect's probe, and only the probe, reads the lock row's state as 'free'.
      const probes = (): number => log.splice(0).filter((query) => query.sql.includes("'free'")).length;
      try {
        await guard.migrate();
        log.splice(0);
        const job = { name: 'probed', lockAtMostFor: '1m' };

        // First run: the guard knows nothing of this lock, so it probes.
        expect(await guard.run(job, () => 1)).toEqual({ executed: true, value: 1 });
        expect(probes()).toBe(1);
        // It released the lock itself: the next acquire goes straight to the take, and wins.
        expect(await guard.run(job, () => 2)).toEqual({ executed: true, value: 2 });
        expect(probes()).toBe(0);

        // Another replica takes the lock and keeps it (lockAtLeastFor): the guard's hint is now
        // wrong, and its take, sent before any probe, loses as it should, and says why with no read
        // after it (on MySQL the take procedure's call answers the row's state; without the
        // procedure MySQL, which cannot tell a held row from a missing one by the take, reads it).
        expect((await other.run({ ...job, lockAtLeastFor: '1m' }, () => 'other')).executed).toBe(true);
        expect(await guard.run(job, () => 3)).toEqual({ executed: false, reason: 'locked' });
        expect(probes()).toBe(0);
        // A hint is used once: having lost, the guard probes again.
        expect(await guard.run(job, () => 4)).toEqual({ executed: false, reason: 'locked' });
        expect(probes()).toBe(1);

        // A slot another replica already ran is 'slot-done' from the take alone, too.
        const scheduled = { name: 'probed-slots', lockAtMostFor: '1m' };
        const first = new Date('2026-11-29T12:00:00.000Z');
        const second = new Date('2026-11-29T12:01:00.000Z');
        expect((await guard.run({ ...scheduled, slot: first }, () => 'first')).executed).toBe(true);
        expect((await other.run({ ...scheduled, slot: second }, () => 'second')).executed).toBe(true);
        probes();
        expect(await guard.run({ ...scheduled, slot: second }, () => 'again')).toEqual({
          executed: false,
          reason: 'slot-done',
        });
        expect(probes()).toBe(0);

        // A lock kept for lockAtLeastFor after the release is not expected free: the guard probes.
        const kept = { name: 'probed-kept', lockAtMostFor: '1m', lockAtLeastFor: '1m' };
        expect((await guard.run(kept, () => 'kept')).executed).toBe(true);
        probes();
        expect(await guard.run(kept, () => 'again')).toEqual({ executed: false, reason: 'locked' });
        expect(probes()).toBe(1);

        expect(logger.warnings).toEqual([]);
        expect(logger.errors).toEqual([]);
      } finally {
        await guard.close();
        await kysely.destroy();
      }
    },
  );

  it.skipIf(target.serverUrl === null)(
    'finds a lock row deleted by hand after the guard released it, with and without history',
    async () => {
      for (const history of [true, false]) {
        const { guard, url, prefix, logger } = await migratedGuard(target, { history });
        const raw = await openRaw(target.name, url);
        try {
          const job = { name: 'deleted', lockAtMostFor: '1m' };
          expect((await guard.run(job, () => 1)).executed, `history: ${history}`).toBe(true);
          await raw.query(`DELETE FROM ${prefix}locks WHERE name = ?`, ['deleted']);
          // The guard expects the lock free and takes first: the take finds no row, and the run
          // must still happen (the acquire creates the row), not be skipped as 'locked'.
          expect(await guard.run(job, () => 2), `history: ${history}`).toEqual({ executed: true, value: 2 });
          expect(await raw.query(`SELECT name FROM ${prefix}locks`), `history: ${history}`).toHaveLength(1);
          expect(logger.errors, `history: ${history}`).toEqual([]);
        } finally {
          await raw.close();
        }
      }
    },
  );
});
