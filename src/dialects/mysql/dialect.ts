import type * as mysql2 from 'mysql2';
import { MysqlIntrospector, sql } from 'kysely';
import type { DialectHandles, ReadSql, Dialect } from '../../core/dialect.js';
import { introspectorIs } from '../common/kysely.js';
import { adoptMysqlKysely, adoptMysqlPool, openMysql } from './connection.js';
import { mysqlTime } from './statements.js';
import { createMysqlLockStore } from './lock-store.js';
import {
  mysqlMigrationLease,
  createMysqlTakeProcedure,
  mysqlFindTables,
  mysqlIndexExists,
  mysqlColumnTypes,
  mysqlCreateTableSuffix,
} from './schema.js';
import { isMysqlLockWaitTimeout, isMysqlMigrationRace, isMysqlMissingTable, isMysqlReadOnly } from './driver-errors.js';
import { inspectMysqlServer } from './server-facts.js';
import type { MysqlPoolLike } from '../common/driver-shapes.js';

/** A callback pool has `config`; a promise pool wraps one as `pool`. */
export function isMysqlPool(value: object): value is MysqlPoolLike {
  return isCallbackPool(value) || (hasGetConnection(value) && isCallbackPool((value as { pool?: unknown }).pool));
}

/** A mysql2 callback pool, by its shape (not a pg pool, which also has getConnection-like members). */
export function isCallbackPool(value: unknown): boolean {
  return hasGetConnection(value) && typeof (value as { config?: unknown }).config === 'object' && !('totalCount' in (value as object));
}

function hasGetConnection(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { getConnection?: unknown }).getConnection === 'function';
}

/**
 * `mysql://` and `mariadb://` URLs (MariaDB speaks MySQL's protocol; mysql2 reads the URL's parts
 * whatever its scheme), a mysql2 pool (callback or promise), a Kysely instance on MySQL.
 */
export const mysqlHandles: DialectHandles<mysql2.Pool> = {
  ownsUrl: (url) => /^(mysql|mariadb):\/\//i.test(url),
  serverUrl: true,
  nativeOf(value) {
    if (!isMysqlPool(value)) return undefined;
    // A promise pool is unwrapped to the callback pool it wraps, which the guard's connections use.
    const inner = (value as { pool?: unknown }).pool;
    return (isCallbackPool(inner) ? inner : value) as mysql2.Pool;
  },
  adopt: adoptMysqlPool,
  ownsKysely: (db) => introspectorIs(db, MysqlIntrospector),
  adoptKysely: adoptMysqlKysely,
  describeWrongHandle(value) {
    const handle = value as Record<string, unknown>;
    // mysql2/promise wraps a callback connection as `connection` (and mirrors its `config`).
    if (isMysqlConnection(handle.connection)) return 'a mysql2 promise Connection; pass a mysql2 pool (createPool)';
    if (isMysqlConnection(handle)) return 'a mysql2 Connection; pass a mysql2 pool (createPool)';
    const className = (value.constructor as { name?: unknown } | undefined)?.name;
    if (className === 'PoolCluster' || className === 'PromisePoolCluster') return 'a mysql2 PoolCluster; pass one mysql2 pool';
    return undefined;
  },
};

/** A mysql2 callback connection: its `config`, and statements sent on it directly. */
function isMysqlConnection(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const connection = value as Record<string, unknown>;
  return (
    typeof connection.config === 'object' && typeof connection.execute === 'function' && typeof connection.getConnection !== 'function'
  );
}

/**
 * DATETIME has no zone and mysql2 reads it in the connection's `timezone` (local by default on a
 * user's pool), so times are read as ISO text in UTC, and compared against UTC text. Names are
 * bytes (VARBINARY) and read back as utf8mb4 text.
 */
export const mysqlReads: ReadSql = {
  now: 'UTC_TIMESTAMP(3)',
  time: (column) => `DATE_FORMAT(${column}, '%Y-%m-%dT%H:%i:%s.%fZ')`,
  name: (column) => `CONVERT(${column} USING utf8mb4)`,
  millisecondsUntil: (column) => `(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(3), ${column}) DIV 1000)`,
  timeParameter: mysqlTime,
  // Whole microseconds: INTERVAL takes an integer count of its unit.
  nowMinus: (milliseconds) => sql`DATE_SUB(UTC_TIMESTAMP(3), INTERVAL ${Math.round(milliseconds * 1_000)} MICROSECOND)`,
};

export const mysqlDialect: Dialect<mysql2.Pool> = {
  name: 'mysql',
  quote: '`',
  columnTypes: mysqlColumnTypes,
  supportsSchemas: false,
  indexExists: mysqlIndexExists,
  findTables: mysqlFindTables,
  createTableSuffix: mysqlCreateTableSuffix,
  createRoutines: createMysqlTakeProcedure,
  reads: mysqlReads,
  createLockStore: createMysqlLockStore,
  isMissingTable: isMysqlMissingTable,
  isLockWaitTimeout: isMysqlLockWaitTimeout,
  isMigrationRace: isMysqlMigrationRace,
  migrationLease: mysqlMigrationLease,
  inspectServer: (db) => inspectMysqlServer(db),
  isReadOnly: isMysqlReadOnly,
  // A replica and a server set read-only look alike from a session: both have read_only on.
  readOnlyKind: () => Promise.resolve('server'),
  handles: mysqlHandles,
  open: openMysql,
};
