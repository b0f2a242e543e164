/**
 * Structural type of a mysql2 pool, callback (`mysql2.createPool`) or promise
 * (`mysql2/promise`), as the public `database` option accepts it, so that the public API does not
 * depend on mysql2's types.
 */
export interface MysqlPoolLike {
  getConnection(...args: never[]): unknown;
  end(...args: never[]): unknown;
}

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
