// ShedLock's JDBC provider with database time, written out as the baseline, through the same
// driver: PostgreSQL upserts with ON CONFLICT DO UPDATE … WHERE; MySQL tries INSERT IGNORE, then a
// conditional UPDATE; SQLite (no ShedLock dialect) inserts, and on a duplicate key updates. Release
// for all: lock_until = greatest(now, locked_at + lockAtLeastFor), matched by name and locked_by.
// On PostgreSQL as named prepared statements, as the guard's are, and as pgjdbc's are after its
// prepareThreshold (5 executions): the baseline is ShedLock in its steady state.
import type { BenchDriver } from './drivers.js';

export interface ReferenceLock {
  /** True when this call took the lock. */
  acquire(name: string, lockedBy: string): Promise<boolean>;
  release(name: string, lockedBy: string): Promise<void>;
}

export async function createReferenceLock(driver: BenchDriver): Promise<ReferenceLock> {
  if (driver.dialect === 'postgres') {
    await driver.raw(`CREATE TABLE IF NOT EXISTS bench_shedlock (name varchar(64) PRIMARY KEY, lock_until timestamptz NOT NULL,
      locked_at timestamptz NOT NULL, locked_by varchar(255) NOT NULL)`);
    return {
      async acquire(name, lockedBy) {
        const result = (await driver.rawPrepared(
          `INSERT INTO bench_shedlock (name, lock_until, locked_at, locked_by) VALUES ($1, now() + interval '60 seconds', now(), $2)
           ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by
           WHERE bench_shedlock.lock_until <= now()`,
          [name, lockedBy],
        )) as { rowCount: number };
        return result.rowCount === 1;
      },
      async release(name, lockedBy) {
        await driver.rawPrepared(`UPDATE bench_shedlock SET lock_until = GREATEST(now(), locked_at) WHERE name = $1 AND locked_by = $2`, [
          name,
          lockedBy,
        ]);
      },
    };
  }
  if (driver.dialect === 'mysql') {
    await driver.raw(`CREATE TABLE IF NOT EXISTS bench_shedlock (name VARCHAR(64) PRIMARY KEY, lock_until DATETIME(3) NOT NULL,
      locked_at DATETIME(3) NOT NULL, locked_by VARCHAR(255) NOT NULL) ENGINE=InnoDB`);
    return {
      async acquire(name, lockedBy) {
        const [inserted] = (await driver.raw(
          `INSERT IGNORE INTO bench_shedlock (name, lock_until, locked_at, locked_by)
           VALUES (?, UTC_TIMESTAMP(3) + INTERVAL 60 SECOND, UTC_TIMESTAMP(3), ?)`,
          [name, lockedBy],
        )) as [{ affectedRows: number }];
        if (inserted.affectedRows === 1) return true;
        const [updated] = (await driver.raw(
          `UPDATE bench_shedlock SET lock_until = UTC_TIMESTAMP(3) + INTERVAL 60 SECOND, locked_at = UTC_TIMESTAMP(3), locked_by = ?
           WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3)`,
          [lockedBy, name],
        )) as [{ affectedRows: number }];
        return updated.affectedRows === 1;
      },
      async release(name, lockedBy) {
        await driver.raw(`UPDATE bench_shedlock SET lock_until = GREATEST(UTC_TIMESTAMP(3), locked_at) WHERE name = ? AND locked_by = ?`, [
          name,
          lockedBy,
        ]);
      },
    };
  }
  const now = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;
  await driver.raw(`CREATE TABLE IF NOT EXISTS bench_shedlock (name text PRIMARY KEY, lock_until text NOT NULL, locked_at text NOT NULL,
    locked_by text NOT NULL)`);
  return {
    async acquire(name, lockedBy) {
      try {
        await driver.raw(
          `INSERT INTO bench_shedlock (name, lock_until, locked_at, locked_by)
          VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+60 seconds'), ${now}, ?)`,
          [name, lockedBy],
        );
        return true;
      } catch {
        const updated = (await driver.raw(
          `UPDATE bench_shedlock SET lock_until = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+60 seconds'), locked_at = ${now}, locked_by = ?
           WHERE name = ? AND lock_until <= ${now}`,
          [lockedBy, name],
        )) as { changes: number };
        return updated.changes === 1;
      }
    },
    async release(name, lockedBy) {
      await driver.raw(`UPDATE bench_shedlock SET lock_until = max(${now}, locked_at) WHERE name = ? AND locked_by = ?`, [name, lockedBy]);
    },
  };
}
