import { CompiledQuery, type Kysely } from 'kysely';
import { quotedTable } from '../database/quote.js';
import type { LockStore, TableNames } from '../guard/dialect.js';
import type { ResolvedJob } from '../guard/job-options.js';

/** UTC with milliseconds and a fixed width, so that text order is time order. */
const NOW = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`;

/** A SQLite date modifier adding a duration: '+1.5 seconds'. */
function plusSeconds(ms: number): string {
  return `+${ms / 1_000} seconds`;
}

/** The SQLite lock statements, built once per guard. */
export function createSqliteLockStore(db: Kysely<unknown>, tables: TableNames): LockStore {
  const locks = quotedTable(tables, 'locks', '"');

  // Acquire: one upsert whose update applies only when the lock has expired. SQLite serialises
  // writers (the busy timeout makes a second process wait), so the check and the write are one
  // atomic step. 'now' is fixed for the statement and is the host's clock, which every process on
  // this host shares. RETURNING yields a row only for the winner.
  const acquireSql = `INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token)
VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?), ${NOW}, ?, ?)
ON CONFLICT (name) DO UPDATE
   SET lock_until = excluded.lock_until, locked_at = excluded.locked_at,
       locked_by = excluded.locked_by, token = excluded.token
 WHERE lock_until <= excluded.locked_at
RETURNING 1`;

  // Release: matched by token only; keeps the lock until locked_at + lockAtLeastFor; clearing the
  // token makes a second release match nothing.
  const releaseSql = `UPDATE ${locks}
   SET lock_until = max(${NOW}, strftime('%Y-%m-%dT%H:%M:%fZ', locked_at, ?)), token = NULL
 WHERE name = ? AND token = ?`;

  return {
    async acquire(job: ResolvedJob, token: string, lockedBy: string): Promise<boolean> {
      const result = await db.executeQuery(
        CompiledQuery.raw(acquireSql, [job.name, plusSeconds(job.lockAtMostForMs), lockedBy, token]),
      );
      return result.rows.length === 1;
    },
    async release(job: ResolvedJob, token: string): Promise<boolean> {
      const result = await db.executeQuery(
        CompiledQuery.raw(releaseSql, [plusSeconds(job.lockAtLeastForMs), job.name, token]),
      );
      return result.numAffectedRows === 1n;
    },
  };
}
