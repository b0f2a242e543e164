import type Database from 'better-sqlite3';
import { Kysely, SqliteDialect, SqliteIntrospector, type SqliteDatabase } from 'kysely';
import type { DialectHandles } from '../../core/dialect.js';
import { introspectorIs } from '../common/kysely-dialect.js';
import { isSqliteDatabase } from './database-input.js';
import type { LazySqliteDatabase } from './statement-runner.js';

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
