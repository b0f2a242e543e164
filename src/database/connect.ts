import { MysqlAdapter, PostgresAdapter, SqliteAdapter, type Kysely } from 'kysely';
import { describeValue } from '../guard/describe-value.js';
import type { Dialect } from '../guard/dialect.js';
import type { Logger } from '../guard/logger.js';
import { adoptMysqlPool, isMysqlPool, type MysqlPoolLike } from '../mysql/connection.js';
import { mysqlDialect } from '../mysql/dialect.js';
import { adoptPostgresPool, isPostgresPool, type PostgresPoolLike } from '../postgres/connection.js';
import { postgresDialect } from '../postgres/dialect.js';
import { adoptSqliteDatabase, isSqliteDatabase, type SqliteDatabaseLike } from '../sqlite/connection.js';
import { sqliteDialect } from '../sqlite/dialect.js';

/** Structural type of a `Kysely` instance on PostgreSQL, MySQL or SQLite. */
export interface KyselyLike {
  getExecutor(): { readonly adapter: object };
  readonly isTransaction: boolean;
}

/**
 * Where the lock rows live: a URL (`postgres://`, `postgresql://`, `mysql://`, `sqlite:<path>`,
 * `sqlite::memory:`), a Kysely instance, a node-postgres `Pool`, a mysql2 pool (callback or
 * promise), or a better-sqlite3 `Database`. What you pass in stays yours: `close()` does not end it.
 */
export type DatabaseInput = string | KyselyLike | PostgresPoolLike | MysqlPoolLike | SqliteDatabaseLike;

export const DEFAULT_DATABASE = 'sqlite:./cronguard.sqlite';

export interface OpenedDatabase {
  readonly db: Kysely<unknown>;
  readonly dialect: Dialect;
  /** Whether the guard opened it, and so ends it on close. */
  readonly owned: boolean;
}

/** Opens or adopts the database of a guard; a `TypeError` for anything it cannot use. */
export function openDatabase(input: DatabaseInput, logger: Logger): OpenedDatabase {
  if (typeof input === 'string') {
    const dialect = dialectOfUrl(input);
    return { db: dialect.open(input, logger), dialect, owned: true };
  }
  if (typeof input === 'object' && input !== null) {
    if (isKysely(input)) return { db: input as unknown as Kysely<unknown>, dialect: dialectOfKysely(input), owned: false };
    if (isPostgresPool(input)) return { db: adoptPostgresPool(input), dialect: postgresDialect, owned: false };
    if (isMysqlPool(input)) return { db: adoptMysqlPool(input), dialect: mysqlDialect, owned: false };
    if (isSqliteDatabase(input)) return { db: adoptSqliteDatabase(input), dialect: sqliteDialect, owned: false };
  }
  throw new TypeError(
    'Expected `database` to be a URL (postgres://, mysql://, sqlite:<path>), a Kysely instance, a pg Pool, ' +
      `a mysql2 pool or a better-sqlite3 Database, got ${describeValue(input)}`,
  );
}

/** The dialect a URL names, or a `TypeError`. */
export function dialectOfUrl(url: string): Dialect {
  if (/^postgres(ql)?:\/\//i.test(url)) return postgresDialect;
  if (/^mysql:\/\//i.test(url)) return mysqlDialect;
  if (/^sqlite:./i.test(url)) return sqliteDialect;
  throw new TypeError(
    `Expected \`database\` to be a URL starting with postgres://, postgresql://, mysql:// or sqlite:, got ${describeValue(url)}`,
  );
}

function isKysely(value: object): value is KyselyLike {
  return typeof (value as { getExecutor?: unknown }).getExecutor === 'function' && 'isTransaction' in value;
}

function dialectOfKysely(db: KyselyLike): Dialect {
  if (db.isTransaction) {
    // The lock statements must commit on their own; inside the caller's transaction they would
    // read the transaction's start time and abort it on failure.
    throw new TypeError('Expected `database` to be a Kysely instance, got a Kysely transaction');
  }
  const adapter = db.getExecutor().adapter;
  // instanceof fails when the app has its own copy of kysely; the class name does not.
  const className = adapter.constructor.name;
  if (adapter instanceof PostgresAdapter || className === 'PostgresAdapter') return postgresDialect;
  if (adapter instanceof MysqlAdapter || className === 'MysqlAdapter') return mysqlDialect;
  if (adapter instanceof SqliteAdapter || className === 'SqliteAdapter') return sqliteDialect;
  throw new TypeError(`Expected \`database\` to be a Kysely instance on PostgreSQL, MySQL or SQLite, got one using ${className}`);
}
