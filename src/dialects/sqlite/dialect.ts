import type { Dialect } from '../../core/dialect.js';
import { openSqlite } from './connection.js';
import { sqliteReads } from './reads.js';
import { createSqliteLockStore } from './lock-store.js';
import { isSqliteMigrationRace, isSqliteLockWaitTimeout, isSqliteMissingTable } from './driver-errors.js';
import { sqliteColumnTypes, sqliteCreateTableSuffix } from './schema.js';

export const sqliteDialect: Dialect = {
  name: 'sqlite',
  quote: '"',
  columnTypes: sqliteColumnTypes,
  supportsSchemas: false,
  createTableSuffix: sqliteCreateTableSuffix,
  reads: sqliteReads,
  createLockStore: createSqliteLockStore,
  isMissingTable: isSqliteMissingTable,
  isLockWaitTimeout: isSqliteLockWaitTimeout,
  isMigrationRace: isSqliteMigrationRace,
  open: openSqlite,
};
