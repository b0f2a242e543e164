import { sql, type Kysely } from 'kysely';
import type { Dialect, GuardContext, TableNames } from '../core/dialect.js';
import { quotedTable } from '../dialects/common/quote.js';
import { toDate } from './run-record.js';
import { GuardError } from '../core/errors.js';
import { packageVersionOrUnknown, readSchemaVersions, type SchemaVersions } from './versions.js';

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

/** How often a running guard rewrites its replica row (and checks the schema version again). */
export const REPLICA_REFRESH_MS = 3_600_000;
/** After a failed write (database down, permissions), when to try again. */
const RETRY_AFTER_FAILURE_MS = 60_000;

/**
 * Records which cronguard version this guard runs, in `<prefix>replicas` under its `lockedBy`, so
 * that `locks`, `doctor` and `versions` can say which replica runs which version during a rolling
 * deploy: the holder of a lock. `noteActivity()` is called at each lock taken (never at a skip: a
 * losing acquire writes nothing); it writes on its first call and then about once an hour, in the
 * background, beside the job (never delaying it), never adding to a lock statement.
 *
 * On the first call it also reads the schema version: tables older than this code needs (nobody
 * ran `cronguard migrate` yet) are said once, as a warning with the GuardError code
 * `SCHEMA_OUTDATED`; the jobs run on (their tables are 0.1.0's), only the record is left out, and
 * checked again at the next refresh.
 */
export class ReplicaPresence {
  readonly #context: GuardContext;
  readonly #table: ReplicaTable;
  /** performance.now() before which there is nothing to do. */
  #dueAt = Number.NEGATIVE_INFINITY;
  #writing = false;
  #written = false;
  #toldOutdated = false;

  constructor(context: GuardContext) {
    this.#context = context;
    this.#table = createReplicaTable(context.db, context.dialect, context.tables);
  }

  noteActivity(): void {
    if (this.#writing || performance.now() < this.#dueAt) return;
    this.#writing = true;
    void this.#write()
      .then((nextInMs) => (this.#dueAt = performance.now() + nextInMs))
      .finally(() => (this.#writing = false));
  }

  /** Returns when to write next. Never rejects: a failure of this bookkeeping is no failure of the guard's. */
  async #write(): Promise<number> {
    const { db, dialect, tables, lockedBy, logger } = this.#context;
    try {
      const { database, code } = await readSchemaVersions(db, dialect, tables);
      if (database < code) {
        if (!this.#toldOutdated) {
          this.#toldOutdated = true;
          const error = new GuardError(
            'SCHEMA_OUTDATED',
            `The cronguard tables are at schema version ${database}; cronguard ${packageVersionOrUnknown()} needs ${code}. ` +
              'Jobs still run, but this replica does not record its version (`cronguard locks` shows it as "< 0.2.0"): ' +
              'run `cronguard migrate` or `await guard.migrate()`',
          );
          logger.warn(`${error.code}: ${error.message}`);
        }
        return REPLICA_REFRESH_MS;
      }
      await this.#table.write(lockedBy, packageVersionOrUnknown(), !this.#written);
      this.#written = true;
      await this.#table.forget(new Date(Date.now() - REPLICA_FORGOTTEN_AFTER_MS));
      return REPLICA_REFRESH_MS;
    } catch {
      // The acquires report an unreachable database; this only tries again later, quietly.
      return RETRY_AFTER_FAILURE_MS;
    }
  }
}

/** What `guard.versions()` and `cronguard versions` report: who runs what, against which schema. */
export interface VersionReport {
  /** The cronguard version of the code asking. */
  readonly package: string;
  readonly schema: SchemaVersions;
  /** Every replica that recorded its version (0.2.0 and later), most recently seen first. */
  readonly replicas: readonly ReplicaRecord[];
  /** The holder of each held lock, with its version (null: it recorded none, see `holderVersion`). */
  readonly holders: readonly { readonly job: string; readonly lockedBy: string; readonly version: string | null }[];
}

/**
 * The cronguard version the replica `lockedBy` recorded; null when it recorded none: a replica of a
 * version before 0.2.0 (which has no replica table), or one whose tables were not migrated yet.
 */
export function holderVersion(lockedBy: string, replicas: readonly ReplicaRecord[]): string | null {
  return replicas.find((replica) => replica.lockedBy === lockedBy)?.version ?? null;
}
