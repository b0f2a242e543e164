import type { Kysely } from 'kysely';
import type { ResolvedJob } from './job-options.js';
import type { Logger } from './logger.js';

export type DialectName = 'postgres' | 'mysql' | 'sqlite';

/** The tables of one guard, from its `tablePrefix`. Names are validated identifiers, unquoted. */
export interface TableNames {
  /** PostgreSQL schema from a `schema.prefix` table prefix. */
  readonly schema: string | undefined;
  readonly locks: string;
  readonly migrations: string;
  readonly migrationLock: string;
}

/**
 * The lock statements of one dialect. Each method is one round trip in the steady state, on the
 * guard's own pooled connection in autocommit (never inside a caller's transaction), comparing
 * times on the database's clock.
 */
export interface LockStore {
  /** Takes the job's lock when it is absent or expired; true when this execution now holds it. */
  acquire(job: ResolvedJob, token: string, lockedBy: string): Promise<boolean>;
  /**
   * Gives the lock up, keeping it until `locked_at + lockAtLeastFor`. Matches by token only; false
   * when no row matched, meaning the lock expired and someone else took it.
   */
  release(job: ResolvedJob, token: string): Promise<boolean>;
}

/** Column types the migrations use; the plain SQL files under migrations/sql spell the same. */
export interface ColumnTypes {
  readonly jobName: string;
  readonly timestamp: string;
  readonly lockedBy: string;
  readonly token: string;
}

/** Everything dialect-specific, one implementation per folder (src/postgres, src/mysql, src/sqlite). */
export interface Dialect {
  readonly name: DialectName;
  readonly columnTypes: ColumnTypes;
  /** Whether `tablePrefix` may name a schema (`schema.prefix`). */
  readonly supportsSchemas: boolean;
  /** Appended to CREATE TABLE (engine, character set, WITHOUT ROWID), or empty. */
  readonly createTableSuffix: string;
  createLockStore(db: Kysely<unknown>, tables: TableNames): LockStore;
  /** True for the driver's "no such table" error, so that the message can say to migrate. */
  isMissingTable(error: unknown): boolean;
  /** Opens a pool the guard owns (and ends on close) from a URL. */
  open(url: string, logger: Logger): Kysely<unknown>;
}
