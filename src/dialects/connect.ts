import type { Kysely } from 'kysely';
import { describeValue } from '../core/errors.js';
import type { Dialect, OpenSettings } from '../core/dialect.js';
import { introspectorName } from './common/kysely.js';
import { mysqlDialect } from './mysql/dialect.js';
import { postgresDialect } from './postgres/dialect.js';
import { sqliteDialect } from './sqlite/dialect.js';
import type { MysqlPoolLike, PostgresPoolLike, SqliteDatabaseLike } from './common/driver-shapes.js';

/**
 * The dialects, asked in turn which one a `database` value is. Each is typed by its own driver
 * handle; held here as plain `Dialect`s, each still pairs only its own handles with its own lock
 * store (see `Dialect`).
 */
const DIALECTS: readonly Dialect[] = [postgresDialect, mysqlDialect, sqliteDialect];

/**
 * Structural type of a `Kysely` instance on PostgreSQL, MySQL or SQLite: the public members the
 * guard uses (it runs its statements with `executeQuery` and `connection()`, and asks
 * `introspection` which dialect the instance speaks).
 */
export interface KyselyLike {
  executeQuery(...args: never[]): Promise<unknown>;
  connection(): unknown;
  readonly introspection: object;
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
    const dialect = DIALECTS.find((candidate) => candidate.handles.nativeOf(input) !== undefined);
    if (dialect !== undefined) return dialect;
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
  // MySQL: the guard's strings go through the user's driver as bytes, never as quoted text.
  if (isKysely(input)) return { ...yours, db: dialect.handles.adoptKysely(input as unknown as Kysely<unknown>), native: undefined };
  const native = dialect.handles.nativeOf(input);
  if (native === undefined)
    throw new TypeError(`Expected \`database\` to be a ${dialect.name} handle, got ${describeWrongDatabase(input)}`);
  return { ...yours, db: dialect.handles.adopt(native), native };
}

/** The dialect a URL names, or a `TypeError`. */
export function dialectOfUrl(url: string): Dialect {
  const dialect = DIALECTS.find((candidate) => candidate.handles.ownsUrl(url));
  if (dialect !== undefined) return dialect.handles.serverUrl ? checkedServerUrl(url, dialect) : dialect;
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
  if (hostsOf(url).includes(',')) throw multiHostUrl(url, dialect);
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

/** The URL's host part: after `//` and any user info (up to the last `@`), before the path or query. */
function hostsOf(url: string): string {
  const start = url.indexOf('//');
  if (start === -1) return '';
  const rest = url.slice(start + 2);
  const authority = rest.split(/[/?]/, 1)[0] ?? '';
  // An `@` past the cut: a password with an unescaped `/` or `?`, which the parse check reports.
  if (!authority.includes('@') && rest.includes('@')) return '';
  return authority.slice(authority.lastIndexOf('@') + 1);
}

/**
 * A URL naming several hosts (`postgres://h1,h2/db?target_session_attrs=read-write`, as libpq and
 * JDBC take for failover): neither node-postgres nor mysql2 reads one, and the URL parser would
 * reject it with a word about percent-encoding.
 */
function multiHostUrl(url: string, dialect: Dialect): TypeError {
  const postgres = dialect.name === 'postgres';
  const driver = postgres
    ? 'the `pg` driver (node-postgres) has no multi-host URL (nor target_session_attrs)'
    : 'the `mysql2` driver has no multi-host URL';
  const proxy = postgres ? 'a proxy or PgBouncer' : 'a proxy (ProxySQL, MaxScale)';
  return new TypeError(
    `Expected \`database\` to be a URL with one host, got ${describeValue(withoutPassword(url))}: ${driver}, ` +
      'so it cannot find the primary among several servers. Give it one address that always leads to the primary: ' +
      `a DNS name or virtual IP that the failover moves, ${proxy} re-pointed at the promoted server, or a TCP load ` +
      'balancer that health-checks for the primary (docs/topologies.md)',
  );
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

/** A Kysely instance, by the public members the guard uses (the app's kysely may be another copy). */
function isKysely(value: object): value is KyselyLike {
  const kysely = value as Partial<Record<keyof KyselyLike, unknown>>;
  return (
    typeof kysely.executeQuery === 'function' &&
    typeof kysely.connection === 'function' &&
    'introspection' in value &&
    'isTransaction' in value
  );
}

function dialectOfKysely(input: KyselyLike): Dialect {
  if (input.isTransaction) {
    // The lock statements must commit on their own; inside the caller's transaction they would
    // read the transaction's start time and abort it on failure.
    throw new TypeError('Expected `database` to be a Kysely instance, got a Kysely transaction');
  }
  const db = input as unknown as Kysely<unknown>;
  const dialect = DIALECTS.find((candidate) => candidate.handles.ownsKysely(db));
  if (dialect !== undefined) return dialect;
  throw new TypeError(
    `Expected \`database\` to be a Kysely instance on PostgreSQL, MySQL or SQLite, got one using ${introspectorName(db)}`,
  );
}

/**
 * How a `database` value that is none of the accepted kinds is shown in the `TypeError`: a few
 * words naming what it is and what to pass instead (each dialect knows its driver's other
 * handles), never a dump of a driver object (which holds sockets, buffers and, for pg, the password).
 */
function describeWrongDatabase(value: unknown): string {
  if (typeof value !== 'object' || value === null) return describeValue(value);
  for (const dialect of DIALECTS) {
    const described = dialect.handles.describeWrongHandle(value);
    if (described !== undefined) return described;
  }
  const className = classNameOf(value);
  return className === undefined ? describeValue(value) : `an instance of ${className}`;
}

/** The class of an object made by a constructor other than Object, else undefined. */
function classNameOf(value: object): string | undefined {
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === null || prototype === Object.prototype) return undefined;
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}
