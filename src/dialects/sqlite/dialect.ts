import type Database from 'better-sqlite3';
import { Kysely, SqliteDialect, SqliteIntrospector, sql, type SqliteDatabase } from 'kysely';
import type { DialectHandles, ReadSql, Dialect } from '../../core/dialect.js';
import { introspectorIs } from '../common/kysely.js';
import type { LazySqliteDatabase } from './statements.js';
import { openSqlite } from './connection.js';
import { createSqliteLockStore } from './lock-store.js';
import { sqliteMigrationLease, sqliteColumnTypes, sqliteCreateTableSuffix } from './schema.js';
import { isSqliteMigrationRace, isSqliteReadOnly, isSqliteLockWaitTimeout, isSqliteMissingTable } from './driver-errors.js';
import { inspectSqliteServer } from './server-facts.js';
import type { SqliteDatabaseLike } from '../common/driver-shapes.js';

/** A better-sqlite3 database, by its shape (the app's may be another copy than any the guard could load). */
export function isSqliteDatabase(value: object): value is SqliteDatabaseLike {
  return typeof (value as { prepare?: unknown }).prepare === 'function' && 'memory' in value && 'open' in value;
}

/**
 * `sqlite:<path>` and `sqlite::memory:` URLs, a better-sqlite3 `Database`, a Kysely instance on
 * SQLite. The native handle is the `Database` behind a getter: the guard's own opens its file at
 * the first statement (connection.ts), one passed in is there already.
 */
export const sqliteHandles: DialectHandles<LazySqliteDatabase> = {
  ownsUrl: (url) => /^sqlite:./i.test(url),
  serverUrl: false,
  nativeOf(value) {
    if (!isSqliteDatabase(value)) return undefined;
    const database = value as unknown as Database.Database;
    return { get: () => database };
  },
  // Wraps the user's database; the guard never closes it.
  adopt: (native) => new Kysely<unknown>({ dialect: new SqliteDialect({ database: native.get() as unknown as SqliteDatabase }) }),
  ownsKysely: (db) => introspectorIs(db, SqliteIntrospector),
  adoptKysely: (db) => db,
  describeWrongHandle(value) {
    const className = (value.constructor as { name?: unknown } | undefined)?.name;
    return className === 'Statement' && 'database' in value ? 'a better-sqlite3 Statement; pass its Database' : undefined;
  },
};

/** Times are ISO text in UTC already; parameters use the same fixed-width form. */
export const sqliteReads: ReadSql = {
  now: `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`,
  time: (column) => column,
  name: (column) => column,
  millisecondsUntil: (column) => `CAST(round((julianday(${column}) - julianday('now')) * 86400000) AS INTEGER)`,
  timeParameter: (date) => date.toISOString(),
  // A strftime modifier ('-1.234 seconds'), bound like any value; the same ISO form as `now`.
  nowMinus: (milliseconds) => sql`strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ${`-${(milliseconds / 1_000).toFixed(3)} seconds`})`,
};

export const sqliteDialect: Dialect<LazySqliteDatabase> = {
  name: 'sqlite',
  quote: '"',
  columnTypes: sqliteColumnTypes,
  supportsSchemas: false,
  createTableSuffix: sqliteCreateTableSuffix,
  reads: sqliteReads,
  createLockStore: createSqliteLockStore,
  isMissingTable: isSqliteMissingTable,
  isLockWaitTimeout: isSqliteLockWaitTimeout,
  isMigrationRace: isSqliteMigrationRace,
  migrationLease: sqliteMigrationLease,
  inspectServer: inspectSqliteServer,
  isReadOnly: isSqliteReadOnly,
  handles: sqliteHandles,
  open: openSqlite,
};
