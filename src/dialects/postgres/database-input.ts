/**
 * Structural type of a node-postgres `Pool`, as the public `database` option accepts it, so that
 * the public API does not need `@types/pg`.
 */
export interface PostgresPoolLike {
  connect(): Promise<unknown>;
  query(text: string, values?: unknown[]): Promise<unknown>;
  end(): Promise<void>;
  readonly totalCount: number;
  readonly idleCount: number;
}

/** A node-postgres pool, by its shape (the app's pg may be another copy than any the guard could load). */
export function isPostgresPool(value: object): value is PostgresPoolLike {
  return 'totalCount' in value && 'idleCount' in value && typeof (value as { connect?: unknown }).connect === 'function';
}
