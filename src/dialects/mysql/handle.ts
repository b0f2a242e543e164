import { MysqlIntrospector } from 'kysely';
import type * as mysql2 from 'mysql2';
import type { DialectHandles } from '../../core/dialect.js';
import { introspectorIs } from '../common/kysely-dialect.js';
import { adoptMysqlKysely, adoptMysqlPool } from './connection.js';
import { isCallbackPool, isMysqlPool } from './database-input.js';

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
