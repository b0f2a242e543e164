/**
 * Structural type of a better-sqlite3 `Database`, as the public `database` option accepts it, so
 * that the public API does not need its types.
 */
export interface SqliteDatabaseLike {
  prepare(source: string): unknown;
  close(): unknown;
  readonly open: boolean;
  readonly memory: boolean;
}

/** A better-sqlite3 database, by its shape (the app's may be another copy than any the guard could load). */
export function isSqliteDatabase(value: object): value is SqliteDatabaseLike {
  return typeof (value as { prepare?: unknown }).prepare === 'function' && 'memory' in value && 'open' in value;
}
