import type * as mysql2 from 'mysql2';
import type { Dialect } from '../../core/dialect.js';
import { openMysql } from './connection.js';
import { mysqlHandles } from './handle.js';
import { mysqlReads } from './reads.js';
import { createMysqlLockStore } from './lock-store.js';
import { mysqlMigrationLease } from './migration-lease.js';
import { isMysqlLockWaitTimeout, isMysqlMigrationRace, isMysqlMissingTable, isMysqlReadOnly } from './driver-errors.js';
import { createMysqlTakeProcedure } from './take-procedure.js';
import { mysqlFindTables, mysqlIndexExists, mysqlColumnTypes, mysqlCreateTableSuffix } from './schema.js';
import { inspectMysqlServer } from './server-facts.js';

export const mysqlDialect: Dialect<mysql2.Pool> = {
  name: 'mysql',
  quote: '`',
  columnTypes: mysqlColumnTypes,
  supportsSchemas: false,
  indexExists: mysqlIndexExists,
  findTables: mysqlFindTables,
  createTableSuffix: mysqlCreateTableSuffix,
  createRoutines: createMysqlTakeProcedure,
  reads: mysqlReads,
  createLockStore: createMysqlLockStore,
  isMissingTable: isMysqlMissingTable,
  isLockWaitTimeout: isMysqlLockWaitTimeout,
  isMigrationRace: isMysqlMigrationRace,
  migrationLease: mysqlMigrationLease,
  inspectServer: (db) => inspectMysqlServer(db),
  isReadOnly: isMysqlReadOnly,
  // A replica and a server set read-only look alike from a session: both have read_only on.
  readOnlyKind: () => Promise.resolve('server'),
  handles: mysqlHandles,
  open: openMysql,
};
