import type { Dialect, TableNames } from '../src/core/dialect.js';

/** What a migration needs to know: the guard's table names and its dialect's column types. */
export interface MigrationContext {
  readonly tables: TableNames;
  readonly dialect: Dialect;
}
