// SQLite and MySQL/MariaDB: a losing acquire writes nothing (PostgreSQL: test/postgres-wal.test.ts).
import { statSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sqlitePath } from '../src/dialects/sqlite/connection.js';
import { dialectTargets } from './support/dialects.js';
import { guardOn, migratedGuard } from './support/guards.js';
import { openRaw } from './support/raw-database.js';

const ATTEMPTS = 100;
const targets = dialectTargets().filter((target) => target.name !== 'postgres');

describe.each(targets)('losing on $name', (target) => {
  // `paused`: an operator paused the job (guard.pause); its attempts are one read too (issue 17).
  it.skipIf(target.serverUrl === null).each(['locked', 'paused'] as const)(
    `writes nothing across ${ATTEMPTS} attempts skipped %s`,
    async (reason) => {
      const { guard: holder, url, prefix } = await migratedGuard(target);
      const contender = guardOn(url, prefix).guard;
      if (reason === 'locked') await holder.run({ name: 'held', lockAtMostFor: '1h', lockAtLeastFor: '1h' }, () => undefined);
      else await holder.pause('held');
      // The holder records its cronguard version once, beside its first run: done before measuring
      // (a pause takes no lock, so nothing records a version there).
      if (reason === 'locked') await expect.poll(async () => (await holder.versions()).replicas.length, { timeout: 10_000 }).toBe(1);
      const lose = async () => {
        for (let i = 0; i < ATTEMPTS; i += 1) {
          expect(await contender.run({ name: 'held', lockAtMostFor: '1m' }, () => 'never')).toEqual({
            executed: false,
            reason,
          });
        }
      };
      await contender.run({ name: 'held', lockAtMostFor: '1m' }, () => 'never'); // warm up
      if (target.name === 'sqlite') {
        // Every committed write appends frames to the WAL file.
        const wal = `${sqlitePath(url)}-wal`;
        const before = statSync(wal).size;
        await lose();
        expect(statSync(wal).size - before).toBe(0);
        // The measurement sees a write when there is one.
        await holder.run({ name: 'other', lockAtMostFor: '1m' }, () => undefined);
        expect(statSync(wal).size).toBeGreaterThan(before);
        return;
      }
      const raw = await openRaw('mysql', url);
      const lsn = async (): Promise<bigint> => {
        const [status] = await raw.query<{ Status: string }>('SHOW ENGINE INNODB STATUS');
        const match = /Log sequence number\s+(\d+)/.exec(status?.Status ?? '');
        if (match?.[1] === undefined) throw new Error('no log sequence number in SHOW ENGINE INNODB STATUS');
        return BigInt(match[1]);
      };
      try {
        // InnoDB's background purge of the set-up's own writes moves the LSN for a moment: wait
        // until it stands still, so that what moves it next is the losing attempts.
        await expect
          .poll(
            async () => {
              const first = await lsn();
              await new Promise((resolve) => setTimeout(resolve, 300));
              return (await lsn()) === first;
            },
            { timeout: 15_000, interval: 100 },
          )
          .toBe(true);
        const before = await lsn();
        await lose();
        expect(await lsn()).toBe(before);
        await holder.run({ name: 'other', lockAtMostFor: '1m' }, () => undefined);
        expect(await lsn()).toBeGreaterThan(before);
      } finally {
        await raw.close();
      }
    },
  );
});
