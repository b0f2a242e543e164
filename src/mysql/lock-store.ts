import { CompiledQuery, type Kysely } from 'kysely';
import { quotedTable } from '../database/quote.js';
import type { LockStore, TableNames } from '../guard/dialect.js';
import type { ResolvedJob } from '../guard/job-options.js';

/** ER_DUP_ENTRY */
const DUPLICATE_KEY = 1062;
/**
 * How long a process trusts that a job's row exists before it checks again with an INSERT. Bounds
 * how long a row deleted by hand can keep this process skipping the job.
 */
const ROW_KNOWN_FOR_MS = 5 * 60_000;

/** The MySQL/MariaDB lock statements, built once per guard. Valid on MySQL 8.0 and MariaDB 10.11. */
export function createMysqlLockStore(db: Kysely<unknown>, tables: TableNames): LockStore {
  const locks = quotedTable(tables, 'locks', '`');

  // Acquire, steady state: one UPDATE that takes the row only when it has expired. MySQL has no
  // RETURNING, and an `INSERT … ON DUPLICATE KEY UPDATE` cannot tell a loser from an insert when
  // the connection has CLIENT_FOUND_ROWS (mysql2's default): both report 1 affected row. This
  // UPDATE reports 1 only for a winner in both modes, because a winner always changes the token.
  // UTC_TIMESTAMP(3) is fixed for the statement: the database's clock, in UTC.
  const takeSql = `UPDATE ${locks}
   SET lock_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, locked_at = UTC_TIMESTAMP(3), locked_by = ?, token = ?
 WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3)`;

  // Acquire, first sight of a job: a plain INSERT, so that a concurrent creator gets a duplicate-key
  // error (a loss) while any other error (a name too long, a missing table) still surfaces.
  // Not INSERT IGNORE: it would turn those errors into warnings.
  const createSql = `INSERT INTO ${locks} (name, lock_until, locked_at, locked_by, token)
VALUES (?, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3), ?, ?)`;

  // Release: matched by token only. Clearing the token changes the row, so the affected count is 1
  // with or without CLIENT_FOUND_ROWS, and a second release matches nothing.
  const releaseSql = `UPDATE ${locks}
   SET lock_until = GREATEST(UTC_TIMESTAMP(3), locked_at + INTERVAL ? MICROSECOND), token = NULL
 WHERE name = ? AND token = ?`;

  /** Job name → when this process last saw its row exist (performance.now()). */
  const rowSeenAt = new Map<string, number>();

  return {
    async acquire(job: ResolvedJob, token: string, lockedBy: string): Promise<boolean> {
      const micros = Math.round(job.lockAtMostForMs * 1_000);
      const taken = await db.executeQuery(CompiledQuery.raw(takeSql, [micros, lockedBy, token, job.name]));
      if (taken.numAffectedRows === 1n) {
        rowSeenAt.set(job.name, performance.now());
        return true;
      }
      const seenAt = rowSeenAt.get(job.name);
      if (seenAt !== undefined && performance.now() - seenAt < ROW_KNOWN_FOR_MS) return false;
      let created: boolean;
      try {
        await db.executeQuery(CompiledQuery.raw(createSql, [job.name, micros, lockedBy, token]));
        created = true;
      } catch (error) {
        if ((error as { errno?: unknown }).errno !== DUPLICATE_KEY) throw error;
        created = false;
      }
      rowSeenAt.set(job.name, performance.now());
      return created;
    },
    async release(job: ResolvedJob, token: string): Promise<boolean> {
      const micros = Math.round(job.lockAtLeastForMs * 1_000);
      const result = await db.executeQuery(CompiledQuery.raw(releaseSql, [micros, job.name, token]));
      return result.numAffectedRows === 1n;
    },
  };
}
