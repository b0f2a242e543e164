import type { Dialect } from '../../core/dialect.js';
import { openSqlite } from './connection.js';
import { sqliteHandles } from './handle.js';
import type { LazySqliteDatabase } from './statement-runner.js';
import { sqliteReads } from './reads.js';
import { createSqliteLockStore } from './lock-store.js';
import { sqliteMigrationLease } from './migration-lease.js';
import { isSqliteMigrationRace, isSqliteReadOnly, isSqliteLockWaitTimeout, isSqliteMissingTable } from './driver-errors.js';
import { sqliteColumnTypes, sqliteCreateTableSuffix } from './schema.js';
import { inspectSqliteServer } from './server-facts.js';

export const sqliteDialect: Dialect<LazySqliteDatabase> = {
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
  migrationLease: sqliteMigrationLease,
  inspectServer: inspectSqliteServer,
  isReadOnly: isSqliteReadOnly,
  handles: sqliteHandles,
  open: openSqlite,
};
