import { MysqlAdapter, PostgresAdapter, SqliteAdapter, type Kysely } from 'kysely';
import { describeValue } from '../core/describe-value.js';
import { describeWrongDatabase } from './handle-kinds.js';
import type { Dialect, OpenSettings } from '../core/dialect.js';
import { adoptMysqlKysely, adoptMysqlPool, isMysqlPool, type MysqlPoolLike } from './mysql/connection.js';
import { mysqlDialect } from './mysql/dialect.js';
import { adoptPostgresPool, isPostgresPool, type PostgresPoolLike } from './postgres/connection.js';
import { postgresDialect } from './postgres/dialect.js';
import { adoptSqliteDatabase, isSqliteDatabase, type SqliteDatabaseLike } from './sqlite/connection.js';
import { sqliteDialect } from './sqlite/dialect.js';

/** Structural type of a `Kysely` instance on PostgreSQL, MySQL or SQLite. */
export interface KyselyLike {
  getExecutor(): { readonly adapter: object };
  readonly isTransaction: boolean;
}

/**
 * Where the lock rows live: a URL (`postgres://`, `postgresql://`, `mysql://`, `mariadb://`,
 * `sqlite:<path>`, `sqlite::memory:`), a Kysely instance, a node-postgres `Pool`, a mysql2 pool (callback or
 * promise), or a better-sqlite3 `Database`. What you pass in stays yours: `close()` does not end it.
 */
export type DatabaseInput = string | KyselyLike | PostgresPoolLike | MysqlPoolLike | SqliteDatabaseLike;

export interface OpenedDatabase {
  readonly db: Kysely<unknown>;
  readonly dialect: Dialect;
  /** The driver's own pool or database under `db`, when known (not for a Kysely passed in). */
  readonly native: unknown;
  /** Ends the pool or file the guard opened; nothing for a handle passed in. */
  close(): Promise<void>;
}

/**
 * `database` is required: a missing URL must never fall back on a local file, which would give each
 * replica its own lock table, so that every replica runs every job.
 */
export function missingDatabase(): TypeError {
  return new TypeError(
    'Expected `database` to be a URL or a database handle, got undefined: it is required ' +
      '(`process.env.DATABASE_URL` is undefined when the variable is not set: is it set?)',
  );
}

/** The dialect of a `database` option, without connecting; a `TypeError` for anything unusable. */
export function dialectOf(input: DatabaseInput | undefined): Dialect {
  if (input === undefined) throw missingDatabase();
  if (typeof input === 'string') return dialectOfUrl(input);
  if (typeof input === 'object' && input !== null) {
    if (isKysely(input)) return dialectOfKysely(input);
    if (isPostgresPool(input)) return postgresDialect;
    if (isMysqlPool(input)) return mysqlDialect;
    if (isSqliteDatabase(input)) return sqliteDialect;
  }
  throw new TypeError(
    'Expected `database` to be a URL (postgres://, mysql://, mariadb://, sqlite:<path>), a Kysely instance, a pg Pool, ' +
      `a mysql2 pool or a better-sqlite3 Database, got ${describeWrongDatabase(input)}`,
  );
}

/**
 * Opens a pool the guard owns from a URL (lazily: nothing connects before the first statement), or
 * wraps the handle the user passed in. `dialect` is `dialectOf(input)`.
 */
export function openDatabase(input: DatabaseInput, dialect: Dialect, settings: OpenSettings): OpenedDatabase {
  if (typeof input === 'string') {
    const { db, native, close } = dialect.open(input, settings);
    return { db, native, dialect, close: close ?? (() => db.destroy()) };
  }
  const yours = { dialect, close: () => Promise.resolve() };
  if (isKysely(input)) {
    const db = input as unknown as Kysely<unknown>;
    // MySQL: the guard's strings go through the user's driver as bytes, never as quoted text.
    return { ...yours, db: dialect.name === 'mysql' ? adoptMysqlKysely(db) : db, native: undefined };
  }
  if (isPostgresPool(input)) return { ...yours, db: adoptPostgresPool(input), native: input };
  if (isMysqlPool(input)) return { ...yours, db: adoptMysqlPool(input), native: input };
  return { ...yours, db: adoptSqliteDatabase(input), native: input };
}

/** The dialect a URL names, or a `TypeError`. */
export function dialectOfUrl(url: string): Dialect {
  if (/^postgres(ql)?:\/\//i.test(url)) return checkedServerUrl(url, postgresDialect);
  // MariaDB speaks MySQL's protocol; mysql2 reads the URL's parts whatever its scheme.
  if (/^(mysql|mariadb):\/\//i.test(url)) return checkedServerUrl(url, mysqlDialect);
  if (/^sqlite:./i.test(url)) return sqliteDialect;
  throw new TypeError(
    `Expected \`database\` to be a URL starting with postgres://, postgresql://, mysql://, mariadb:// or sqlite:, ` +
      `got ${describeValue(withoutPassword(url))}` +
      (url.trim() === '' ? ' (an environment variable set to an empty string?)' : ''),
  );
}

/**
 * A server URL the drivers will read as it was meant, or a `TypeError`. An unescaped `/`, `?` or
 * `#` in a password changes where the URL's parts end: `postgres://u:p@ss#x@host/db` parses, but
 * as host `ss` (`#` starts a fragment), so the guard would connect elsewhere or fail later with
 * a confusing error. A bad `%` escape makes mysql2 throw at the first statement. The message never
 * shows the password.
 */
function checkedServerUrl(url: string, dialect: Dialect): Dialect {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
    decodeURIComponent(parsed.username);
    decodeURIComponent(parsed.password);
  } catch {
    parsed = undefined;
  }
  // No database URL has a fragment: a `#` can only be a password's character, unescaped.
  if (parsed === undefined || url.includes('#')) {
    throw new TypeError(
      `Expected \`database\` to be a URL that can be parsed, got ${describeValue(withoutPassword(url))}: ` +
        'percent-encode the user name and password (encodeURIComponent; @ is %40, # is %23, / is %2F, ? is %3F, % is %25)',
    );
  }
  return dialect;
}

/**
 * The URL with its password, if any, masked: error messages end up in logs. Up to the last `@`,
 * since a password may hold `@` or `/`, and wherever `//user:` appears (`jdbc:postgresql://…`).
 * A user name that holds `@` before its `:` masks the whole user info.
 */
function withoutPassword(url: string): string {
  const masked = url.replace(/(\/\/[^/@:]*:).*@/, '$1***@');
  if (masked !== url) return masked;
  const start = url.indexOf('//');
  const at = url.lastIndexOf('@');
  return start >= 0 && at > start && url.slice(start + 2, at).includes(':') ? `${url.slice(0, start + 2)}***${url.slice(at)}` : url;
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
