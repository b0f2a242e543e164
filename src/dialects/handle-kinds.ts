import { describeValue } from '../core/describe-value.js';

/**
 * How a `database` value that is none of the accepted kinds is shown in the `TypeError`: a few
 * words naming what it is and what to pass instead, never a dump of a driver object (which holds
 * sockets, buffers and, for pg, the password).
 */
export function describeWrongDatabase(value: unknown): string {
  if (typeof value !== 'object' || value === null) return describeValue(value);
  const handle = value as Record<string, unknown>;
  // pg.Client (also a client checked out of a pool): one connection, no pool to take turns on.
  if ('connectionParameters' in handle && typeof handle.query === 'function') {
    return typeof handle.release === 'function'
      ? 'a pg client checked out of a pool; pass the pg Pool itself'
      : 'a pg Client; pass a pg Pool';
  }
  // mysql2/promise wraps a callback connection as `connection` (and mirrors its `config`).
  if (isMysqlConnection(handle.connection)) return 'a mysql2 promise Connection; pass a mysql2 pool (createPool)';
  if (isMysqlConnection(handle)) return 'a mysql2 Connection; pass a mysql2 pool (createPool)';
  const className = classNameOf(handle);
  if (className === 'PoolCluster' || className === 'PromisePoolCluster') return 'a mysql2 PoolCluster; pass one mysql2 pool';
  if (className === 'Statement' && 'database' in handle) return 'a better-sqlite3 Statement; pass its Database';
  return className === undefined ? describeValue(value) : `an instance of ${className}`;
}

/** A mysql2 callback connection: its `config`, and statements sent on it directly. */
function isMysqlConnection(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const connection = value as Record<string, unknown>;
  return typeof connection.config === 'object' && typeof connection.execute === 'function' && typeof connection.getConnection !== 'function';
}

/** The class of an object made by a constructor other than Object, else undefined. */
function classNameOf(value: object): string | undefined {
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === null || prototype === Object.prototype) return undefined;
  const name = (value.constructor as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && name !== '' ? name : undefined;
}
