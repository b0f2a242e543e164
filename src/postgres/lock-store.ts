import { CompiledQuery, type Kysely } from 'kysely';
import { quotedTable } from '../database/quote.js';
import type { LockStore, TableNames } from '../guard/dialect.js';
import type { ResolvedJob } from '../guard/job-options.js';

/** The PostgreSQL lock statements, built once per guard. */
export function createPostgresLockStore(db: Kysely<unknown>, tables: TableNames): LockStore {
  const locks = quotedTable(tables, 'locks', '"');

  // Acquire: a conditional UPDATE, then an INSERT … ON CONFLICT DO NOTHING that runs only when the
  // UPDATE took nothing. Not `INSERT … ON CONFLICT DO UPDATE … WHERE`: that form locks the
  // conflicting row even when its WHERE is false, so every losing replica writes WAL and waits for
  // a flush (561 µs against 76 µs here). A loser of this form takes no row lock and writes nothing.
  // Races: a concurrent UPDATE re-checks `lock_until <= now()` on the row it waited for, and a
  // concurrent INSERT waits on the other's key and then does nothing. now() is the statement's
  // start in autocommit: the database's clock, never a replica's.
  const acquireSql = `WITH taken AS (
  UPDATE ${locks}
     SET lock_until = now() + $2::double precision * interval '1 millisecond',
         locked_at = now(), locked_by = $3, token = $4
   WHERE name = $1 AND lock_until <= now()
  RETURNING 1
), inserted AS (
  INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token)
  SELECT $1, now() + $2::double precision * interval '1 millisecond', now(), $3, $4
   WHERE NOT EXISTS (SELECT 1 FROM taken)
  ON CONFLICT (name) DO NOTHING
  RETURNING 1
)
SELECT 1 FROM taken UNION ALL SELECT 1 FROM inserted`;

  // Release: matched by the execution's token, never by locked_by (two processes on one host
  // share a host name). Keeps the lock until locked_at + lockAtLeastFor; clearing the token makes
  // a second release match nothing.
  const releaseSql = `UPDATE ${locks}
   SET lock_until = GREATEST(now(), locked_at + $2::double precision * interval '1 millisecond'), token = NULL
 WHERE name = $1 AND token = $3`;

  return {
    async acquire(job: ResolvedJob, token: string, lockedBy: string): Promise<boolean> {
      const result = await db.executeQuery(
        CompiledQuery.raw(acquireSql, [job.name, job.lockAtMostForMs, lockedBy, token]),
      );
      return result.rows.length === 1;
    },
    async release(job: ResolvedJob, token: string): Promise<boolean> {
      const result = await db.executeQuery(CompiledQuery.raw(releaseSql, [job.name, job.lockAtLeastForMs, token]));
      return result.numAffectedRows === 1n;
    },
  };
}
