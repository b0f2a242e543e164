import { Kysely, MysqlDialect, type MysqlPool } from 'kysely';
import type * as mysql2 from 'mysql2';
import { loadDriver } from '../common/load-driver.js';
import type { OpenSettings } from '../../core/dialect.js';

/**
 * Structural type of a mysql2 pool, callback (`mysql2.createPool`) or promise
 * (`mysql2/promise`), so that the public API does not depend on mysql2's types.
 */
export interface MysqlPoolLike {
  getConnection(...args: never[]): unknown;
  end(...args: never[]): unknown;
}

/** A callback pool has `config`; a promise pool wraps one as `pool`. */
export function isMysqlPool(value: object): value is MysqlPoolLike {
  return isCallbackPool(value) || (hasGetConnection(value) && isCallbackPool((value as { pool?: unknown }).pool));
}

function hasGetConnection(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { getConnection?: unknown }).getConnection === 'function';
}

function isCallbackPool(value: unknown): boolean {
  return hasGetConnection(value) && typeof (value as { config?: unknown }).config === 'object' && !('totalCount' in (value as object));
}

/** A pool the guard owns, from a `mysql://` URL. */
export function openMysql(url: string, { logger }: OpenSettings): { db: Kysely<unknown>; native: unknown } {
  const { createPool } = loadDriver('mysql2', 'a mysql:// database') as typeof mysql2;
  const pool = createPool({
    uri: url,
    connectionLimit: 10,
    // A down database must fail an acquire quickly (the run is skipped), not hang the tick.
    connectTimeout: 5_000,
    // DATETIME columns hold UTC; read them as UTC, never in the process's zone.
    timezone: 'Z',
    charset: 'utf8mb4',
  });
  pool.on('connection', (connection) => {
    connection.on('error', (error: Error) => logger.error(`MySQL connection error: ${error.message}`));
  });
  return { db: new Kysely<unknown>({ dialect: new MysqlDialect({ pool: pool as unknown as MysqlPool }) }), native: pool };
}

/** Wraps the user's pool; the guard never ends it. A promise pool is unwrapped to its callback pool. */
export function adoptMysqlPool(pool: MysqlPoolLike): Kysely<unknown> {
  const inner = (pool as { pool?: unknown }).pool;
  const callbackPool = isCallbackPool(inner) ? inner : pool;
  return new Kysely<unknown>({ dialect: new MysqlDialect({ pool: callbackPool as unknown as MysqlPool }) });
}
