/**
 * The public shapes of the drivers' handles that the `database` option accepts (a node-postgres
 * `Pool`, a mysql2 pool, a better-sqlite3 `Database`), in a file of their own: the published
 * `.d.ts` of the package's entry reaches these without reaching any dialect's code, whose
 * declarations name the drivers' own types (an app without `@types/pg` or mysql2 compiles).
 */

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

/**
 * Structural type of a mysql2 pool, callback (`mysql2.createPool`) or promise
 * (`mysql2/promise`), as the public `database` option accepts it, so that the public API does not
 * depend on mysql2's types.
 */
export interface MysqlPoolLike {
  getConnection(...args: never[]): unknown;
  end(...args: never[]): unknown;
}

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
