import { sql, type Kysely } from 'kysely';
import type { Dialect, TableNames } from '../core/dialect.js';
import { quotedTable } from '../dialects/common/quote.js';
import { toDate } from './run-record.js';

/** One row of `<prefix>replicas`: which cronguard version a replica (its `lockedBy`) runs. */
export interface ReplicaRecord {
  readonly lockedBy: string;
  /** The cronguard version of that replica's guard, as it wrote it. */
  readonly version: string;
  /** When its guard first wrote the row (its first run), on the database's clock. */
  readonly startedAt: Date;
  /** When it last wrote it: a guard rewrites its row about once an hour while it runs jobs. */
  readonly seenAt: Date;
}

/** A replica not seen for this long is gone: its row is deleted at another replica's next write. */
export const REPLICA_FORGOTTEN_AFTER_MS = 7 * 24 * 3_600_000;

interface ReplicaRow {
  locked_by: string;
  version: string;
  started_at: Date | string;
  seen_at: Date | string;
}

/** Writes and reads `<prefix>replicas`. Never on a run's path: a guard writes after its runs, rarely. */
export function createReplicaTable(db: Kysely<unknown>, dialect: Dialect, tables: TableNames) {
  const replicas = sql.raw(quotedTable(tables, 'replicas', dialect.quote));
  const reads = dialect.reads;
  const now = sql.raw(reads.now);
  const columns = sql.raw(
    ['locked_by', 'version', `${reads.time('started_at')} AS started_at`, `${reads.time('seen_at')} AS seen_at`].join(', '),
  );
  return {
    /**
     * Writes the replica's row on the database's clock; `starting` resets `started_at`. An UPDATE,
     * then an INSERT when no row matched: the same two statements on every dialect (no upsert
     * syntax to keep in three forms), and a lost race between two guards of one `lockedBy`
     * (the INSERT fails on the key) ends in the UPDATE again.
     */
    async write(lockedBy: string, version: string, starting: boolean): Promise<void> {
      const update = () =>
        starting
          ? sql`UPDATE ${replicas} SET version = ${version}, started_at = ${now}, seen_at = ${now} WHERE locked_by = ${lockedBy}`.execute(
              db,
            )
          : sql`UPDATE ${replicas} SET version = ${version}, seen_at = ${now} WHERE locked_by = ${lockedBy}`.execute(db);
      if ((await update()).numAffectedRows !== 0n) return;
      try {
        await sql`INSERT INTO ${replicas} (locked_by, version, started_at, seen_at) VALUES (${lockedBy}, ${version}, ${now}, ${now})`.execute(
          db,
        );
      } catch (error) {
        if ((await update()).numAffectedRows === 0n) throw error;
      }
    },
    /** Deletes the rows of replicas not seen since `before` (a time from the app's clock, days back). */
    async forget(before: Date): Promise<void> {
      await sql`DELETE FROM ${replicas} WHERE seen_at < ${reads.timeParameter(before)}`.execute(db);
    },
    /** Every replica's row, newest first; none when the table does not exist yet (schema before 3). */
    async list(): Promise<ReplicaRecord[]> {
      try {
        const { rows } = await sql<ReplicaRow>`SELECT ${columns} FROM ${replicas} ORDER BY seen_at DESC, locked_by`.execute(db);
        return rows.map((row) => ({
          lockedBy: row.locked_by,
          version: row.version,
          startedAt: toDate(row.started_at),
          seenAt: toDate(row.seen_at),
        }));
      } catch (error) {
        if (dialect.isMissingTable(error)) return [];
        throw error;
      }
    },
  };
}

export type ReplicaTable = ReturnType<typeof createReplicaTable>;
